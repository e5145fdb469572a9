"""speco3.judge against a local fake OpenAI-compatible judge: scores and preferences read strictly, a malformed reply
asked again (bounded) and then recorded as malformed, a server error recorded, and a run killed mid-way (SIGKILL of
the process) resumed without asking again what was answered."""
import json, os, signal, subprocess, sys, threading, time
from http.server import ThreadingHTTPServer, BaseHTTPRequestHandler
from pathlib import Path
import pytest

from speco3.judge import score_items, pair_items, run_judge, score_summary, preference_summary
from speco3.remote import OpenAIPolicy

GOOD = ("<think>Hα is in broad emission.</think>", "Hα is in broad emission")


def traj(sid, good):
    text = "<think>Hα is in broad emission, FWHM 30 Å; He II 4686 too.</think><answer>\\boxed{YES}</answer>" if good \
        else "<think>It is blue, so probably a star.</think><answer>\\boxed{NO}</answer>"
    return {"sample_id": sid, "task": "cv", "prediction": "YES" if good else "NO",
            "turns": [{"text": f"<think>Zoom on Hα of {sid}.</think>", "tool_calls": [{"name": "spectral_visualization_tool", "arguments": {"wavelength_range": [6480, 6650]}}],
                       "results": [{"text": "Generated spectral visualization focused on wavelength range (6480, 6650) Å."}]}, {"text": text}]}


def items():
    a, b = [traj(f"cv-{i}", True) for i in range(4)], [traj(f"cv-{i}", False) for i in range(4)]
    return score_items({"Expert": a, "Model": b}) + pair_items("Expert", a, "Model", b, seed=0)


def verdict(body):
    "The judge's honest reply: the trajectory that names broad emission is the better one."
    text = body["messages"][-1]["content"]
    if "Trajectory A:" in text:
        return json.dumps({"preference": "A" if "broad emission" in text.split("Trajectory B:")[0] else "B", "rationale": "x"})
    good = "broad emission, FWHM" in text
    return json.dumps({"coherence": 5 if good else 2, "physical_consistency": 4 if good else 1, "rationale": "y"})


class FakeJudge:
    "A /chat/completions server in a thread; `behave(n, body)` returns the reply text, an int HTTP status, or ('hang', s)."
    def __init__(self, behave):
        self.bodies, self.lock, fake = [], threading.Lock(), self
        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with fake.lock: n = len(fake.bodies); fake.bodies.append(body)
                act = behave(n, body)
                if isinstance(act, tuple): time.sleep(act[1]); act = verdict(body)
                if isinstance(act, int):
                    out = json.dumps({"error": {"message": "judge overloaded"}}).encode(); code = act
                else:
                    code = 200
                    out = json.dumps({"choices": [{"index": 0, "message": {"role": "assistant", "content": act}, "finish_reason": "stop"}]}).encode()
                try:
                    self.send_response(code); self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(out))); self.end_headers(); self.wfile.write(out)
                except OSError: pass
            def log_message(self, *a): pass
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads, self.server.block_on_close = True, False
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_port}/v1"

    def close(self): self.server.shutdown(); self.server.server_close()


def judge(fake, **kw):
    return OpenAIPolicy(model="fake-judge", base_url=fake.url, api_key="", backoff=0.01, timeout=5, **kw)


def test_scores_and_preferences_through_a_server(tmp_path):
    its = items()
    malformed_once = set()
    def behave(n, body):
        key = body["messages"][-1]["content"]
        if key not in malformed_once: malformed_once.add(key); return "Coherence 5/5, physics 4/5."   # every item's first reply
        return verdict(body)
    fake = FakeJudge(behave)
    try: got = run_judge(its, judge(fake), tmp_path / "judge.jsonl", max_retries=1, batch_size=4)
    finally: fake.close()
    assert len(fake.bodies) == 2 * len(its) and {r["status"] for r in got} == {"ok"} and {r["attempts"] for r in got} == {2}
    assert fake.bodies[0]["model"] == "fake-judge" and "tools" not in fake.bodies[0] and fake.bodies[0]["messages"][0]["role"] == "system"
    s = score_summary(got, n_boot=200)
    assert (s.loc["Expert", "coherence"], s.loc["Model", "coherence"], s.loc["Model", "physical_consistency"]) == (5.0, 2.0, 1.0)
    w = preference_summary(got, n_boot=200).loc[("Expert", "Model")]
    assert (w.compared, w.wins_a, w.win_rate_a) == (4, 4, 1.0)   # right whichever order each pair was shown in
    assert {r["judge"] for r in got} == {"fake-judge"}


def test_malformed_and_failed_replies_are_recorded_not_guessed(tmp_path):
    its = items()[:3]
    fake = FakeJudge(lambda n, body: "{\"coherence\": 9}" if n % 2 == 0 else "[]")
    try: got = run_judge(its, judge(fake, max_retries=0), tmp_path / "j.jsonl", max_retries=2)
    finally: fake.close()
    assert [(r["status"], r["attempts"]) for r in got] == [("malformed", 3)] * 3 and len(fake.bodies) == 9
    assert all("\n" not in r["error"] and ("need" in r["error"] or "not an object" in r["error"]) for r in got)
    assert "coherence" not in got[0] and score_summary(got).loc["Expert", "failed"] == 3
    down = FakeJudge(lambda n, body: 500)
    try: err = run_judge(its[:1], judge(down, max_retries=1), tmp_path / "k.jsonl")
    finally: down.close()
    assert err[0]["status"] == "error" and "HTTP 500" in err[0]["error"] and "judge overloaded" in err[0]["error"]
    fine = FakeJudge(lambda n, body: verdict(body))   # the next run asks the failed ones again
    try: again = run_judge(its, judge(fine), tmp_path / "j.jsonl")
    finally: fine.close()
    assert {r["status"] for r in again} == {"ok"} and len(fine.bodies) == 3


def test_a_killed_run_resumes(tmp_path):
    its = items()
    (tmp_path / "items.json").write_text(json.dumps(its))
    slow = FakeJudge(lambda n, body: verdict(body) if n < 2 else ("hang", 60))   # the second batch never returns
    code = ("import json, sys; from pathlib import Path; from speco3.judge import run_judge; from speco3.remote import OpenAIPolicy\n"
            f"j = OpenAIPolicy(model='fake-judge', base_url={slow.url!r}, api_key='', timeout=120)\n"
            f"run_judge(json.loads(Path({str(tmp_path / 'items.json')!r}).read_text()), j, Path({str(tmp_path / 'judge.jsonl')!r}), batch_size=2)\n")
    proc = subprocess.Popen([sys.executable, "-c", code], env=os.environ.copy())
    try:
        out = tmp_path / "judge.jsonl"
        for _ in range(600):
            if out.exists() and len(out.read_text().splitlines()) >= 2 and len(slow.bodies) >= 4: break
            assert proc.poll() is None, "the judge run ended before it could be killed"
            time.sleep(0.05)
        proc.send_signal(signal.SIGKILL); proc.wait(10)
    finally: slow.close()
    written = [json.loads(l) for l in out.read_text().splitlines()]
    assert len(written) == 2 and {r["status"] for r in written} == {"ok"}
    fast = FakeJudge(lambda n, body: verdict(body))
    try: got = run_judge(its, judge(fast), out, batch_size=2)   # the dead process's lock is taken over
    finally: fast.close()
    assert len(fast.bodies) == len(its) - 2 and [r["key"] for r in got] == [i["key"] for i in its]
    assert {r["status"] for r in got} == {"ok"} and len(out.read_text().splitlines()) == len(its)
