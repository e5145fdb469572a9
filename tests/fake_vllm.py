#!/usr/bin/env python3
"""A stand-in for the `vllm` command in tests (vLLM does not install on our machines): `serve MODEL --port P` answers
GET /v1/models with MODEL and every chat request with a NO; `--crash` dies while "loading", `--hang` never answers."""
import json, sys, time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from threading import Lock
LOCK = Lock()
args = sys.argv[1:]
model, port = args[1], int(args[args.index("--port") + 1])
if "--crash" in args: sys.exit("fake vllm: CUDA out of memory while loading " + model)
if "--hang" in args: time.sleep(3600)
class Handler(BaseHTTPRequestHandler):
    def reply(self, obj):
        body = json.dumps(obj).encode()
        self.send_response(200); self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body))); self.end_headers(); self.wfile.write(body)
    def do_GET(self): self.reply({"object": "list", "data": [{"id": model, "object": "model"}]})
    def do_POST(self):
        self.rfile.read(int(self.headers["Content-Length"]))
        text = "<think>No broad Balmer emission.</think>\n<answer>\\boxed{NO}</answer>"
        self.reply({"id": "x", "object": "chat.completion", "model": model,
                    "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
                    "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}})
    def log_message(self, fmt, *a):  # one whole line per request, even when requests overlap
        with LOCK: sys.stdout.write("request " + " ".join(map(str, a)) + "\n"); sys.stdout.flush()
print("fake vllm serving", model, "on", port, flush=True)
ThreadingHTTPServer(("127.0.0.1", port), Handler).serve_forever()
