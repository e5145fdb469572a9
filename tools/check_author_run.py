"""Check a toy run of an author's inputs (bin/reproduce gpu|paper --toy --data SNAPSHOT ...): every paper notebook finished;
the main, SFT and GRPO predictions are on the snapshot's test rows (by their index ids, such as wd_test_3); SFT and GRPO ran the profile's recipe
(recorded by name, the spec-o3 plots, the paper's 7 tool calls at paper), SFT on the authors' cold-start set, GRPO by
its epochs (no step count given, the planned steps all taken).
Usage: python tools/check_author_run.py RUN_DIR SNAPSHOT   (RUN_DIR: _toy/<profile>; exits 1 with one line per problem)"""
import json, sys
from pathlib import Path

root = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(root))


def problems(run, snapshot):
    import pandas as pd
    from speco3.agent import load_samples, sample_id
    from speco3.tasks import PAPER_TASKS
    out = []
    summary = run / "reproduce.json"
    if not summary.exists(): return [f"{summary}: missing (the run did not finish)"]
    rec = json.loads(summary.read_text())
    notebooks = sorted(p.stem for p in (root / "nbs" / "paper").glob("[0-9]*.ipynb"))
    if missing := [n for n in notebooks if f"{n}.ipynb" not in rec["wall_s"]]: out.append(f"notebooks that did not finish: {missing}")
    if not rec.get("inputs", {}).get("toy"): out.append(f"{summary}: not a --toy run (inputs: {rec.get('inputs')})")
    test = {(r["data_source"], sample_id(r)) for t in PAPER_TASKS for r in load_samples(snapshot, task=t, split="test")}  # index ids: wd_test_3
    for target in ("main", "sft", "grpo"):
        files = sorted((run / "results" / target).glob("predictions_*.csv"))
        if not files: out.append(f"results/{target}: no predictions"); continue
        for f in files:
            df = pd.read_csv(f)
            rows = set(zip(df.task, df.sample_id.astype(str)))
            if not rows: out.append(f"{f.name}: empty")
            elif other := rows - test: out.append(f"results/{target}/{f.name}: {len(other)} rows not in the snapshot's test split, e.g. {sorted(other)[0]}")
    out += recipe_problems(run, rec.get("profile"))
    return out


def recipe_problems(run, profile):
    "What the SFT and GRPO summaries say of the recipe they ran, against the profile's."
    out = []
    from speco3.summaries import read_summary
    sft, grpo = (read_summary(run, t, optional=True) for t in ("sft", "grpo"))  # a key they lack: one line naming the file
    if sft is None or grpo is None: return ["results/sft or results/grpo: no summary.json"]
    if sft["sft_profile"]["name"] != profile or grpo["grpo_profile"]["name"] != profile:
        out.append(f"recipes {sft['sft_profile']['name']}/{grpo['grpo_profile']['name']}, not the {profile} profile's")
    if not (sft["style"] == grpo["style"] == "spec-o3"): out.append(f"styles {sft['style']}/{grpo['style']}, not spec-o3")
    if not str(sft["coldstart"].get("drafter", "")).startswith("the authors'"): out.append(f"SFT trained on {sft['coldstart'].get('drafter')!r}, not the authors' set")
    t = grpo["training"]
    if "max_steps" in (grpo.get("overrides") or {}): out.append("GRPO was given a step count (--toy gives sizes only)")
    if t.get("global_step") != t.get("planned_steps") or not t.get("global_step"):
        out.append(f"GRPO took {t.get('global_step')} of {t.get('planned_steps')} planned steps")
    if profile == "paper" and grpo["grpo_profile"]["max_tool_calls"] != "7": out.append(f"paper GRPO with {grpo['grpo_profile']['max_tool_calls']} tool calls, not 7")
    return out


if __name__ == "__main__":
    if len(sys.argv) != 3: sys.exit(__doc__)
    run, snapshot = Path(sys.argv[1]), Path(sys.argv[2])
    bad = problems(run, snapshot)
    for line in bad: print(f"check_author_run: {line}", file=sys.stderr)
    if bad: sys.exit(1)
    print(f"{run}: every paper notebook finished; main, SFT and GRPO predictions are on the test rows of {snapshot.name}")
