"""Vetting throughput on every core: spectra/s of `speco3 vet` with `--jobs 1` and `--jobs 2` in the same process
(median of several timed passes each, alternating, and their ratio), whether both wrote the same records, and the
cost of one spectrum split by stage, so a user can size a machine or a cluster (docs/scaling.md does the arithmetic).

    .venv/bin/python bench/vet_jobs.py [--n 300] [--runs 3] [--style spec-o3] [--jobs 1 2] [--batch-size 8]
                                       [--cluster local:2 --shard-size 25] [--json bench/results/vet_jobs.json]

The spectra are the first `n` rows of the project's real-spectra table (data/real-spectra/spectra.parquet: LAMOST,
SDSS, DESI and library spectra), vetted as CV candidates by the scripted expert with the paper's plots. A pass is the
whole `speco3.agent.run` into a fresh folder (worker start-up included); with `--cluster`, also the whole
`speco3.cluster.vet_on_cluster` on a cluster started once before (its start-up is timed apart). The load average before
and after is printed: on a shared machine other work takes cores, and the figures say so. Every figure printed is also
written to `--json`.
"""
import argparse, datetime, json, os, platform, statistics, sys, tempfile, time
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


def disk(folder):
    "Bytes of every file under `folder` (a run folder: trajectories, images, summary)."
    return sum(p.stat().st_size for p in Path(folder).rglob("*") if p.is_file())


def one_pass(rows, jobs, style, batch_size):
    """Seconds for one whole run over `rows` with `jobs` workers, its records, the bytes of its run folder, and the CPU
    seconds of this process (all the work with --jobs 1; with more, the workers' is not in it)."""
    with tempfile.TemporaryDirectory() as d:
        t0, c0 = time.perf_counter(), time.process_time()
        run(rows, ScriptedExpertPolicy(), d, task="cv", jobs=jobs, style=style, batch_size=batch_size, progress=False)
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
        return wall, [untimed(r) for r in read_trajectories(d)], disk(d), cpu


def cluster_pass(rows, style, batch_size, cluster, shard_size):
    "Seconds for one whole `vet_on_cluster` over `rows` on a running cluster (a `distributed.Client`), and its records."
    from speco3.cluster import vet_on_cluster
    with tempfile.TemporaryDirectory() as d:
        t0 = time.perf_counter()
        vet_on_cluster(rows, ScriptedExpertPolicy(), d, cluster, task="cv", style=style, batch_size=batch_size,
                       shard_size=shard_size, progress=False)
        wall = time.perf_counter() - t0
        return wall, [untimed(r) for r in read_trajectories(d)]


def stages(rows, style):
    """Milliseconds per spectrum of each stage (lists, one value a spectrum), one spectrum at a time in this process,
    and the CPU milliseconds of each spectrum by coarser stage (what a core spends on it, however busy the machine)."""
    pol, out = ScriptedExpertPolicy(), {k: [] for k in ("read", "overview plot", "policy (rules)", "zoom plots (tool)", "loop", "write PNGs + record")}
    cpu, c = {k: [] for k in ("read", "overview plot", "policy and zoom plots", "write PNGs + record")}, [0.0] * 5
    with tempfile.TemporaryDirectory() as d:
        for row in rows:
            c[0] = time.process_time(); t0 = time.perf_counter(); s = as_sample(row, "cv")
            c[1] = time.process_time(); t1 = time.perf_counter(); r = _Run(s, pol, style, 8, True, True)
            c[2] = time.process_time(); t2 = time.perf_counter(); traj = _drive([r], pol, style, None, 0.2)[0]
            c[3] = time.process_time(); t3 = time.perf_counter(); traj.to_record(d)
            c[4] = time.process_time(); t4 = time.perf_counter()
            m, t = traj.timings["model_s"], traj.timings["tool_s"]
            for k, v in zip(out, (t1 - t0, t2 - t1, m, t, t3 - t2 - m - t, t4 - t3)): out[k].append(1e3 * v)
            for i, k in enumerate(cpu): cpu[k].append(1e3 * (c[i + 1] - c[i]))
    return out, cpu


def main(n, runs, style, jobs, batch_size, cluster=None, shard_size=25, json_out=None):
    rows = pq.ParquetFile(real_spectra_dir() / "spectra.parquet").read().slice(0, n).to_pylist()
    load_before = os.getloadavg()[0]
    print(f"python {platform.python_version()}, {os.cpu_count()} cores, load average {os.getloadavg()[0]:.2f} before; "
          f"{len(rows)} real spectra, style {style}, batch size {batch_size}, median of {runs} passes")
    walls, recs, cpus = {j: [] for j in jobs}, {}, []
    one_pass(rows[:batch_size * max(jobs)], max(jobs), style, batch_size)   # warm-up: imports, fonts, disk cache
    for _ in range(runs):
        for j in jobs:
            wall, recs[j], nbytes, cpu = one_pass(rows, j, style, batch_size)
            walls[j].append(wall)
            if j == 1: cpus.append(cpu)
    rate = {j: len(rows) / statistics.median(w) for j, w in walls.items()}
    for j in jobs:
        print(f"  --jobs {j}: {rate[j]:7.2f} spectra/s  (passes {', '.join(f'{w:.1f}' for w in walls[j])} s)")
    base, same = jobs[0], {}
    for j in jobs[1:]:
        same[j] = recs[j] == recs[base]
        print(f"  ratio --jobs {j} / --jobs {base}: {rate[j] / rate[base]:.2f}x; same records: {same[j]}")
    res = dict(jobs={str(j): dict(spectra_per_s=round(rate[j], 3), passes_s=[round(w, 3) for w in walls[j]])
                     for j in jobs},
               ratio={f"{j}/{base}": round(rate[j] / rate[base], 3) for j in jobs[1:]},
               same_records={str(j): v for j, v in same.items()}, disk_bytes_per_spectrum=round(nbytes / len(rows)))
    print(f"  run folder: {nbytes / len(rows) / 1e3:.1f} kB per spectrum (images, records, summary)")
    if cpus:
        res["jobs_1_cpu_ms_per_spectrum"] = round(1e3 * statistics.median(cpus) / len(rows), 1)
        print(f"  --jobs 1 CPU time: {res['jobs_1_cpu_ms_per_spectrum']:.1f} ms per spectrum (median of the passes)")
    if cluster:
        from speco3.cluster import connect
        cw, cr, t0 = [], None, time.perf_counter()
        with connect(cluster) as client:
            start = time.perf_counter() - t0
            for _ in range(runs):
                w, cr = cluster_pass(rows, style, batch_size, client, shard_size); cw.append(w)
        crate = len(rows) / statistics.median(cw)
        print(f"  --cluster {cluster} (shards of {shard_size}): {crate:7.2f} spectra/s  (passes "
              f"{', '.join(f'{w:.1f}' for w in cw)} s; start-up {start:.1f} s apart); same records: {cr == recs[base]}")
        res["cluster"] = dict(address=cluster, shard_size=shard_size, spectra_per_s=round(crate, 3),
                              start_s=round(start, 3), passes_s=[round(w, 3) for w in cw],
                              same_records=cr == recs[base])
    m = min(len(rows), 60)
    st, st_cpu = stages(rows[:m], style)
    med, mean = {k: statistics.median(v) for k, v in st.items()}, {k: statistics.fmean(v) for k, v in st.items()}
    total = sum(mean.values())
    print(f"per spectrum, one process ({m} spectra): mean {total:.1f} ms (sum of the stages' medians "
          f"{sum(med.values()):.1f} ms)")
    for k in st: print(f"  {k:22s} mean {mean[k]:8.2f} ms  {100 * mean[k] / total:5.1f} %   median {med[k]:8.2f} ms")
    cpu_mean = {k: statistics.fmean(v) for k, v in st_cpu.items()}
    cpu_total = sum(cpu_mean.values())
    print(f"CPU time per spectrum, same spectra: mean {cpu_total:.1f} ms (the wall times above include waiting for "
          "a core)")
    for k, v in cpu_mean.items(): print(f"  {k:22s} mean {v:8.2f} ms  {100 * v / cpu_total:5.1f} %")
    load_after = os.getloadavg()[0]
    print(f"load average after: {load_after:.2f}")
    if json_out:
        res = dict(bench="bench/vet_jobs.py", command=" ".join([Path(sys.executable).name, *sys.argv]),
                   date=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                   machine=dict(python=platform.python_version(), cores=os.cpu_count(), processor=platform.machine(),
                                load_average_before=round(load_before, 2), load_average_after=round(load_after, 2)),
                   inputs=dict(n=len(rows), table="data/real-spectra/spectra.parquet", task="cv", policy="scripted",
                               style=style, batch_size=batch_size, runs=runs),
                   **res, per_spectrum_ms=dict(n=m, mean={k: round(v, 3) for k, v in mean.items()},
                                               median={k: round(v, 3) for k, v in med.items()},
                                               mean_total=round(total, 3),
                                               cpu_mean={k: round(v, 3) for k, v in cpu_mean.items()},
                                               cpu_mean_total=round(cpu_total, 3)))
        Path(json_out).parent.mkdir(parents=True, exist_ok=True)
        Path(json_out).write_text(json.dumps(res, indent=1) + "\n")
        print(f"figures written to {json_out}")


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=300, help="real spectra to vet")
    ap.add_argument("--runs", type=int, default=3, help="timed passes per --jobs value (the median is printed)")
    ap.add_argument("--style", default="spec-o3", help="plot style (the paper's: spec-o3)")
    ap.add_argument("--jobs", type=int, nargs="+", default=[1, 2], help="worker counts to compare (the first is the baseline)")
    ap.add_argument("--batch-size", type=int, default=8)
    ap.add_argument("--cluster", help="also time vetting on this Dask cluster (e.g. local:2; needs speco3[cluster])")
    ap.add_argument("--shard-size", type=int, default=25, help="inputs per shard with --cluster")
    ap.add_argument("--json", default=str(Path(__file__).parent / "results" / "vet_jobs.json"),
                    help="where to write the figures (default bench/results/vet_jobs.json; '' for none)")
    a = ap.parse_args()
    main(a.n, a.runs, a.style, a.jobs, a.batch_size, a.cluster, a.shard_size, a.json)
