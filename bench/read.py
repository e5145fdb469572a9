"""Survey reader speed: milliseconds to read one real LAMOST/SDSS/DESI FITS file (median of several runs).

    .venv/bin/python bench/read.py [--runs 20]

Reads every raw survey file of the real-spectra collection (`data/real-spectra`, or $SPECO3_REAL_SPECTRA)
once untimed (disk cache), then `runs` times each, and prints the median per file and per survey (a DESI coadd
counts as one read of all its usable fibres).
"""
import argparse, platform, statistics, time
import warnings
from speco3.io import read_spectrum, read_spectra, real_spectra_dir
warnings.simplefilter("ignore")  # read_spectra reports the fibres it skips; not timing news


def main(runs):
    root = real_spectra_dir()
    files = sorted(p for p in (root / "raw").rglob("*") if p.name.endswith((".fits", ".fits.gz", ".fit")))
    print(f"python {platform.python_version()}; {len(files)} survey files, {runs} reads each")
    per_survey = {}
    for f in files:
        read = read_spectra if f.parent.name == "desi" else read_spectrum  # a DESI coadd: every usable fibre in it
        read(f)
        times = []
        for _ in range(runs):
            t0 = time.perf_counter(); read(f); times.append(time.perf_counter() - t0)
        ms = 1000 * statistics.median(times)
        per_survey.setdefault(f.parent.name, []).append(ms)
        print(f"  {f.parent.name:8s} {f.name:60s} {ms:7.2f} ms")
    for survey, ms in per_survey.items():
        print(f"{survey}: median {statistics.median(ms):.2f} ms per file over {len(ms)} files")


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=20)
    main(ap.parse_args().runs)
