"""Check a toy run of an author's inputs (bin/reproduce gpu|paper --toy --data SNAPSHOT ...): every paper notebook finished,
and the main, SFT and GRPO predictions are on the snapshot's test rows (its names), each notebook's run record in place.
Usage: python tools/check_author_run.py RUN_DIR SNAPSHOT   (RUN_DIR: _toy/<profile>; exits 1 with one line per problem)"""
import json, sys
from pathlib import Path

root = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(root))


def problems(run, snapshot):
    import pandas as pd
    from speco3.agent import load_samples
    from speco3.bench import PAPER_TASKS
    out = []
    summary = run / "reproduce.json"
    if not summary.exists(): return [f"{summary}: missing (the run did not finish)"]
    rec = json.loads(summary.read_text())
    notebooks = sorted(p.stem for p in (root / "nbs" / "paper").glob("[0-9]*.ipynb"))
    if missing := [n for n in notebooks if f"{n}.ipynb" not in rec["wall_s"]]: out.append(f"notebooks that did not finish: {missing}")
    if not rec.get("inputs", {}).get("toy"): out.append(f"{summary}: not a --toy run (inputs: {rec.get('inputs')})")
    test = {(r["data_source"], r["extra_info"]["name"]) for t in PAPER_TASKS for r in load_samples(snapshot, task=t, split="test")}
    for target in ("main", "sft", "grpo"):
        files = sorted((run / "results" / target).glob("predictions_*.csv"))
        if not files: out.append(f"results/{target}: no predictions"); continue
        for f in files:
            df = pd.read_csv(f)
            rows = set(zip(df.task, df.sample_id.astype(str)))
            if not rows: out.append(f"{f.name}: empty")
            elif other := rows - test: out.append(f"results/{target}/{f.name}: {len(other)} rows not in the snapshot's test split, e.g. {sorted(other)[0]}")
    return out


if __name__ == "__main__":
    if len(sys.argv) != 3: sys.exit(__doc__)
    run, snapshot = Path(sys.argv[1]), Path(sys.argv[2])
    bad = problems(run, snapshot)
    for line in bad: print(f"check_author_run: {line}", file=sys.stderr)
    if bad: sys.exit(1)
    print(f"{run}: every paper notebook finished; main, SFT and GRPO predictions are on the test rows of {snapshot.name}")
