"""The general-VLM rows (nbs/paper/10_general_vlms.ipynb, speco3.vlms) against a local fake OpenAI-compatible server:
the notebook vets SpecVI-Sim test rows through the tool, writes a predictions file and a table row scored like every
other policy; with no endpoint configured it records a skip and writes no numbers."""
import json, threading
from http.server import ThreadingHTTPServer, BaseHTTPRequestHandler
from pathlib import Path
import pytest

pm = pytest.importorskip("papermill", reason="papermill is not installed (pip install 'speco3[dev]')")
from speco3.bench import build
from speco3.metrics import read_predictions, predictions_frame, evaluate

PAPER = Path(__file__).resolve().parent.parent / "nbs" / "paper"
KEY = "sk-fake-vlm-0123456789"
ZOOM = ('<think>Look at H-alpha first.</think>\n<tool_call>{"name": "spectral_visualization_tool", '
        '"arguments": {"wavelength_range": [6480, 6650], "label": "H-alpha"}}</tool_call>')
SAY = "<think>The zoom shows what I needed.</think>\n<answer>\\boxed{%s}</answer>"


class FakeVLM:
    "An OpenAI-style /chat/completions server in a thread: a zoom first, then a boxed answer (YES every third request)."
    def __init__(self):
        self.requests, fake = [], self
        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                fake.requests.append({"auth": self.headers.get("Authorization"), "body": body})
                zoomed = any("<tool_response>" in json.dumps(m.get("content")) for m in body["messages"] if m["role"] == "user")
                text = SAY % ("YES" if len(fake.requests) % 3 == 0 else "NO") if zoomed else ZOOM
                out = json.dumps({"choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
                                  "usage": {"prompt_tokens": 50, "completion_tokens": 20}}).encode()
                self.send_response(200); self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(out))); self.end_headers(); self.wfile.write(out)
            def log_message(self, *a): pass
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_port}/v1"

    def close(self): self.server.shutdown(); self.server.server_close()


def run_notebook(out, **params):
    pm.execute_notebook(str(PAPER / "10_general_vlms.ipynb"), str(out / "10.ipynb"), parameters=dict(profile="smoke", out_dir=str(out), **params),
                        kernel_name="python3", cwd=str(PAPER), progress_bar=False, log_output=False)
    res = out / "results" / "general_vlms"
    return res, json.loads((res / "summary.json").read_text())


@pytest.fixture(scope="module")
def tiny_bench(tmp_path_factory):
    d = tmp_path_factory.mktemp("bench") / "specvi-sim"
    build(d, profile="smoke", seed=0, progress=False, images=False,
          sizes=dict(train=2, test=3, cross_survey=0, cross_task=0, qso=0, cv_lowsnr=0, weak_train=30, archive_chunk=300))
    return d


def test_rows_from_a_fake_server(tmp_path, tiny_bench, monkeypatch):
    for k in ("OPENAI_BASE_URL", "SPECO3_MODEL", "OPENAI_API_KEY"): monkeypatch.delenv(k, raising=False)
    monkeypatch.setenv("FAKE_VLM_KEY", KEY)
    fake = FakeVLM()
    try:
        res, summary = run_notebook(tmp_path, data_dir=str(tiny_bench), base_url=fake.url, model="fake-vlm", api_key_env="FAKE_VLM_KEY",
                                    n_per_task=2, style="fast")
    finally: fake.close()
    assert summary["status"] == "ran" and summary["rows"] == ["fake-vlm"] and summary["traffic"]["requests"]["n_failed"] == 0
    recs = read_predictions(res / "predictions_fake-vlm.csv")
    assert len(recs) == 10 and {r["task"] for r in recs} == {"cv", "carbon", "gm", "ss", "wd"}
    assert {r["n_tool_calls"] for r in recs} == {1} and all(r["windows"] == [[6480.0, 6650.0]] for r in recs)
    assert {r["strict_prediction"] for r in recs} <= {"YES", "NO"} and all(r["format_ok"] for r in recs)
    assert len(fake.requests) == 20 and {q["auth"] for q in fake.requests} == {f"Bearer {KEY}"}   # a zoom and an answer per row
    assert "spectral_visualization_tool" in fake.requests[0]["body"]["messages"][0]["content"]      # the tool in the system prompt
    e = evaluate(predictions_frame(recs), n_boot=1000, seed=0).summary
    table = __import__("pandas").read_csv(res / "vlm_table.csv", index_col="policy")
    assert table.loc["fake-vlm", "macro_f1"] == pytest.approx(round(100 * e["macro_f1"], 2))
    assert table.loc["fake-vlm", "macro_f1_lo"] <= table.loc["fake-vlm", "macro_f1"] <= table.loc["fake-vlm", "macro_f1_hi"]
    assert (table.loc["fake-vlm", "tool_use"], table.loc["fake-vlm", "calls_mean"]) == (100.0, 1.0)
    for f in res.iterdir():   # the key travels in a header only, never into a results file
        assert KEY not in f.read_text(), f.name


def test_no_endpoint_is_a_recorded_skip(tmp_path, monkeypatch):
    for k in ("OPENAI_BASE_URL", "SPECO3_MODEL"): monkeypatch.delenv(k, raising=False)
    res, summary = run_notebook(tmp_path)
    assert summary["status"] == "skipped" and "no endpoint configured" in summary["reason"] and summary["rows"] == []
    assert not list(res.glob("predictions_*.csv")) and not (tmp_path / "data").exists()   # nothing vetted, no benchmark built
    assert json.loads((res / "run.json").read_text())["profile"] == "smoke"
