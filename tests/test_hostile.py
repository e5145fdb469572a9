"""Nothing hangs, nothing is lost: `speco3 vet` and its logs against hostile files, flaky servers and crashes.
Each numbered case of the reliability issue is a test here, bounded in time (an alarm per test, subprocess timeouts)
and memory (the folder-mix run is measured). Scripted policy and fast style unless a server is the point."""
import gzip, json, os, resource, signal, subprocess, sys, time, warnings
from pathlib import Path

import numpy as np
import pyarrow as pa, pyarrow.parquet as pq
import pytest
from astropy.io import fits

import speco3.coldstart as cs
from speco3.agent import Sample, read_trajectories, run
from speco3.cli import main
from speco3.files import append_jsonl, atomic_write, read_jsonl, run_lock
from speco3.io import SpectrumError, read_spectrum, real_spectra_dir, to_specvi_row, write_fits
from speco3.policy import Episode, ReplayPolicy
from speco3.remote import OpenAIPolicy
from speco3.spectrum import Spectrum, lamost_wavelength
from test_remote import serve, say

ROOT = Path(__file__).resolve().parents[1]
LAMOST = sorted((real_spectra_dir() / "raw" / "lamost").glob("*.fits*"))
GOOD = [p for p in LAMOST if p.name.endswith(".fits")][:2] + [p for p in LAMOST if p.name.endswith(".gz")][:1]
FAST = ["--policy", "scripted", "--style", "fast", "--quiet"]
YES = "<think>Broad Hα.</think><answer>\\boxed{YES}</answer>"


@pytest.fixture(autouse=True)
def bounded():
    "Every test here ends within 120 s, or fails saying so."
    def expire(*_): raise TimeoutError("test ran past 120 s")
    old = signal.signal(signal.SIGALRM, expire); signal.alarm(120)
    yield
    signal.alarm(0); signal.signal(signal.SIGALRM, old)


def toy(i=0, n=None):
    w = lamost_wavelength() if n is None else np.linspace(3800, 9000, n)
    return Spectrum(w, 1 + 3 * np.exp(-0.5 * ((w - 6564.6) / 12) ** 2), meta={"id": f"toy{i}"})


def records(run_dir): return {r["sample_id"]: r for r in read_trajectories(run_dir)}


def lines(run_dir): return (Path(run_dir) / "trajectories.jsonl").read_bytes().splitlines()


# --- hostile files ---------------------------------------------------------------------------------------------------

def bad_tform(path):
    "A FITS table whose column format is invalid (astropy raises VerifyError, not OSError/ValueError)."
    raw = bytearray(write_fits(toy(), path).read_bytes())
    i = raw.find(b"TFORM1  = '") + len(b"TFORM1  = '")
    raw[i:i + 2] = b"QZ"
    path.write_bytes(bytes(raw))
    return path


def bit_flipped(path):
    "A FITS file with CHECKSUM/DATASUM cards whose data has one flipped bit afterwards."
    h = fits.open(write_fits(toy(), path.with_suffix(".tmp.fits")))
    h.writeto(path, checksum=True)
    raw = bytearray(path.read_bytes())
    data_start = 2880 * 2 + 100  # inside the COADD table's data
    raw[data_start] ^= 0x01
    path.write_bytes(bytes(raw))
    return path


def gzip_bomb(path, gib=1):
    "A .fits.gz of a few MB that expands to `gib` GiB."
    zero = bytes(2**20)
    with gzip.open(path, "wb", compresslevel=1) as g:
        for _ in range(gib * 1024): g.write(zero)
    return path


def text_spectrum(path, wave, flux):
    path.write_text("wavelength,flux\n" + "".join(f"{float(w)!r},{float(f)!r}\n" for w, f in zip(wave, flux)))
    return path


def hostile_folder(d):
    "Every hostile file of the issue: name -> the reason `vet` must give for it (None: a good file, vetted)."
    d.mkdir(parents=True, exist_ok=True)
    w = np.linspace(3800, 9000, 200)
    odd = Path(os.fsdecode(os.fsencode(d) + b"/bad\xff.txt"))  # a lone surrogate in the name
    text_spectrum(odd, w, 1 + np.exp(-0.5 * ((w - 6564.6) / 12) ** 2))
    return {
        bad_tform(d / "bad_tform.fits"): "Invalid column format",
        bit_flipped(d / "flipped.fits"): "verification failed",
        gzip_bomb(d / "bomb.fits.gz"): "gzip bomb",
        text_spectrum(d / "one_pixel.txt", [5000.0], [1.0]): "cannot be drawn",
        text_spectrum(d / "few_finite.txt", w, np.r_[np.ones(3), np.full(197, np.nan)]): "cannot be drawn",
        text_spectrum(d / "huge_flux.txt", w, np.where(np.arange(200) % 2, 1e308, -1e308)): "cannot be drawn",
        odd: None,
    }


# --- case 2: one bad file never kills the batch ------------------------------------------------------------------

def test_invalid_tform_is_one_unreadable_input(tmp_path, capsys):
    bad = bad_tform(tmp_path / "bad.fits")
    with pytest.raises(SpectrumError, match="Invalid column format"): read_spectrum(bad)
    assert main(["vet", str(GOOD[0]), str(bad), "--task", "cv", "--out", str(tmp_path / "run"), *FAST]) == 0
    out, err = capsys.readouterr()
    assert f"speco3 vet: unreadable: {bad}: could not read (VerifyError: Invalid column format" in err
    assert out.startswith("vetted 1 of 2")
    assert records(tmp_path / "run")["bad.fits"]["status"] == "read_error"


def test_lone_surrogates_in_names_and_replies_are_recorded(tmp_path, capsys):
    w = np.linspace(3800, 9000, 300)
    odd = Path(os.fsdecode(os.fsencode(tmp_path) + b"/bad\xff.txt"))
    text_spectrum(odd, w, 1 + np.exp(-0.5 * ((w - 6564.6) / 12) ** 2))
    assert main(["vet", str(odd), str(GOOD[0]), "--task", "cv", "--out", str(tmp_path / "run"), *FAST]) == 0
    assert "vetted 2 of 2" in capsys.readouterr().out
    assert set(records(tmp_path / "run")) == {"bad\udcff.txt", GOOD[0].name}
    assert (tmp_path / "run" / "predictions.csv").exists()
    with serve(lambda body, n: say("<think>odd \ud800 byte</think><answer>\\boxed{YES}</answer>")) as fake:
        pol = OpenAIPolicy(model="m", base_url=fake.url, timeout=5, max_retries=0)
        run([Sample(f"s{i}", "cv", toy(i)) for i in range(3)], pol, tmp_path / "srv", progress=False, style="fast")
    recs = records(tmp_path / "srv")
    assert len(recs) == 3 and {r["prediction"] for r in recs.values()} == {"YES"}
    assert "\ud800" in recs["s0"]["turns"][0]["text"]


# --- case 3: failures are retried on the next run -------------------------------------------------------------------

def test_failed_samples_are_retried_or_skipped(tmp_path, capsys, monkeypatch):
    state = {"down": True}
    monkeypatch.setenv("SPECO3_MODEL", "m")
    late = tmp_path / "late.fits"  # missing on the first run
    with serve(lambda body, n: ("status", 500, b'{"error": "down"}') if state["down"] else say(YES)) as fake:
        monkeypatch.setenv("OPENAI_BASE_URL", fake.url)
        args = ["vet", str(GOOD[0]), str(GOOD[1]), str(late), "--task", "cv", "--out", str(tmp_path / "run"),
                "--policy", "openai:m", "--style", "fast", "--quiet", "--retries", "0", "--timeout", "5"]
        assert main(args) == 1
        err = capsys.readouterr().err
        assert "not vetted: " in err and "HTTP 500" in err and "unreadable: " in err
        state["down"] = False
        assert main(args + ["--skip-failed"]) == 1            # the permanently bad ones can be skipped
        assert "retried" not in capsys.readouterr().out
        write_fits(toy(), late)
        assert main(args) == 0
        out = capsys.readouterr().out
    assert "vetted 3 of 3" in out and "3 failed before and retried" in out
    recs = read_trajectories(tmp_path / "run")
    assert len(recs) == 3 and {r["status"] for r in recs} == {"answered"}
    assert json.loads((tmp_path / "run" / "summary.json").read_text())["n_retried"] == 3


# --- case 4: --task never relabels rows ------------------------------------------------------------------------------

def test_task_contradicting_rows_is_refused(tmp_path, capsys):
    rows = [to_specvi_row(toy(i), "cv", "YES", name=f"cv{i}", index=i) for i in range(2)]
    bench = tmp_path / "test_cv.parquet"
    pq.write_table(pa.Table.from_pylist(rows), bench)
    assert main(["vet", str(bench), "--task", "gm", "--out", str(tmp_path / "run"), *FAST]) == 1
    err = capsys.readouterr().err
    assert "--task gm contradicts the task the rows carry (2 cv rows)" in err and not (tmp_path / "run").exists()
    assert main(["vet", str(bench), "--task", "cv", "--out", str(tmp_path / "ok"), *FAST]) == 0


# --- case 5: remote waits are bounded --------------------------------------------------------------------------------

def trickled():
    body = json.dumps({"choices": [{"message": {"role": "assistant", "content": YES}}]}).encode()
    return body + b" " * 2000


def test_trickling_server_is_cut_at_the_timeout():
    with serve(lambda body, n: ("trickle", trickled(), 0.05)) as fake:
        pol = OpenAIPolicy(model="m", base_url=fake.url, timeout=1, max_retries=1, backoff=0.01)
        t0 = time.monotonic()
        out = pol.act([Episode("a", "cv", [{"role": "user", "content": "hi"}], toy())])
        took = time.monotonic() - t0
    assert took < 4, took  # two attempts of at most 1 s each, not 2000 × 0.05 s
    assert "timeout" in str(out[0]) and "(2 attempts)" in str(out[0])


def test_vet_timeout_and_retries_options(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("SPECO3_MODEL", "m")
    with serve(lambda body, n: ("trickle", trickled(), 0.05)) as fake:
        monkeypatch.setenv("OPENAI_BASE_URL", fake.url)
        t0 = time.monotonic()
        code = main(["vet", str(GOOD[0]), "--task", "cv", "--out", str(tmp_path / "run"), "--policy", "openai:m",
                     "--style", "fast", "--quiet", "--timeout", "0.5", "--retries", "1"])
        took = time.monotonic() - t0
        n = len(fake.requests)
    assert code == 1 and took < 8 and n == 2
    assert "within 0.5 s (timeout) (2 attempts)" in capsys.readouterr().err
    assert main(["vet", str(GOOD[0]), "--task", "cv", "--out", str(tmp_path / "r2"), *FAST, "--timeout", "3"]) == 1
    assert "apply to openai:<model> policies" in capsys.readouterr().err


def test_ctrl_c_stops_within_seconds_and_leaves_a_resumable_run(tmp_path):
    state = {"hang": True}
    env = {**os.environ, "SPECO3_MODEL": "m", "PYTHONPATH": str(ROOT), "MPLBACKEND": "Agg"}
    with serve(lambda body, n: ("trickle", trickled() * 50, 1.0) if state["hang"] else say(YES)) as fake:
        env["OPENAI_BASE_URL"] = fake.url
        cmd = [sys.executable, "-c", "import sys; from speco3.cli import main; sys.exit(main(sys.argv[1:]))", "vet",
               *map(str, GOOD), "--task", "cv", "--out", str(tmp_path / "run"), "--policy", "openai:m", "--style", "fast",
               "--quiet", "--batch-size", "1"]
        # a user's terminal delivers Ctrl-C to a process whose SIGINT is at its default; a shell that started this run in
        # the background (`cmd &`, nohup) leaves SIGINT ignored in every child, and Python then installs no handler
        p = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
        deadline = time.monotonic() + 60
        while not fake.requests and time.monotonic() < deadline and p.poll() is None: time.sleep(0.1)
        assert fake.requests, "no request reached the server"
        t0 = time.monotonic()
        p.send_signal(signal.SIGINT)
        try: _, err = p.communicate(timeout=15)
        except subprocess.TimeoutExpired:
            p.kill(); p.communicate(); pytest.fail("still running 15 s after Ctrl-C")
        assert time.monotonic() - t0 < 10 and p.returncode == 130 and b"interrupted" in err
        assert not (tmp_path / "run" / ".lock").exists()
        state["hang"] = False
        done = subprocess.run(cmd, env=env, capture_output=True, timeout=90)
    assert done.returncode == 0, done.stderr[-2000:]
    assert sorted(r["sample_id"] for r in read_trajectories(tmp_path / "run")) == sorted(p.name for p in GOOD)


# --- case 6: resume repair, one writer, cold-start logs ------------------------------------------------------------

def vetted(d, n=4, **kw):
    return run([Sample(f"toy{i}", "cv", toy(i)) for i in range(n)], ReplayPolicy([YES]), d, progress=False, style="fast", **kw)


def test_torn_middle_line_keeps_the_rows_after_it(tmp_path):
    vetted(tmp_path)
    rows = lines(tmp_path)
    (tmp_path / "trajectories.jsonl").write_bytes(b"\n".join([rows[0], rows[1][:40], *rows[2:]]) + b"\n")
    with pytest.warns(UserWarning, match=r"trajectories.jsonl: skipped 1 broken line\(s\) \(line 2\)"):
        s = vetted(tmp_path)
    assert s["n_run"] == 1 and s["n_resumed"] == 3  # only the torn one is vetted again
    assert sorted(records(tmp_path)) == [f"toy{i}" for i in range(4)] and len(lines(tmp_path)) == 4


def test_last_line_without_newline_gets_nothing_glued_on(tmp_path):
    vetted(tmp_path, n=2)
    jl = tmp_path / "trajectories.jsonl"
    jl.write_bytes(jl.read_bytes().rstrip(b"\n"))      # a complete row, its newline lost
    vetted(tmp_path, n=3)
    assert [json.loads(l)["sample_id"] for l in lines(tmp_path)] == ["toy0", "toy1", "toy2"]
    jl.write_bytes(jl.read_bytes() + b'{"sample_id": "toy3", "sta')  # a torn last line
    with pytest.warns(UserWarning, match="broken line"): vetted(tmp_path, n=4)
    assert [json.loads(l)["sample_id"] for l in lines(tmp_path)] == ["toy0", "toy1", "toy2", "toy3"]


def test_a_json_array_line_is_skipped_not_a_type_error(tmp_path):
    vetted(tmp_path, n=2)
    with open(tmp_path / "trajectories.jsonl", "ab") as f: f.write(b'[1, 2, 3]\n"text"\n{"no_id": 1}\n')
    for _ in range(2):  # every re-run works
        with warnings.catch_warnings(): warnings.simplefilter("ignore"); s = vetted(tmp_path, n=2)
        assert s["n_run"] == 0
    assert len(lines(tmp_path)) == 2


def test_one_writer_per_run_folder(tmp_path, capsys):
    with run_lock(tmp_path / "run"):
        assert main(["vet", str(GOOD[0]), "--task", "cv", "--out", str(tmp_path / "run"), *FAST]) == 1
        assert "in use by another process (pid" in capsys.readouterr().err
    dead = subprocess.Popen([sys.executable, "-c", "pass"]); dead.wait()
    (tmp_path / "run" / ".lock").write_text(f"{dead.pid} {os.uname().nodename}\n")   # left by a process that died
    assert main(["vet", str(GOOD[0]), "--task", "cv", "--out", str(tmp_path / "run"), *FAST]) == 0
    assert not (tmp_path / "run" / ".lock").exists()


def test_two_vets_on_one_folder_write_each_sample_once(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(ROOT), "MPLBACKEND": "Agg"}
    cmd = [sys.executable, "-c", "import sys; from speco3.cli import main; sys.exit(main(sys.argv[1:]))", "vet",
           *map(str, GOOD), "--task", "cv", "--out", str(tmp_path / "run"), *FAST, "--batch-size", "1"]
    procs = [subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE) for _ in range(2)]
    outs = [p.communicate(timeout=100) for p in procs]
    codes = sorted(p.returncode for p in procs)
    assert codes in ([0, 0], [0, 1]), outs
    if codes == [0, 1]: assert any(b"in use by another process" in e for _, e in outs)
    assert sorted(json.loads(l)["sample_id"] for l in lines(tmp_path / "run")) == sorted(p.name for p in GOOD)


def test_coldstart_logs_survive_torn_lines(tmp_path):
    samples = cs.simulate_samples(2, tasks=("cv",), seed=5)
    d = tmp_path / "drafts"
    recs = cs.draft(samples, d, drafter=ReplayPolicy([YES], name="t"), style="fast")
    with open(d / "trajectories.jsonl", "ab") as f: f.write(b'{"sample_id": "x", "tor')
    with pytest.warns(UserWarning, match="trajectories.jsonl"):
        assert len(cs.draft(samples, d, drafter=ReplayPolicy([YES], name="t"), style="fast")) == 2
    cs.export_review(d, recs, html=False)
    with open(d / "review_state.jsonl", "ab") as f: f.write(b'{"event": "vote", "sample_id": "')
    with pytest.warns(UserWarning, match="review_state.jsonl"):
        assert len(cs.review_status(d)) == 2
        assert cs.accepted_records(d) == []
        cs.export_review(d, html=False)
    assert read_jsonl(d / "review_state.jsonl", repair=True) and (d / "review_state.jsonl").read_bytes().endswith(b"\n")


# --- case 7: ids that sanitise alike --------------------------------------------------------------------------------

def test_colliding_ids_get_their_own_image_folders(tmp_path):
    run([Sample("p q.txt", "cv", toy(0)), Sample("p_q.txt", "cv", toy(1))], ReplayPolicy([YES]), tmp_path, progress=False, style="fast")
    a, b = (records(tmp_path)[k]["overview"] for k in ("p q.txt", "p_q.txt"))
    assert a["path"] != b["path"] and (tmp_path / a["path"]).exists() and (tmp_path / b["path"]).exists()


# --- case 8: spectra that cannot be drawn -------------------------------------------------------------------------

def test_undrawable_spectra_are_unreadable_for_any_policy(tmp_path):
    w = np.linspace(3800, 9000, 100)
    bad = [Sample("one", "cv", Spectrum(np.array([5000.0]), np.array([1.0]))),
           Sample("few", "cv", Spectrum(w, np.r_[np.ones(4), np.full(96, np.nan)])),
           Sample("huge", "cv", Spectrum(w, np.where(np.arange(100) % 2, 1e308, -1e308)))]
    with serve(lambda body, n: say(YES)) as fake:
        pol = OpenAIPolicy(model="m", base_url=fake.url, timeout=5, max_retries=0)
        run(bad + [Sample("ok", "cv", toy())], pol, tmp_path / "srv", progress=False, style="fast")
        n = len(fake.requests)
    recs = records(tmp_path / "srv")
    assert n == 1 and recs["ok"]["prediction"] == "YES"
    for s in ("one", "few", "huge"):
        assert recs[s]["status"] == "read_error" and "cannot be drawn" in recs[s]["error"], recs[s]
    from speco3.expert import ScriptedExpertPolicy
    run(bad, ScriptedExpertPolicy(), tmp_path / "scripted", progress=False, style="fast")
    assert {r["status"] for r in read_trajectories(tmp_path / "scripted")} == {"read_error"}


# --- case 9: bad numbers, atomic files, checksums, gzip bombs -------------------------------------------------------

@pytest.mark.parametrize("opt", [["--limit", "0"], ["--limit", "-1"], ["--batch-size", "-1"], ["--batch-size", "0"],
                                 ["--max-tool-calls", "-1"], ["--timeout", "0"], ["--retries", "-1"]])
def test_bad_numbers_are_refused(tmp_path, capsys, opt):
    assert main(["vet", str(GOOD[0]), "--task", "cv", "--out", str(tmp_path / "run"), *FAST, *opt]) == 2
    assert f"argument {opt[0]}: must be" in capsys.readouterr().err and not (tmp_path / "run").exists()


def test_library_refuses_bad_numbers(tmp_path):
    with pytest.raises(ValueError, match="batch_size must be >= 1"): vetted(tmp_path, batch_size=-1)
    with pytest.raises(ValueError, match="max_tool_calls must be >= 0"): vetted(tmp_path, max_tool_calls=-1)


def test_result_files_are_written_atomically(tmp_path, monkeypatch):
    vetted(tmp_path, n=1)
    before = (tmp_path / "summary.json").read_bytes()
    def crash(*a): raise OSError("disk full")
    monkeypatch.setattr(os, "replace", crash)
    with pytest.raises(OSError, match="disk full"): vetted(tmp_path, n=2)
    assert (tmp_path / "summary.json").read_bytes() == before and not list(tmp_path.glob(".tmp-*"))
    with pytest.raises(SpectrumError, match="disk full"): write_fits(toy(), tmp_path / "x.fits")
    assert not (tmp_path / "x.fits").exists() and not list(tmp_path.glob(".tmp-*"))
    monkeypatch.undo()
    def half(tmp): Path(tmp).write_text("half"); raise RuntimeError("killed")
    (tmp_path / "keep.txt").write_text("old")
    with pytest.raises(RuntimeError): atomic_write(tmp_path / "keep.txt", half)
    assert (tmp_path / "keep.txt").read_text() == "old"


def test_checksum_mismatch_is_refused(tmp_path):
    good = tmp_path / "good.fits"
    fits.open(write_fits(toy(), tmp_path / "plain.fits")).writeto(good, checksum=True)
    assert len(read_spectrum(good)) == len(toy())
    with pytest.raises(SpectrumError, match="corrupt FITS file.*verification failed"): read_spectrum(bit_flipped(tmp_path / "bad.fits"))


def test_gzip_bomb_is_refused_without_filling_memory(tmp_path):
    bomb = gzip_bomb(tmp_path / "bomb.fits.gz")
    assert bomb.stat().st_size < 16 * 2**20
    t0 = time.monotonic()
    with pytest.raises(SpectrumError, match="decompresses to more than 256 MiB"): read_spectrum(bomb)
    assert time.monotonic() - t0 < 30


# --- the bar: a folder mixing good and hostile files ----------------------------------------------------------------

def test_folder_of_good_and_hostile_files(tmp_path):
    bad = hostile_folder(tmp_path / "in")
    inputs = [*LAMOST, *bad, tmp_path / "in" / "missing.fits"]
    cmd = [sys.executable, "-c", "import sys; from speco3.cli import main; sys.exit(main(sys.argv[1:]))", "vet",
           *map(str, inputs), "--task", "cv", "--out", str(tmp_path / "run"), *FAST]
    t0 = time.monotonic()
    done = subprocess.run(cmd, env={**os.environ, "PYTHONPATH": str(ROOT), "MPLBACKEND": "Agg"}, capture_output=True, timeout=110)
    took = time.monotonic() - t0
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024  # bytes (Linux reports KiB)
    err = done.stderr.decode("utf-8", "surrogateescape")
    assert done.returncode == 0, err[-3000:]
    assert peak < 2 * 2**30, f"peak RSS {peak / 2**30:.2f} GiB"
    assert took < 100, took
    recs = records(tmp_path / "run")
    for p in [*LAMOST, *(p for p, why in bad.items() if why is None)]:
        assert recs[p.name]["status"] not in ("read_error", "policy_error"), recs[p.name]
    for p, why in bad.items():
        if why is None: continue
        assert recs[p.name]["status"] == "read_error" and why in recs[p.name]["error"], (p.name, recs[p.name]["error"])
        assert f"unreadable: {p}" in err or f"unreadable: {p.name}" in err, p.name
    assert "no such file" in recs["missing.fits"]["error"]
    n_good = len(LAMOST) + 1
    assert done.stdout.decode().startswith(f"vetted {n_good} of {len(inputs)}")
