"""The OpenAI-compatible policy (speco3.remote, from nbs/08c_remote.ipynb) against a local fake server: the wire
format of both tool modes, retries (500, 429 + Retry-After, timeouts, refused connections), failures that are not
retried (400, a broken body), per-episode errors, the concurrency bound, and a whole inspection."""
import base64, io, json, threading, time
from contextlib import contextmanager
from http.server import ThreadingHTTPServer, BaseHTTPRequestHandler

import numpy as np
import pytest
from PIL import Image

from speco3.agent import inspect, Sample
from speco3.policy import Episode
from speco3.prompts import system_text
from speco3.reward import parse
from speco3.remote import OpenAIPolicy, RemoteError, ENV_API_KEY, ENV_BASE_URL, ENV_MODEL
from speco3.spectrum import Spectrum
from speco3.tool import TOOL_NAME, TOOL_SCHEMA

KEY = "sk-test-0123456789"
ZOOM_TEXT = ('<think>Emission near 6563 Å; zoom.</think>\n<tool_call>{"name": "spectral_visualization_tool", '
             '"arguments": {"wavelength_range": [6480, 6650], "label": "H-alpha"}}</tool_call>')
ANSWER_TEXT = "<think>Broad Hα, FWHM about 28 Å.</think>\n<answer>\\boxed{YES}</answer>"


class FakeServer:
    """An OpenAI-style server on 127.0.0.1 in a thread. `respond(body, n)` (n = request number from 0) returns
    ("ok", message dict) | ("status", code, body bytes, headers) | ("raw", bytes) | ("sleep", s, action)
    | ("trickle", bytes, seconds per byte).
    It records headers and bodies of every request and the most requests it ever had in flight."""

    def __init__(self, respond):
        self.respond, self.requests, self.lock = respond, [], threading.Lock()
        self.in_flight = self.max_in_flight = 0
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                with fake.lock:
                    n = len(fake.requests)
                    body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                    fake.requests.append({"path": self.path, "headers": dict(self.headers), "body": body})
                    fake.in_flight += 1
                    fake.max_in_flight = max(fake.max_in_flight, fake.in_flight)
                self.counted = True
                try:
                    self.act(fake.respond(body, n))
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (a timeout test)
                finally:
                    self.done()

            def done(self):
                "The request stops counting as in flight: before its answer is written (a client that has read it may send the next at once)."
                if getattr(self, "counted", False):
                    self.counted = False
                    with fake.lock: fake.in_flight -= 1

            def act(self, action):
                kind = action[0]
                if kind == "sleep":
                    time.sleep(action[1]); return self.act(action[2])
                if kind == "ok":
                    out = json.dumps({"id": "x", "object": "chat.completion",
                                      "choices": [{"index": 0, "message": action[1], "finish_reason": "stop"}],
                                      "usage": {"prompt_tokens": 100, "completion_tokens": 10, "total_tokens": 110}}).encode()
                    return self.send(200, out)
                if kind == "raw": return self.send(200, action[1])
                if kind == "trickle": return self.trickle(action[1], action[2])
                return self.send(action[1], action[2], action[3] if len(action) > 3 else {})

            def send(self, code, data, headers={}):
                self.done()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for k, v in headers.items(): self.send_header(k, v)
                self.end_headers(); self.wfile.write(data)

            def trickle(self, data, delay):
                "A 200 reply whose body comes one byte every `delay` seconds (a server that never quite times out)."
                self.done()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers(); self.wfile.flush()
                for b in data:
                    self.wfile.write(bytes([b])); self.wfile.flush(); time.sleep(delay)

            def log_message(self, *a): pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads, self.server.block_on_close = True, False
        self.server.handle_error = lambda *a: None  # a hung handler writing to a closed socket is expected
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self.thread.start()
        self.url = f"http://127.0.0.1:{self.server.server_port}/v1"

    def close(self):
        self.server.shutdown(); self.server.server_close()


@contextmanager
def serve(respond):
    fake = FakeServer(respond)
    try: yield fake
    finally: fake.close()


def say(text): return ("ok", {"role": "assistant", "content": text})


def policy(fake, **kw):
    kw = {"model": "spec-o3-test", "base_url": fake.url, "api_key": KEY, "backoff": 0.01, "timeout": 5, **kw}
    return OpenAIPolicy(**kw)


def spectrum():
    w = np.linspace(3700, 9000, 3000)
    return Spectrum(w, 1 + 3 * np.exp(-0.5 * ((w - 6564.6) / 12) ** 2), meta={"id": "toy-cv"})


def episode(sample_id="s1", question="Is this a CV?", overview=(300, 200), tool_image=(120, 80), tool_round=True):
    "An episode as the agent builds it: system with the Hermes tool block, overview + question, optionally one zoom."
    msgs = [{"role": "system", "content": system_text(tools=True)},
            {"role": "user", "content": [{"type": "image", "image": Image.new("RGB", overview, "white")},
                                         {"type": "text", "text": question}]}]
    if tool_round:
        msgs += [{"role": "assistant", "content": ZOOM_TEXT},
                 {"role": "tool", "name": TOOL_NAME,
                  "content": [{"type": "image", "image": Image.new("RGB", tool_image, "white")},
                              {"type": "text", "text": "Generated spectral visualization focused on wavelength range [6480, 6650] Å for H-alpha."}]}]
    return Episode(sample_id, "cv", msgs, spectrum())


def png_size(url):
    assert url.startswith("data:image/png;base64,")
    im = Image.open(io.BytesIO(base64.b64decode(url.split(",", 1)[1])))
    assert im.format == "PNG"
    return im.size


# --- configuration -----------------------------------------------------------------------------------------------

def test_config_from_env_and_errors(monkeypatch):
    for k in (ENV_BASE_URL, ENV_API_KEY, ENV_MODEL): monkeypatch.delenv(k, raising=False)
    with pytest.raises(ValueError, match="SPECO3_MODEL"): OpenAIPolicy(base_url="http://localhost:8000/v1")
    with pytest.raises(ValueError, match="OPENAI_BASE_URL"): OpenAIPolicy(model="m")
    with pytest.raises(ValueError, match="not an http"): OpenAIPolicy(model="m", base_url="localhost:8000")
    with pytest.raises(ValueError, match="tool_mode"): OpenAIPolicy(model="m", base_url="http://h/v1", tool_mode="xml")
    with pytest.raises(ValueError, match="image_format"): OpenAIPolicy(model="m", base_url="http://h/v1", image_format="gif")
    with pytest.raises(ValueError, match="max_concurrency"): OpenAIPolicy(model="m", base_url="http://h/v1", max_concurrency=0)
    monkeypatch.setenv(ENV_BASE_URL, "http://user:pw@localhost:8000/v1/")
    monkeypatch.setenv(ENV_MODEL, "spec-o3-7b")
    monkeypatch.setenv(ENV_API_KEY, KEY)
    pol = OpenAIPolicy()
    assert pol.model == "spec-o3-7b" and pol.url == "http://user:pw@localhost:8000/v1/chat/completions"
    shown = repr(pol) + json.dumps(pol.describe())
    assert KEY not in shown and "pw" not in shown and pol.describe()["base_url"] == "http://localhost:8000/v1"
    assert OpenAIPolicy(model="explicit", base_url="http://other:1/v1").model == "explicit"  # arguments win


# --- wire format -------------------------------------------------------------------------------------------------

def test_text_mode_wire_format():
    with serve(lambda body, n: say(ANSWER_TEXT + "  ")) as fake:
        out = policy(fake, temperature=0.7, max_tokens=512, seed=3).act([episode()])
    assert out == [ANSWER_TEXT + "  "]  # the reply's text as is
    req = fake.requests[0]
    assert req["path"] == "/v1/chat/completions" and req["headers"]["Authorization"] == f"Bearer {KEY}"
    body = req["body"]
    assert (body["model"], body["temperature"], body["max_tokens"], body["seed"]) == ("spec-o3-test", 0.7, 512, 3)
    assert "tools" not in body and "top_p" not in body
    msgs = body["messages"]
    assert [m["role"] for m in msgs] == ["system", "user", "assistant", "user"]
    assert msgs[0]["content"] == system_text(tools=True) and "<tools>" in msgs[0]["content"]
    assert msgs[2]["content"] == ZOOM_TEXT  # raw text, <tool_call> included
    user, tool = msgs[1]["content"], msgs[3]["content"]
    assert [p["type"] for p in user] == ["image_url", "text"] and png_size(user[0]["image_url"]["url"]) == (300, 200)
    assert [p["type"] for p in tool] == ["text", "image_url", "text"]
    assert tool[0]["text"] == "<tool_response>\n" and tool[2]["text"].endswith("for H-alpha.\n</tool_response>")
    assert png_size(tool[1]["image_url"]["url"]) == (120, 80)


def test_native_mode_wire_format_and_reply():
    reply = ("ok", {"role": "assistant", "content": "<think>Check Hβ too.</think>", "tool_calls": [
        {"id": "abc", "type": "function", "function": {"name": TOOL_NAME, "arguments": '{"wavelength_range": [4800, 4920]}'}}]})
    with serve(lambda body, n: reply) as fake:
        out = policy(fake, tool_mode="native", temperature=None).act([episode()])[0]
    body = fake.requests[0]["body"]
    assert body["tools"] == [TOOL_SCHEMA] and "temperature" not in body  # None leaves a setting out
    msgs = body["messages"]
    assert [m["role"] for m in msgs] == ["system", "user", "assistant", "tool", "user"]
    assert msgs[0]["content"] == system_text(tools=False) and "<tools>" not in msgs[0]["content"]
    call = msgs[2]["tool_calls"][0]
    assert msgs[2]["content"] == "<think>Emission near 6563 Å; zoom.</think>" and "<tool_call>" not in msgs[2]["content"]
    assert call["type"] == "function" and call["function"]["name"] == TOOL_NAME
    assert json.loads(call["function"]["arguments"]) == {"wavelength_range": [6480, 6650], "label": "H-alpha"}
    assert msgs[3]["tool_call_id"] == call["id"] and msgs[3]["content"].startswith("Generated spectral visualization")
    assert [p["type"] for p in msgs[4]["content"]] == ["text", "image_url"]
    assert png_size(msgs[4]["content"][1]["image_url"]["url"]) == (120, 80)
    # the structured reply comes back as our text, which the reward parser reads
    p = parse(out)
    assert out.startswith("<think>Check Hβ too.</think>\n<tool_call>")
    assert [(c["name"], c["arguments"], c["error"]) for c in p.tool_calls] == [(TOOL_NAME, {"wavelength_range": [4800, 4920]}, None)]


def test_native_mode_without_tool_budget_sends_no_tools():
    ep = episode(tool_round=False); ep.max_tool_calls = 0  # the no-tool ablation
    with serve(lambda body, n: say(ANSWER_TEXT)) as fake:
        policy(fake, tool_mode="native").act([ep])
    assert "tools" not in fake.requests[0]["body"]


def test_jpeg_and_no_key():
    with serve(lambda body, n: say("ok")) as fake:
        policy(fake, api_key="", image_format="jpeg").act([episode(tool_round=False)])
    req = fake.requests[0]
    assert "Authorization" not in req["headers"]
    assert req["body"]["messages"][1]["content"][0]["image_url"]["url"].startswith("data:image/jpeg;base64,")


# --- retries and failures ------------------------------------------------------------------------------------------

def test_500_then_success_is_retried():
    with serve(lambda body, n: ("status", 500, b'{"error": {"message": "engine restarting"}}') if n == 0 else say("fine")) as fake:
        pol = policy(fake)
        out = pol.act([episode()])
    assert out == ["fine"] and len(fake.requests) == 2
    s = pol.stats()
    assert (s["n_requests"], s["n_ok"], s["n_retries"], s["prompt_tokens"], s["completion_tokens"]) == (1, 1, 1, 100, 10)
    assert pol.log[0]["attempts"] == 2 and pol.log[0]["latency_s"] >= 0


class Clock:
    "Stands in for the policy's pause between attempts: records the waits it asks for instead of waiting."
    def __init__(self): self.waits = []
    def pause(self, seconds): self.waits.append(seconds)


def test_429_honours_retry_after(monkeypatch):
    import speco3.remote as remote
    clock = Clock()
    monkeypatch.setattr(remote.OpenAIPolicy, "_pause", lambda policy, seconds: clock.pause(seconds))
    with serve(lambda body, n: ("status", 429, b'{"error": {"message": "slow down"}}', {"Retry-After": "7"}) if n == 0
               else say("fine")) as fake:
        out = policy(fake, backoff=0.001, timeout=10).act([episode()])
    assert out == ["fine"] and len(fake.requests) == 2
    assert clock.waits == [7.0]  # the server's 7 s, not the 1 ms backoff


@pytest.mark.parametrize("header, timeout", [("31", 2), ("600", 0.5), ("Wed, 21 Oct 2099 07:28:00 GMT", 3)])
def test_retry_after_never_waits_beyond_the_timeout(monkeypatch, header, timeout):
    import speco3.remote as remote
    clock = Clock()
    monkeypatch.setattr(remote.OpenAIPolicy, "_pause", lambda policy, seconds: clock.pause(seconds))
    with serve(lambda body, n: ("status", 429, b'{"error": {"message": "slow down"}}', {"Retry-After": header}) if n < 2
               else say("fine")) as fake:
        out = policy(fake, backoff=0.001, timeout=timeout).act([episode()])
    assert out == ["fine"] and clock.waits == [timeout, timeout]


def test_reply_size_is_capped(monkeypatch):
    "A reply whose Content-Length passes the cap is refused before it is read."
    import speco3.remote as remote
    monkeypatch.setattr(remote, "MAX_REPLY", 4096)
    big = json.dumps({"choices": [{"message": {"role": "assistant", "content": "x" * 10_000}}]}).encode()
    with serve(lambda body, n: ("raw", big)) as fake:
        err = policy(fake, max_retries=2).act([episode()])[0]
    assert isinstance(err, RemoteError) and "larger than 0.00390625 MiB" in str(err) and "refused" in str(err)
    assert len(fake.requests) == 1   # not retried: the same server gives the same reply


def test_reply_size_cap_without_content_length(monkeypatch):
    "A reply with no Content-Length (closed connection marks its end) is read up to the cap and refused."
    import speco3.remote as remote, socket
    monkeypatch.setattr(remote, "MAX_REPLY", 4096)
    srv = socket.socket(); srv.bind(("127.0.0.1", 0)); srv.listen(1)
    def answer():
        conn, _ = srv.accept()
        conn.recv(65536)
        conn.sendall(b"HTTP/1.0 200 OK\r\nContent-Type: application/json\r\n\r\n" + b"x" * 50_000)
        conn.close()
    t = threading.Thread(target=answer, daemon=True); t.start()
    pol = remote.OpenAIPolicy(model="m", base_url=f"http://127.0.0.1:{srv.getsockname()[1]}/v1", api_key="", max_retries=0, timeout=5)
    err = pol.act([episode()])[0]
    srv.close()
    assert isinstance(err, RemoteError) and "larger than" in str(err) and "MiB)" not in str(err)


def test_timeout_fails_one_episode_only():
    def respond(body, n):
        hang = "HANG" in json.dumps(body["messages"][1]["content"])
        return ("sleep", 1.5, say("late")) if hang else say("fine")
    with serve(respond) as fake:
        pol = policy(fake, timeout=0.3, max_retries=1)
        out = pol.act([episode("a"), episode("b", question="HANG please"), episode("c")])
    assert out[0] == "fine" and out[2] == "fine"
    err = out[1]
    assert isinstance(err, RemoteError) and err.status is None and err.attempts == 2
    assert "timeout" in str(err) and "(2 attempts)" in str(err) and "/v1/chat/completions" in str(err)
    assert pol.stats()["n_failed"] == 1 and pol.stats()["n_retries"] == 1


def test_malformed_body_is_not_retried():
    with serve(lambda body, n: ("raw", b'{"choices": [ not json')) as fake:
        pol = policy(fake)
        err = pol.act([episode()])[0]
    assert isinstance(err, RemoteError) and "not JSON" in str(err) and len(fake.requests) == 1
    assert "\n" not in str(err)


def test_400_is_not_retried_and_says_why():
    long = "image too large: " + "x" * 500 + f" (key {KEY})"
    with serve(lambda body, n: ("status", 400, json.dumps({"error": {"message": long}}).encode())) as fake:
        pol = policy(fake, max_retries=3)
        err = pol.act([episode()])[0]
    msg = str(err)
    assert isinstance(err, RemoteError) and err.status == 400 and err.attempts == 1 and len(fake.requests) == 1
    assert msg.startswith(f"POST {fake.url}/chat/completions: HTTP 400: image too large") and "(1 attempt)" in msg
    assert KEY not in msg and KEY not in json.dumps(pol.log) and "\n" not in msg and len(msg) < 400


def test_reply_without_choices_is_an_error():
    with serve(lambda body, n: ("raw", b'{"object": "error", "message": "model spec-o3 not found"}')) as fake:
        err = policy(fake).act([episode()])[0]
    assert isinstance(err, RemoteError) and "model spec-o3 not found" in str(err)


def test_connection_refused_is_retried_then_reported():
    with serve(lambda body, n: say("x")) as fake: url = fake.url  # closed again: nothing listens there
    pol = OpenAIPolicy(model="m", base_url=url, api_key=KEY, max_retries=2, backoff=0.01)
    err = pol.act([episode()])[0]
    assert isinstance(err, RemoteError) and "cannot connect" in str(err) and err.attempts == 3
    assert KEY not in str(err)


def test_bad_episode_is_an_error_item():
    bad = episode(); bad.messages[1]["content"][0] = {"type": "image"}  # a placeholder without the image
    with serve(lambda body, n: say("fine")) as fake:
        out = policy(fake).act([bad, episode("ok")])
    assert isinstance(out[0], ValueError) and "carries no image" in str(out[0]) and out[1] == "fine"
    assert len(fake.requests) == 1


# --- concurrency ---------------------------------------------------------------------------------------------------

def test_bounded_concurrency_and_order():
    def respond(body, n):
        sid = body["messages"][1]["content"][1]["text"]
        return ("sleep", 0.2, say(f"reply to {sid}"))
    eps = [episode(f"s{i}", question=f"q{i}", overview=(40, 30), tool_round=False) for i in range(12)]
    with serve(respond) as fake:
        pol = policy(fake, max_concurrency=4)
        out = pol.act(eps)
    assert out == [f"reply to q{i}" for i in range(12)]
    assert 2 <= fake.max_in_flight <= 4  # concurrent, never more than the bound (speed itself is a benchmark's business)


def test_image_encoded_once_per_episode(monkeypatch):
    import speco3.remote as remote
    calls = []
    real = remote._image_url
    monkeypatch.setattr(remote, "_image_url", lambda im, fmt="png": calls.append(im) or real(im, fmt))
    ep = episode()
    with serve(lambda body, n: say("x")) as fake:
        pol = policy(fake)
        pol.act([ep]); pol.act([ep])
    assert len(calls) == 2  # overview and zoom, encoded on the first step only


# --- end to end ----------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("mode", ["text", "native"])
def test_inspect_end_to_end(mode):
    def respond(body, n):
        seen_plot = any(m["role"] == "tool" or "<tool_response>" in json.dumps(m["content"]) for m in body["messages"][2:])
        if seen_plot: return say(ANSWER_TEXT)
        if "tools" in body:
            return ("ok", {"role": "assistant", "content": "<think>Emission near 6563 Å; zoom.</think>", "tool_calls": [
                {"id": "c0", "type": "function", "function": {"name": TOOL_NAME,
                                                              "arguments": '{"wavelength_range": [6480, 6650], "label": "H-alpha"}'}}]})
        return say(ZOOM_TEXT)
    with serve(respond) as fake:
        pol = policy(fake, tool_mode=mode)
        traj = inspect(Sample("toy-cv", "cv", spectrum(), "YES"), pol, style="fast")
    assert (traj.status, traj.prediction, traj.correct, traj.reward, traj.format_ok) == ("answered", "YES", True, 1.0, True)
    assert traj.n_tool_calls == 1 and traj.turns[0].results[0]["ok"] and traj.turns[0].results[0]["window"] == [6480.0, 6650.0]
    assert traj.policy["model"] == "spec-o3-test" and traj.policy["tool_mode"] == mode and KEY not in json.dumps(traj.policy)
    assert len(fake.requests) == 2
    second = fake.requests[1]["body"]["messages"]
    plot = [p for p in (second[-1]["content"] if isinstance(second[-1]["content"], list) else []) if p["type"] == "image_url"]
    assert second[-1]["role"] == "user" and len(plot) == 1
    assert png_size(plot[0]["image_url"]["url"]) == traj.turns[0].results[0]["image"].size
    assert png_size(second[1]["content"][0]["image_url"]["url"]) == traj.overview.size
    if mode == "native": assert second[-2]["role"] == "tool" and "tools" in fake.requests[1]["body"]
