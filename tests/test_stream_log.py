"""Run logs read a line at a time (issue 42: memory flat in the number of inputs): resuming tidies a log with broken
lines, glued rows and a sample recorded twice exactly as the whole-file read did, and `speco3 vet --manifest` keeps its
peak memory nearly flat from 2 000 to 20 000 inputs."""
import json, resource, subprocess, sys, warnings
from speco3.agent import _finished, iter_trajectories, read_trajectories


def _log(path):
    rows = [{"sample_id": "a", "status": "answered", "v": 1}, {"sample_id": "b", "status": "read_error"}]
    text = "".join(json.dumps(r) + "\n" for r in rows)
    text += '{"sample_id": "x", "tor\n\n'                                         # a torn line, a blank line
    text += json.dumps({"sample_id": "c", "status": "answered"}) + json.dumps({"sample_id": "d", "status": "cannot_judge"}) + "\n"
    text += json.dumps({"sample_id": "a", "status": "answered", "v": 2}) + "\n"   # a sample twice: the last one counts
    path.write_text(text)
    return path


def test_resume_tidies_the_log_and_retries_the_failed(tmp_path):
    log = _log(tmp_path / "trajectories.jsonl")
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        done, retry = _finished(log, {"a", "b", "c", "d", "e"}, skip_failed=False)
    assert (done, retry) == ({"a", "c", "d"}, {"b"})
    assert any("skipped 1 broken line(s) (line 3)" in str(w.message) for w in said), [str(w.message) for w in said]
    rows = [json.loads(l) for l in log.read_text().splitlines()]
    assert [(r["sample_id"], r.get("v")) for r in rows] == [("c", None), ("d", None), ("a", 2)]
    assert list(iter_trajectories(tmp_path)) == read_trajectories(tmp_path) == rows
    before = log.read_bytes()
    assert _finished(log, {"a", "c", "d"}, skip_failed=False) == ({"a", "c", "d"}, set())
    assert log.read_bytes() == before   # a tidy log is left as it is


def test_skip_failed_keeps_failed_records(tmp_path):
    log = _log(tmp_path / "trajectories.jsonl")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        done, retry = _finished(log, {"a", "b"}, skip_failed=True)
    assert (done, retry) == ({"a", "b", "c", "d"}, set())
    assert [json.loads(l)["sample_id"] for l in log.read_text().splitlines()] == ["b", "c", "d", "a"]


def test_missing_log(tmp_path):
    assert _finished(tmp_path / "none.jsonl", {"a"}, skip_failed=False) == (set(), set())


def _peak_mb(tmp_path, n):
    "Peak RSS (MB) of `speco3 vet --manifest` over n inputs that do not exist (each a quick read_error record)."
    m = tmp_path / f"list{n}.txt"
    m.write_text("".join(f"candidates/spec-{i:08d}.fits\n" for i in range(n)))
    code = ("import resource, sys; from speco3.cli import main; code = main(sys.argv[1:]); "
            "print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)")
    out = subprocess.run([sys.executable, "-c", code, "vet", "--task", "cv", "--quiet", "--batch-size", "256",
                          "--manifest", str(m), "--out", str(tmp_path / f"run{n}")], capture_output=True, text=True)
    assert out.stdout.strip(), out.stderr[-2000:]
    return float(out.stdout.split()[-1])


def test_vet_memory_is_nearly_flat_in_the_number_of_inputs(tmp_path):
    small, large = _peak_mb(tmp_path, 2_000), _peak_mb(tmp_path, 20_000)
    # one id per input stays in memory (tens of bytes each); whole records (a few KB each) must not: before the logs
    # were streamed, 18 000 more inputs cost about 60 MB more
    assert large - small < 25, (small, large)
