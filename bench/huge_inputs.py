"""Bounded cost on huge inputs: peak memory and wall time of `speco3 vet --policy scripted` (the rule-based expert) on
(a) one spectrum of 10 million pixels, (b) the first 20 rows (--limit 20) of a 10 000-row parquet table written as
pyarrow writes it (one row group), (c) a LAMOST coadd of 50 rows (a real DR9 row repeated, each flux scaled).

    .venv/bin/python bench/huge_inputs.py [--pixels 10000000] [--rows 10000] [--coadd-rows 50] [--runs 3] [--before]

Each vet runs in a fresh process that reports its own peak RSS (VmHWM; getrusage where there is no /proc); the wall
time is the whole process as a user waits for it (interpreter start and imports included); medians over --runs.
--before also runs the path this change replaced, in the same way (no binning, a table read a whole row group at a
time, a LAMOST coadd read as one file) and prints the ratio; it needs about as much memory as it reports (about 9.4 GB
for 10 million pixels), so try it with --pixels 1000000 first. The inputs are simulated here (a synthetic spectrum;
real LAMOST rows copied), in a temporary folder removed at the end.

Measured on a shared 2-core CPU machine (its load varies: wall times are rough), `bench/huge_inputs.py --runs 3`:
(a) 921 MB, 9.8 s; (b) 287 MB, 8.9 s; (c) 174 MB, 18.1 s, 50 of 50 rows vetted. The path before, measured with
`/usr/bin/time -v speco3 vet FILE --task cv --policy scripted` on the same kind of inputs: (a) 9.4 GB, 188 s (the
expert's Gaussian fits over millions of pixels); (b) 6.8 GB, 112 s (the whole single row group read and turned into
Python lists); (c) not vetted at all ("COADD table holds 5 spectra; pass row=", one read_error). `--pixels 1000000
--rows 2000 --coadd-rows 10 --runs 1 --before`: (a) 180 MB, 4.7 s against 1102 MB, 21.2 s; (b) 279 MB, 15.9 s against
1515 MB, 41.3 s; (c) 10 of 10 rows vetted against 0.
"""
import argparse, json, statistics, subprocess, sys, tempfile, time
from pathlib import Path

import numpy as np

CHILD = r"""
import json, resource, sys
if sys.argv[1] == "before":   # the path before bounded cost: no binning, whole row groups, a coadd as one file
    import pyarrow.parquet as pq
    from speco3 import agent, inputs
    from speco3.io import science_targets
    agent.coarsen = lambda s: s
    def rows(path):
        f = pq.ParquetFile(path)
        for g in range(f.num_row_groups): yield from f.read_row_group(g).to_pylist()
    def targets(path):
        t = science_targets(path)
        return None if t is None else [{"targetid": x} for x in t]
    inputs.table_rows, inputs.spectra_of = rows, targets
from speco3.cli import main
code = main(sys.argv[2:])
def peak_kb():   # this process's own high-water mark (Linux); ru_maxrss would also count the parent's peak before exec
    try: return next(int(l.split()[1]) for l in open("/proc/self/status") if l.startswith("VmHWM:"))
    except (OSError, StopIteration): return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({"code": code, "peak_mb": peak_kb() / 1024}))
"""


def huge_spectrum(path, n):
    "A synthetic spectrum of `n` pixels over 3700-9100 Å: Hα in emission, Hβ in absorption, noise, ivar."
    from speco3.io import write_fits
    from speco3.spectrum import Spectrum
    w = np.linspace(3700, 9100, n)
    f = 1 + 0.3 * np.exp(-0.5 * ((w - 6564.6) / 3) ** 2) - 0.4 * np.exp(-0.5 * ((w - 4862.7) / 3) ** 2)
    f += np.random.default_rng(0).normal(0, 0.02, n)
    return write_fits(Spectrum(w, f, np.full(n, 2500.0), None, 0.0, {"id": "huge"}), path)


def big_table(path, n_rows):
    "`n_rows` copies of a real LAMOST spectrum (flux jittered by 1 %), one row group as `pq.write_table` writes it."
    import pyarrow as pa, pyarrow.parquet as pq
    from speco3.io import read_spectrum, real_spectra_dir
    s = read_spectrum(real_spectra_dir() / "raw" / "lamost" / "spec-55862-B6212_sp08-147.fits")
    n = len(s)
    offsets = pa.array(np.arange(n_rows + 1) * n, pa.int32())
    def lists(flat): return pa.ListArray.from_arrays(offsets, pa.array(flat))
    flux = (np.tile(s.flux, n_rows) * (1 + 0.01 * np.random.default_rng(0).normal(size=n * n_rows)))
    t = pa.table({"id": [f"r{i:05d}" for i in range(n_rows)], "wavelength": lists(np.tile(s.wavelength, n_rows)),
                  "flux": lists(flux), "ivar": lists(np.tile(s.ivar, n_rows)), "redshift": np.full(n_rows, s.redshift)})
    pq.write_table(t, path)
    return path


def coadd(path, k):
    "A LAMOST coadd of `k` rows: the COADD row of a real DR9 file repeated, row i's flux scaled by 1 + i/10."
    from astropy.io import fits
    from speco3.io import real_spectra_dir
    with fits.open(real_spectra_dir() / "raw" / "lamost" / "spec-60591-LN042429N340750BM01_sp01-004.fits.gz") as h:
        d, scale = h["COADD"].data, {"FLUX": (1 + np.arange(k) / 10)[:, None]}
        cols = [fits.Column(c.name, c.format, array=np.repeat(np.asarray(d[c.name]), k, axis=0) * scale.get(c.name, 1))
                for c in h["COADD"].columns]
        cards = [c for c in h[0].header.cards
                 if c.keyword not in ("SIMPLE", "BITPIX", "EXTEND") and not c.keyword.startswith("NAXIS")]
        hdus = [fits.PrimaryHDU(header=fits.Header(cards)), fits.BinTableHDU.from_columns(cols, name="COADD")]
        fits.HDUList(hdus).writeto(path)
    return path


def vet(path, args, out, which):
    "One `speco3 vet` in a fresh process: (peak MB, wall s, its closing line)."
    cmd = [sys.executable, "-c", CHILD, which, "vet", str(path), "--task", "cv", "--policy", "scripted", "--quiet",
           "--restart", "--out", str(out), *args]
    t0 = time.perf_counter()
    p = subprocess.run(cmd, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if p.returncode != 0 or not p.stdout.strip(): raise RuntimeError(f"{which} {path.name} failed:\n{p.stderr[-2000:]}")
    lines = p.stdout.strip().splitlines()
    said = next((l.split(" (")[0] for l in lines if l.startswith("vetted ")), "?")
    return json.loads(lines[-1])["peak_mb"], wall, said


def measure(name, path, args, tmp, runs, which):
    res = [vet(path, args, tmp / f"run-{which}", which) for _ in range(runs)]
    peak, wall = statistics.median(r[0] for r in res), statistics.median(r[1] for r in res)
    print(f"{name:34s} {which:6s} peak {peak:8.0f} MB  wall {wall:6.1f} s  ({res[-1][2]})", flush=True)
    return peak, wall


def main(pixels, rows, coadd_rows, runs, before):
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        cases = [(f"(a) one spectrum, {pixels:,} px", huge_spectrum(tmp / "huge.fits", pixels), []),
                 (f"(b) {rows:,}-row table, --limit 20", big_table(tmp / "table.parquet", rows), ["--limit", "20"]),
                 (f"(c) LAMOST coadd of {coadd_rows} rows", coadd(tmp / "coadd.fits", coadd_rows), [])]
        print(f"python {sys.version.split()[0]}; medians of {runs} run(s); "
              "inputs simulated from a synthetic spectrum and real LAMOST rows")
        for name, path, args in cases:
            now = measure(name, path, args, tmp, runs, "now")
            if before:
                old = measure(name, path, args, tmp, runs, "before")
                print(f"{'':34s} before/now: memory x{old[0] / now[0]:.1f}, time x{old[1] / now[1]:.1f}")


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pixels", type=int, default=10_000_000)
    ap.add_argument("--rows", type=int, default=10_000)
    ap.add_argument("--coadd-rows", type=int, default=50)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--before", action="store_true", help="also run the path this change replaced (needs its memory)")
    a = ap.parse_args()
    main(a.pixels, a.rows, a.coadd_rows, a.runs, a.before)
