"""The closing list of `bin/test`: what did not run, and why.

    python tools/skip_summary.py SKIPS_TSV [nbdev_test arguments]

SKIPS_TSV holds one line per pytest skip (written by tests/conftest.py: source, declared|UNEXPECTED, test id, reason).
Notebook cells flagged slow/gpu/hub (settings.ini `tst_flags`) are counted from the notebooks, less the flags passed
with `--flags`. Exits 1 when a skip was not for a declared optional extra (the verl environment, a GPU)."""
import configparser, json, sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def flagged_cells(run_flags:set) -> Counter:
    "How many notebook code cells each test flag keeps out of this run."
    cfg = configparser.ConfigParser(); cfg.read(ROOT / "settings.ini")
    flags = set(cfg["DEFAULT"].get("tst_flags", "").split()) - run_flags
    counts = Counter()
    for nb in sorted((ROOT / "nbs").glob("*.ipynb")):
        for cell in json.loads(nb.read_text(encoding="utf-8"))["cells"]:
            if cell["cell_type"] != "code": continue
            for line in "".join(cell["source"]).splitlines()[:3]:
                words = line.replace("#|", "").split() if line.startswith("#|") else []
                counts.update(f for f in words if f in flags)
    return counts


def main(tsv, args):
    run_flags = set(args[args.index("--flags") + 1].split()) if "--flags" in args else set()
    for flag, k in sorted(flagged_cells(run_flags).items()):
        print(f"  notebook cells flagged '{flag}' not run: {k} (by design; bin/test --flags {flag} runs them)")
    rows = [l.rstrip("\n").split("\t") for l in Path(tsv).read_text(encoding="utf-8").splitlines() if l.strip()]
    declared = Counter(r[3] for r in rows if r[1] == "declared")
    for reason, k in declared.items(): print(f"  pytest tests skipped: {k}, {reason}")
    bad = [r for r in rows if r[1] != "declared"]
    for r in bad: print(f"  RAN SHORT (not a declared optional extra): {r[2]}: {r[3]}")
    if not declared and not bad: print("  every pytest test ran")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2:]))
