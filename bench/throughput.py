"""Seconds per spectrum by stage — reading, plots, rules or model, tool round-trips — for the scripted expert and the
three specialist baselines on CPU: the median of several timed passes over a few SpecVI-Sim test rows.

    .venv/bin/python bench/throughput.py [--data DIR] [--per-task 2] [--runs 5] [--styles fast spec-o3] [--threads 1]
                                         [--model DIR ...] [--tokens 320]

The rows come from a SpecVI-Sim benchmark folder (default: data/specvi-sim-cpu, else data/specvi-sim-smoke, built there
when neither exists, about a minute). The specialists here have fresh, untrained weights: how fast a model runs does not
depend on its weights (the trained ones are timed by nbs/paper/08_baselines.ipynb). The paper's two anchors — 0.2 s per
spectrum on 8xH100, about 10 s for an astronomer — close the table; they are quoted, not measured. `--model` adds a
model folder (a trained run's model/, e.g. runs/sft-cpu/model) to the policies timed in the agent loop.
"""
import argparse, os, platform
from pathlib import Path
import numpy as np
import torch
from speco3.agent import load_samples
from speco3.bench import build
from speco3.classify import LogisticRegression
from speco3.baselines import GaiaNet, CarbonNet, SpecFormer, Specialist, BASELINE_NAMES, prepare, truths, throughput
from speco3.expert import ScriptedExpertPolicy

ROOT = Path(__file__).resolve().parents[1]


def benchmark(data):
    "The benchmark folder to time: `data`, else the cpu build, else the smoke build (built when missing)."
    if data: return Path(data)
    for name in ("specvi-sim-cpu", "specvi-sim-smoke"):
        if (ROOT / "data" / name / "stats.json").exists(): return ROOT / "data" / name
    out = ROOT / "data" / "specvi-sim-smoke"
    print(f"building the smoke benchmark into {out.relative_to(ROOT)} (about a minute)")
    build(out, profile="smoke", seed=0, progress=False)
    return out


def untrained(rows):
    "The three baselines with fresh weights (the AstroCLIP-like head fitted on these rows: it needs coefficients to run)."
    torch.manual_seed(0)
    enc = SpecFormer().eval()
    with torch.no_grad(): E = enc.encode(torch.as_tensor(prepare(rows))).numpy().astype(float)
    y = truths(rows)
    if y.all() or not y.any(): y = np.arange(len(rows)) % 2 == 0   # one class only: any labels give a head of the right shape
    return [Specialist(BASELINE_NAMES["gaianet"], "any", GaiaNet().eval()), Specialist(BASELINE_NAMES["carbonnet"], "any", CarbonNet().eval()),
            Specialist(BASELINE_NAMES["astroclip"], "any", enc, head=LogisticRegression().fit(E, y))]


def main(data, per_task, runs, styles, threads, models, tokens):
    torch.set_num_threads(threads)
    folder = benchmark(data)
    rows = [r for t in ("cv", "carbon", "gm", "ss", "wd") for r in load_samples(folder, task=t, split="test")[:per_task]]
    print(f"python {platform.python_version()}, torch {torch.__version__}, {threads} thread(s) of {os.cpu_count()} cores; "
          f"{len(rows)} test rows of {folder.name}, median of {runs} passes")
    policies = {"Scripted expert": ScriptedExpertPolicy()}
    if models:
        from speco3.hf import HFPolicy
        policies.update({Path(m).as_posix(): HFPolicy(str(m), max_new_tokens=tokens) for m in models})
    table = throughput(rows, untrained(rows), styles=styles, runs=runs, policies=policies)
    for r in table.itertuples():
        print(f"  {r.policy:38s} {r.stage:26s} {r.s_per_spectrum:9.5f} s  {r.spectra_per_s:9.1f} /s  {r.note}".replace("nan /s", "  – /s"))


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default=None, help="a SpecVI-Sim benchmark folder")
    ap.add_argument("--per-task", type=int, default=2, help="test rows per task")
    ap.add_argument("--runs", type=int, default=5, help="timed passes (the median is printed)")
    ap.add_argument("--styles", nargs="+", default=["fast", "spec-o3"], help="plot styles to time the scripted expert with")
    ap.add_argument("--threads", type=int, default=1, help="torch threads")
    ap.add_argument("--model", nargs="*", default=[], help="model folders to time in the agent loop (HFPolicy)")
    ap.add_argument("--tokens", type=int, default=320, help="new tokens at most per model turn")
    a = ap.parse_args()
    main(a.data, a.per_task, a.runs, a.styles, a.threads, a.model, a.tokens)
