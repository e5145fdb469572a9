"""The paper's statistical figures (speco3.figures) drawn from the committed results tables: no two visible texts
overlap on the Agg canvas, and every bar whose table carries a 95 % interval shows it as an error bar."""
import json
from pathlib import Path
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
import pandas as pd
import pytest
from speco3.figures import (text_overlaps, n_error_bars, ablation_figure, before_after_figure, generalisation_figure,
                            behaviour_figure, yes_heatmaps)

RES = Path(__file__).resolve().parents[1] / "results"
from speco3.tasks import PAPER_TASKS

def with_macro_interval(table, metrics_json):
    "`table` (indexed by policy) with macro_f1_lo/_hi in % from the metrics.json the notebook wrote beside it."
    m = json.loads(metrics_json.read_text())
    return table.assign(macro_f1_lo=[100 * m[k]["summary"]["macro_f1_lo"] for k in table.index],
                        macro_f1_hi=[100 * m[k]["summary"]["macro_f1_hi"] for k in table.index])

def check(fig, want_bars):
    "No overlapping text; error bars per axes as the table has intervals."
    try:
        assert text_overlaps(fig) == []
        assert [n_error_bars(ax) for ax in fig.axes] == want_bars
    finally: plt.close(fig)

def test_ablations():
    t = with_macro_interval(pd.read_csv(RES / "ablations" / "ablation_table.csv").set_index("policy"),
                            RES / "ablations" / "metrics.json")
    base = next(k for k in t.index if not t.SFT[k] and not t.RL[k])
    rl = next(k for k in t.index if not t.SFT[k] and t.RL[k])
    sft, grpo = f"{base.removesuffix(' (base)')} + SFT", f"{base.removesuffix(' (base)')} + SFT + GRPO"
    variants = {"tool": "", "no tool (inference)": ", no tool", "no tool (retrained)": ", no tool (retrained)"}
    groups = {short: {v: f"{k}{end}" for v, end in variants.items()} for short, k in (("SFT", sft), ("SFT+RL", grpo))}
    check(ablation_figure(t, [base, rl, sft, grpo], groups, "Ablations on SpecVI-Sim test (1100 rows, cpu)"), [4, 6])

def test_qso_incremental():
    t = pd.read_csv(RES / "qso_incremental" / "table.csv").set_index("task")
    five = [*PAPER_TASKS, "macro"]
    fig = before_after_figure(t, {"new task": (["qso"], ["QSO"]), "the five tasks": (five, five)}, "before", "after",
                              "Incremental SFT on 96 QSO trajectories, SpecVI-Sim (cpu); 95 % intervals; "
                              "numbers above: paired change (red: interval excludes 0)")
    check(fig, [2, 12])

def test_baselines_generalisation():
    t = pd.read_csv(RES / "baselines" / "generalisation.csv").set_index("policy")
    sets = {f"{s} macro F1 [95%]": s for s in ("LAMOST-like", "SDSS", "DESI")}
    check(generalisation_figure(t, sets, "SpecVI-Sim (cpu): specialists trained on LAMOST-like spectra"), [3 * len(t)])

def test_sft_eval():
    t = pd.read_csv(RES / "sft" / "eval_summary.csv").set_index("policy")
    t = with_macro_interval(t, RES / "sft" / "metrics.json")
    legend = {k: f"{k} [{n}]" for k, n in t.train_conversations.items()}
    title = "SpecVI-Sim test (1100 rows, cpu): before and after SFT"
    check(behaviour_figure(t, title, legend, "[training conversations]"), [len(t)])

def test_real_mix():
    mix = pd.read_csv(RES / "real_mix" / "mix_table.csv")
    labels = sorted(mix.label.unique())
    n_by_label = mix[mix.split == "all"].groupby("label").n.max().to_dict()
    fig = yes_heatmaps(mix, list(dict.fromkeys(mix.task)), labels, n_by_label,
                       "YES answers of every question on every real label (colour: rate; boxed: the question's target; "
                       "blank: not asked)")
    assert len(fig.axes) == mix.policy.nunique()
    check(fig, [0] * mix.policy.nunique())

def test_overlap_is_found():
    "The check itself catches the committed ablations figure's old fault: two tick labels running into each other."
    fig, ax = plt.subplots(figsize=(3, 2))
    ax.set_xticks([0.4, 0.5], ["no tool\n(inference)", "no tool\n(retrained)"])
    try: assert text_overlaps(fig) == [("no tool\n(inference)", "no tool\n(retrained)")]
    finally: plt.close(fig)
