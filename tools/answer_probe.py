"""How much of the answer the eyes carry: per task, a linear probe (speco3.metrics' logistic regression) on the pooled
vision tokens of each model's overview plots (speco3.tiny.image_features), fitted on a benchmark's train split and scored
on its test split; prints and writes balanced accuracy and the YES class's F1 at the test split's prevalence.
Compare models along the chain (perception eyes, words, SFT, GRPO) to see where the answer is lost, and set the F1 beside
the model's own: a linear readout of the plot tokens is a rough ceiling for an answer read from the overview alone.
Usage: python tools/answer_probe.py --data DIR --out CSV [--l2 1,10] [--style fast] NAME=MODEL_DIR [NAME=MODEL_DIR ...]
  e.g. --data data/specvi-sim-cpu eyes=runs/perception-cpu/eyes/model grpo=runs/grpo-cpu/model (after bin/reproduce cpu)."""
import argparse, sys
from pathlib import Path
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

def scores(pred, truth): # 0/1 arrays
    "(balanced accuracy, F1 of the YES class), in percent."
    from speco3.metrics import balanced_accuracy
    tp, fp, fn = ((pred == 1) & (truth == 1)).sum(), ((pred == 1) & (truth == 0)).sum(), ((pred == 0) & (truth == 1)).sum()
    return 100 * balanced_accuracy(pred, truth), 100 * 2 * tp / max(2 * tp + fp + fn, 1)

def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("models", nargs="+", help="NAME=MODEL_DIR (a Qwen2.5-VL folder)")
    p.add_argument("--data", required=True, help="a SpecVI-Bench folder with train and test splits")
    p.add_argument("--out", required=True, help="CSV to write")
    p.add_argument("--l2", default="10", help="L2 penalties of the probe (standardised features), comma-separated")
    p.add_argument("--style", default="fast", help="renderer style of the overviews (the agent's)")
    a = p.parse_args()
    if bad := [m for m in a.models if "=" not in m]: sys.exit(f"answer_probe: {bad[0]!r} is not NAME=MODEL_DIR")
    models = dict(m.split("=", 1) for m in a.models)
    if not Path(a.data).is_dir(): sys.exit(f"answer_probe: {a.data}: no benchmark folder here (build one with 01_data or speco3.bench.build)")
    try: l2s = [float(v) for v in a.l2.split(",")]
    except ValueError: sys.exit(f"answer_probe: --l2 {a.l2!r} is not a comma-separated list of numbers")
    if absent := [d for d in models.values() if not (Path(d) / "config.json").exists()]: sys.exit(f"answer_probe: {absent[0]}: no model folder here (no config.json)")
    import pandas as pd
    from transformers import AutoModelForImageTextToText
    from speco3.agent import load_samples, as_sample
    from speco3.classify import LogisticRegression
    from speco3.hf import load_processor
    from speco3.render import render
    from speco3.tasks import PAPER_TASKS
    from speco3.tiny import image_features
    split = lambda t, s: [as_sample(r, task=t) for r in load_samples(a.data, task=t, split=s)]
    rows = {t: {s: split(t, s) for s in ("train", "test")} for t in PAPER_TASKS}
    plots = {t: {s: [render(x.spectrum, style=a.style) for x in xs] for s, xs in v.items()} for t, v in rows.items()}
    yes = lambda xs: np.array([x.truth == "YES" for x in xs], float)
    out = []
    for name, d in models.items():
        model, proc = AutoModelForImageTextToText.from_pretrained(d).eval(), load_processor(d)
        for t in PAPER_TASKS:
            X = {s: image_features(model, proc, plots[t][s]) for s in ("train", "test")}
            row = dict(model=name, task=t, train_rows=len(X["train"]), test_rows=len(X["test"]))
            for l2 in l2s:
                pred = LogisticRegression(l2=l2).fit(X["train"], yes(rows[t]["train"])).predict(X["test"]).astype(float)
                row[f"balanced_acc_l2_{l2:g}"], row[f"f1_l2_{l2:g}"] = (round(v, 1) for v in scores(pred, yes(rows[t]["test"])))
            out.append(row)
    df = pd.DataFrame(out)
    Path(a.out).parent.mkdir(parents=True, exist_ok=True); df.to_csv(a.out, index=False)
    print(df.to_string(index=False)); print(df.groupby("model", sort=False).mean(numeric_only=True).round(1).to_string())

if __name__ == "__main__": main()
