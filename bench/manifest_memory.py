"""Memory of `speco3 vet --manifest` against the number of inputs: the peak resident memory of a whole `vet` command
(reading the manifest, ids, resume bookkeeping, the run, predictions.csv and the closing summary) for manifests of
10^3, 10^4 and 10^5 entries, and of `--limit 100` on the largest.

    .venv/bin/python bench/manifest_memory.py [--sizes 1000 10000 100000]

The entries name files that do not exist, so every sample is a fast `read_error` record and the figures measure the
bookkeeping, not the plots (a real spectrum adds its own, constant, few MB while it is vetted). Each command runs in a
fresh process; its peak RSS comes from the kernel (`ru_maxrss` of the child).
"""
import argparse, resource, subprocess, sys, tempfile, time
from pathlib import Path


def peak_mb(args):
    "Peak RSS (MB) and seconds of one `speco3 vet` in a child process."
    t0 = time.perf_counter()
    code = subprocess.run([sys.executable, "-c", "import sys; from speco3.cli import main; sys.exit(main())", *args],
                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode
    wall = time.perf_counter() - t0
    if code not in (0, 1): raise SystemExit(f"speco3 vet failed ({code}): {' '.join(args)}")
    # the children are waited for one at a time, so ru_maxrss of RUSAGE_CHILDREN is the largest child so far
    return resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024, wall


def main(sizes):
    with tempfile.TemporaryDirectory() as d:
        base = ["vet", "--task", "cv", "--quiet", "--batch-size", "256"]
        print("python -c 'import speco3.cli' baseline:", end=" ")
        subprocess.run([sys.executable, "-c", "import speco3.cli, speco3.agent, speco3.inputs"])
        print(f"{resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024:.0f} MB")
        for n in sorted(sizes):   # ascending, so each child's peak is the running maximum
            m = Path(d) / f"list{n}.txt"
            m.write_text("".join(f"candidates/spec-{i:08d}.fits\n" for i in range(n)))
            mb, wall = peak_mb([*base, "--manifest", str(m), "--out", f"{d}/run{n}"])
            print(f"  {n:>7d} entries: peak {mb:7.1f} MB, {wall:6.1f} s")
        n = max(sizes)
        with tempfile.TemporaryDirectory() as d2:   # a fresh parent: RUSAGE_CHILDREN would still hold the big run's peak
            out = subprocess.run([sys.executable, "-c", f"import sys; sys.argv[1:] = {[*base, '--manifest', str(Path(d) / f'list{n}.txt'), '--limit', '100', '--out', d2 + '/run']!r}; "
                                  "import resource, subprocess; from speco3.cli import main; main(); "
                                  "print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)"],
                                 capture_output=True, text=True).stdout.split()[-1]
            print(f"  {n:>7d} entries, --limit 100: peak {float(out):7.1f} MB")


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[1000, 10000, 100000])
    main(ap.parse_args().sizes)
