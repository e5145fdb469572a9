"""Vetting throughput on every core: spectra/s of `speco3 vet` with `--jobs 1` and `--jobs 2` in the same process
(median of several timed passes each, alternating, and their ratio), whether both wrote the same records, and the
cost of one spectrum split by stage, so a user can size a machine or a cluster.

    .venv/bin/python bench/vet_jobs.py [--n 300] [--runs 3] [--style spec-o3] [--jobs 1 2] [--batch-size 8]

The spectra are the first `n` rows of the project's real-spectra table (data/real-spectra/spectra.parquet: LAMOST,
SDSS, DESI and library spectra), vetted as CV candidates by the scripted expert with the paper's plots. A pass is the
whole `speco3.agent.run` into a fresh folder (worker start-up included). The load average before and after is printed:
on a shared machine other work takes cores, and the figures say so.
"""
import argparse, json, os, platform, statistics, tempfile, time
from pathlib import Path
import pyarrow.parquet as pq
from speco3.agent import run, as_sample, _Run, _drive, read_trajectories
from speco3.expert import ScriptedExpertPolicy
from speco3.io import real_spectra_dir


def untimed(rec):
    "A record without its timings, the only fields that differ between two runs of the same inputs."
    rec = {k: v for k, v in rec.items() if k != "timings"}
    rec["turns"] = [{k: v for k, v in t.items() if k not in ("model_s", "tool_s")} for t in rec["turns"]]
    return rec


def one_pass(rows, jobs, style, batch_size):
    "Seconds for one whole run over `rows` with `jobs` workers, and its records."
    with tempfile.TemporaryDirectory() as d:
        t0 = time.perf_counter()
        run(rows, ScriptedExpertPolicy(), d, task="cv", jobs=jobs, style=style, batch_size=batch_size, progress=False)
        wall = time.perf_counter() - t0
        return wall, [untimed(r) for r in read_trajectories(d)]


def stages(rows, style):
    "Median milliseconds per spectrum of each stage, one spectrum at a time in this process."
    pol, out = ScriptedExpertPolicy(), {k: [] for k in ("read", "overview plot", "policy (rules)", "zoom plots (tool)", "loop", "write PNGs + record")}
    with tempfile.TemporaryDirectory() as d:
        for row in rows:
            t0 = time.perf_counter(); s = as_sample(row, "cv")
            t1 = time.perf_counter(); r = _Run(s, pol, style, 8, True, True)
            t2 = time.perf_counter(); traj = _drive([r], pol, style, None, 0.2)[0]
            t3 = time.perf_counter(); traj.to_record(d)
            t4 = time.perf_counter()
            m, t = traj.timings["model_s"], traj.timings["tool_s"]
            for k, v in zip(out, (t1 - t0, t2 - t1, m, t, t3 - t2 - m - t, t4 - t3)): out[k].append(1e3 * v)
    return {k: statistics.median(v) for k, v in out.items()}


def main(n, runs, style, jobs, batch_size):
    rows = pq.ParquetFile(real_spectra_dir() / "spectra.parquet").read().slice(0, n).to_pylist()
    print(f"python {platform.python_version()}, {os.cpu_count()} cores, load average {os.getloadavg()[0]:.2f} before; "
          f"{len(rows)} real spectra, style {style}, batch size {batch_size}, median of {runs} passes")
    walls, recs = {j: [] for j in jobs}, {}
    one_pass(rows[:batch_size * max(jobs)], max(jobs), style, batch_size)   # warm-up: imports, fonts, disk cache
    for _ in range(runs):
        for j in jobs:
            wall, recs[j] = one_pass(rows, j, style, batch_size)
            walls[j].append(wall)
    rate = {j: len(rows) / statistics.median(w) for j, w in walls.items()}
    for j in jobs:
        print(f"  --jobs {j}: {rate[j]:7.2f} spectra/s  (passes {', '.join(f'{w:.1f}' for w in walls[j])} s)")
    base = jobs[0]
    for j in jobs[1:]:
        print(f"  ratio --jobs {j} / --jobs {base}: {rate[j] / rate[base]:.2f}x; same records: {recs[j] == recs[base]}")
    st = stages(rows[:min(len(rows), 60)], style)
    total = sum(st.values())
    print(f"per spectrum, one process (median of {min(len(rows), 60)} spectra): {total:.1f} ms")
    for k, v in st.items(): print(f"  {k:22s} {v:8.2f} ms  {100 * v / total:5.1f} %")
    print(f"load average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=300, help="real spectra to vet")
    ap.add_argument("--runs", type=int, default=3, help="timed passes per --jobs value (the median is printed)")
    ap.add_argument("--style", default="spec-o3", help="plot style (the paper's: spec-o3)")
    ap.add_argument("--jobs", type=int, nargs="+", default=[1, 2], help="worker counts to compare (the first is the baseline)")
    ap.add_argument("--batch-size", type=int, default=8)
    a = ap.parse_args()
    main(a.n, a.runs, a.style, a.jobs, a.batch_size)
