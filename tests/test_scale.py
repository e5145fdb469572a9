"""Vetting at scale: `speco3 vet --jobs N` writes what `--jobs 1` writes (same records, same order, same image bytes),
and a run killed with kill -9 mid-way, workers and all, resumes without losing or duplicating a sample. Real spectra
from the project's own copy, the scripted expert, the paper's plots (style spec-o3)."""
import json, os, signal, subprocess, sys, time
from pathlib import Path

import pytest

from speco3.cli import main
from speco3.io import real_spectra_dir

TABLE = real_spectra_dir() / "spectra.parquet"
VET = ["--task", "cv", "--policy", "scripted", "--style", "spec-o3", "--quiet"]
REPO = Path(__file__).resolve().parents[1]


def records(run):
    return [json.loads(line) for line in (run / "trajectories.jsonl").read_text().splitlines()]


def untimed(rec):
    "A record without its timings, the only fields that differ between two runs of the same inputs."
    rec = {k: v for k, v in rec.items() if k != "timings"}
    rec["turns"] = [{k: v for k, v in t.items() if k not in ("model_s", "tool_s")} for t in rec["turns"]]
    return rec


def images(run):
    "Every image file of a run folder and its bytes."
    return {str(p.relative_to(run)): p.read_bytes() for p in sorted((run / "images").rglob("*.png"))}


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    "A --jobs 1 run over the first 40 rows of the real-spectra table."
    run = tmp_path_factory.mktemp("ref") / "run"
    assert main(["vet", str(TABLE), "--limit", "40", "--out", str(run), *VET]) == 0
    return run


def test_jobs_2_writes_what_jobs_1_writes(reference, tmp_path, capsys):
    run = tmp_path / "run"
    assert main(["vet", str(TABLE), "--limit", "40", "--out", str(run), "--jobs", "2", *VET]) == 0
    got, want = records(run), records(reference)
    assert [r["sample_id"] for r in got] == [r["sample_id"] for r in want]     # the same order
    assert [untimed(r) for r in got] == [untimed(r) for r in want]             # answers, turns, image hashes
    assert images(run) == images(reference)                                    # the image files, byte for byte
    assert (run / "predictions.csv").read_bytes() == (reference / "predictions.csv").read_bytes()
    assert json.loads((run / "summary.json").read_text())["jobs"] == 2


def _session(pid):
    "The pids of the processes of session `pid` (the killed run and its workers), by `ps`."
    out = subprocess.run(["ps", "-o", "pid=", "-s", str(pid)], capture_output=True, text=True).stdout
    return {int(p) for p in out.split()}


@pytest.mark.parametrize("kill_group", [True, False])
def test_kill_9_mid_run_then_resume_loses_and_duplicates_nothing(reference, tmp_path, capsys, kill_group):
    run = tmp_path / "run"
    cmd = [sys.executable, "-c", "import sys; from speco3.cli import main; sys.exit(main())",
           "vet", str(TABLE), "--limit", "40", "--out", str(run), "--jobs", "2", "--batch-size", "4", *VET]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    p = subprocess.Popen(cmd, env=env, start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    log, t0 = run / "trajectories.jsonl", time.time()
    while not (log.exists() and log.read_bytes().count(b"\n") >= 8):
        assert p.poll() is None, p.stderr.read().decode()
        assert time.time() - t0 < 120, "the run wrote nothing in two minutes"
        time.sleep(0.05)
    if kill_group: os.killpg(p.pid, signal.SIGKILL)   # the run and its workers
    else: os.kill(p.pid, signal.SIGKILL)              # the parent only: its workers must end by themselves
    p.wait()
    deadline = time.time() + 10
    while _session(p.pid) and time.time() < deadline: time.sleep(0.1)
    assert not _session(p.pid), "orphaned workers still run"
    n_killed = len(records(run))
    assert 8 <= n_killed < 40, n_killed                       # killed mid-run
    assert main(["vet", str(TABLE), "--limit", "40", "--out", str(run), "--jobs", "2", *VET]) == 0
    got = records(run)
    assert [untimed(r) for r in got] == [untimed(r) for r in records(reference)]   # nothing lost, nothing twice, same order
    assert images(run) == images(reference)
    summary = json.loads((run / "summary.json").read_text())
    assert (summary["n_resumed"], summary["n_run"]) == (n_killed, 40 - n_killed)


RAW = real_spectra_dir() / "raw"


def test_manifest_text_parquet_and_folder_vet_the_same_files(tmp_path, capsys):
    files = sorted(str(p) for p in (RAW / "lamost").glob("*.fits"))[:3]
    text = tmp_path / "list.txt"
    text.write_text("# three LAMOST files\n" + "\n".join(files) + "\n")
    import pyarrow as pa, pyarrow.parquet as pq
    pq.write_table(pa.table({"path": files}), tmp_path / "list.parquet")
    folder = tmp_path / "folder"
    folder.mkdir()
    for f in files: (folder / Path(f).name).symlink_to(f)
    (folder / "notes.md").write_text("not a spectrum\n")
    runs = {}
    for name, manifest in (("text", text), ("parquet", tmp_path / "list.parquet"), ("folder", folder)):
        runs[name] = tmp_path / "runs" / name
        assert main(["vet", "--manifest", str(manifest), "--out", str(runs[name]), "--style", "fast", *VET[:4], "--quiet"]) == 0
    assert [untimed(r) for r in records(runs["parquet"])] == [untimed(r) for r in records(runs["text"])]
    assert [r["sample_id"] for r in records(runs["folder"])] == sorted(Path(f).name for f in files)
    assert capsys.readouterr().out.splitlines()[-1].startswith("vetted 3 of 3: ")
    assert main(["vet", "--manifest", str(folder), "--out", str(folder / "run"), *VET[:4]]) == 1   # its outputs would be inputs
    assert capsys.readouterr().err.startswith(f"speco3 vet: --out {folder}/run is inside the folder --manifest {folder} walks")
    assert not (folder / "run").exists()


def test_manifest_limit_and_bad_manifests(tmp_path, capsys):
    text = tmp_path / "list.txt"
    text.write_text("".join(f"missing-{i}.fits\n" for i in range(1000)) + f"{TABLE}\n")
    assert main(["vet", "--manifest", str(text), "--limit", "5", "--out", str(tmp_path / "run"), *VET]) == 1
    said = [l for l in capsys.readouterr().err.splitlines() if l.startswith("speco3 vet: unreadable: ")]
    assert said == [f"speco3 vet: unreadable: {tmp_path}/missing-{i}.fits: no such file" for i in range(5)]  # --limit 5 read 5
    assert not (tmp_path / "run").exists()                                   # nothing read: no run folder left behind
    (tmp_path / "empty.txt").write_text("\n# nothing here\n")
    for manifest, why in ((tmp_path / "nope.txt", f"manifest {tmp_path}/nope.txt: no such file or folder"),
                          (tmp_path / "empty.txt", f"manifest {tmp_path}/empty.txt: lists no inputs")):
        assert main(["vet", "--manifest", str(manifest), "--out", str(tmp_path / "r2"), *VET]) == 1
        assert capsys.readouterr().err.strip() == f"speco3 vet: {why}"
    assert main(["vet", "--out", str(tmp_path / "r3"), *VET]) == 1
    assert capsys.readouterr().err.strip().startswith("speco3 vet: no inputs: ")
    assert not (tmp_path / "r2").exists() and not (tmp_path / "r3").exists()


def test_concurrency_sets_requests_in_flight_of_a_served_model(tmp_path, monkeypatch, capsys):
    from test_remote import serve, say, ANSWER_TEXT
    from speco3.remote import ENV_BASE_URL, ENV_API_KEY
    args = ["vet", str(TABLE), "--limit", "12", "--task", "cv", "--policy", "openai:spec-o3-test", "--style", "fast", "--quiet"]
    with serve(lambda body, n: ("sleep", 0.5, say(ANSWER_TEXT))) as fake:
        monkeypatch.setenv(ENV_BASE_URL, fake.url); monkeypatch.setenv(ENV_API_KEY, "sk-test-0123456789")
        assert main([*args, "--out", str(tmp_path / "c12"), "--concurrency", "12", "--timeout", "10", "--retries", "0"]) == 0
        assert fake.max_in_flight == 12            # the default would allow 8, and batches of 8
        fake.max_in_flight = 0
        assert main([*args, "--out", str(tmp_path / "j2"), "--concurrency", "3", "--jobs", "2"]) == 0
        assert 3 < fake.max_in_flight <= 6         # two workers, three requests each at most
    same = lambda run: [{**untimed(r), "policy": None} for r in records(run)]   # the policy's runtime settings differ, by design
    assert same(tmp_path / "j2") == same(tmp_path / "c12") and {r["prediction"] for r in records(tmp_path / "j2")} == {"YES"}
    assert json.loads((tmp_path / "c12" / "run_config.json").read_text()) == json.loads((tmp_path / "j2" / "run_config.json").read_text())
