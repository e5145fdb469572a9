"""SpecVI-Sim speed: simulated LAMOST spectra per second on one core (median of several runs).

    .venv/bin/python bench/simulate.py [--runs 5] [--n 32] [--instrument lamost]

Each run simulates `n` spectra of every kind in `speco3.simulate.KINDS` (positives and confusers alike, full
instrument chain, random SNR) and reports all spectra / wall time. One untimed warm-up run first (instrument
set-up and caches). BLAS/FFT threads are pinned to one so the figure is per core.
"""
import os
for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"): os.environ.setdefault(var, "1")
import argparse, platform, time
import numpy as np
from speco3.simulate import KINDS, simulate


def run(n, instrument, seed):
    "Spectra per second and per-kind seconds for one pass over all kinds."
    per_kind, t0 = {}, time.perf_counter()
    for kind in KINDS:
        t = time.perf_counter()
        simulate(kind, n=n, instrument=instrument, seed=seed)
        per_kind[kind] = time.perf_counter() - t
    return n * len(KINDS) / (time.perf_counter() - t0), per_kind


def main(runs, n, instrument):
    print(f"python {platform.python_version()}, numpy {np.__version__}; {len(KINDS)} kinds x {n} spectra per run, "
          f"instrument {instrument}, {runs} runs")
    run(4, instrument, seed=-1 % 2**31)  # warm-up: instrument set-up
    rates, kinds = [], []
    for r in range(runs):
        rate, per_kind = run(n, instrument, seed=r)
        rates.append(rate); kinds.append(per_kind)
        print(f"run {r}: {rate:.0f} spectra/s")
    slow = sorted(KINDS, key=lambda k: -np.median([pk[k] for pk in kinds]))[:3]
    print("slowest kinds: " + ", ".join(f"{k} {n / np.median([pk[k] for pk in kinds]):.0f}/s" for k in slow))
    print(f"median: {np.median(rates):.0f} {instrument} spectra/s on one core")


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--n", type=int, default=32)
    p.add_argument("--instrument", default="lamost")
    a = p.parse_args()
    main(a.runs, a.n, a.instrument)
