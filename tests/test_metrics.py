"""speco3.metrics from the outside: trajectory-like records -> predictions frame -> evaluate -> main table, the
numbers checked by hand; the module stays framework-free and fast."""
import json, subprocess, sys, time
import numpy as np
import pandas as pd
import pytest
from speco3.tasks import PAPER_TASKS
from speco3.metrics import (predictions_frame, evaluate, main_table, confusion, tool_stats, visited, ece,
                            aurc, risk_coverage)

def call(lo, hi):
    return {"name": "spectral_visualization_tool", "arguments": {"wavelength_range": [lo, hi]}}

# cv: TP, TP, FN (no answer), FP, TN ; wd: TP, TN, TN
RECORDS = [
    dict(sample_id="cv1", task="cv", truth="YES", prediction="YES", format_ok=True, tool_calls=[call(6540, 6600)]),
    dict(sample_id="cv2", task="cv", truth="YES", prediction="YES", format_ok=True, tool_calls=[call(6000, 7000), call(4650, 4720)]),
    dict(sample_id="cv3", task="cv", truth="YES", prediction=None, format_ok=False, tool_calls=[]),
    dict(sample_id="cv4", task="cv", truth="NO", prediction="YES", format_ok=True, tool_calls=[call(6580, 6700)]),
    dict(sample_id="cv5", task="cv", truth="NO", prediction="NO", format_ok=True, tool_calls=[call(6540, 6590)]),
    dict(sample_id="wd1", data_source="wd", reward_model={"ground_truth": "YES"}, final_answer="yes", format_ok=True,
         strict_prediction="YES",  # its turns' text is not kept here; the paper's exact reading is given
         turns=[{"tool_call": call(4300, 4400)}, {"text": "done"}]),
    dict(sample_id="wd2", data_source="wd", reward_model={"ground_truth": "NO"}, final_answer="NO", format_ok=True, turns=[]),
    dict(sample_id="wd3", data_source="wd", reward_model={"ground_truth": "NO"}, final_answer="NO", format_ok=True, turns=[]),
]
GUIDES = {"cv": [(6540, 6590), (4670, 4700)], "wd": [(4300, 4380)]}

def test_records_to_numbers():
    df = predictions_frame(RECORDS)
    assert confusion(df, "cv").values.tolist() == [[2, 1], [1, 1]]
    e = evaluate(df, tasks=PAPER_TASKS, n_boot=500, seed=7, guidelines=GUIDES)
    assert e.tasks == ["cv", "wd"] and e.missing == ["carbon", "gm", "ss"]
    cv, wd = (e.per_task.set_index("task").loc[t] for t in ("cv", "wd"))
    assert (cv.acc, cv.precision, cv.recall, cv.f1) == pytest.approx((3 / 5, 2 / 3, 2 / 3, 2 / 3))
    assert (wd.acc, wd.precision, wd.recall, wd.f1) == pytest.approx((1, 1, 1, 1))
    assert cv.no_answer_rate == pytest.approx(1 / 5) and cv.format_ok_rate == pytest.approx(4 / 5)
    s = e.summary
    assert s["macro_f1"] == pytest.approx((2 / 3 + 1) / 2)
    assert s["macro_acc"] == pytest.approx((3 / 5 + 1) / 2)
    assert s["overall_acc"] == pytest.approx(6 / 8)
    assert s["macro_f1_lo"] <= s["macro_f1"] <= s["macro_f1_hi"]
    t = e.tools
    assert (t["calls_mean"], t["calls_max"], t["used_tool"]) == (6 / 8, 2, 5 / 8)
    # cv1 visits Hα only (1/2), cv2 both (2/2), cv3 none, cv4 covers 10 of 50 Å (0), cv5 Hα (1/2); wd1 1/1, wd2-3 0
    assert t["guideline_visit_rate_by_task"] == pytest.approx({"cv": (0.5 + 1 + 0 + 0 + 0.5) / 5, "wd": 1 / 3})
    json.dumps(e.to_dict(), allow_nan=False)
    assert evaluate(df, tasks=PAPER_TASKS, n_boot=500, seed=7).summary == s  # deterministic per seed

def test_main_table_layout():
    df = predictions_frame(RECORDS)
    table = main_table({"spec-o3": evaluate(df, n_boot=0), "always NO": evaluate(df.assign(prediction="NO", strict_prediction="NO"), n_boot=0)})
    assert list(table.columns) == [("cv", "Acc"), ("cv", "F1"), ("wd", "Acc"), ("wd", "F1"), ("macro", "Acc"), ("macro", "F1"),
                                   ("macro lenient", "Acc"), ("macro lenient", "F1")]
    assert table.loc["spec-o3", ("macro", "F1")] == pytest.approx(83.3)
    assert table.loc["always NO"].tolist() == pytest.approx([40.0, 0.0, 66.7, 0.0, 53.3, 0.0, 53.3, 0.0])

@pytest.mark.parametrize("records, message", [
    ([dict(task="cv", prediction="YES")], "no record has ['truth']"),
    ([dict(truth="YES", prediction="YES")], "no record has ['task']"),
    ([dict(task="cv", truth="YES", prediction="NO"), dict(sample_id="s9", task="cv", truth="POSITIVE", prediction="NO")],
     "row 1 (sample_id 's9'): truth 'POSITIVE' is not YES or NO"),
    ([dict(task="cv", truth="YES", prediction="probably")], "prediction 'probably' is not YES, NO or None"),
    ([], "no records"),
])
def test_bad_records(records, message):
    with pytest.raises(ValueError) as err: predictions_frame(records)
    assert message in str(err.value)

def test_bad_frames():
    with pytest.raises(ValueError, match=r"lacks column\(s\) \['truth', 'prediction'\]"): evaluate(pd.DataFrame(dict(task=["cv"])))
    with pytest.raises(ValueError, match="empty"): evaluate(pd.DataFrame(columns=["task", "truth", "prediction"]))
    with pytest.raises(ValueError, match="none of the tasks"): evaluate(predictions_frame(RECORDS), tasks=["gm"])

def test_bootstrap_narrows():
    rng = np.random.default_rng(0)
    def frame(n):
        truth = np.where(rng.random(n) < 0.15, "YES", "NO")
        pred = np.where(rng.random(n) < 0.9, truth, np.where(truth == "YES", "NO", "YES"))
        return pd.DataFrame(dict(task=rng.choice(PAPER_TASKS, n), truth=truth, prediction=pred))
    big = frame(10_000)
    t0 = time.perf_counter(); e = evaluate(big, n_boot=1000); dt = time.perf_counter() - t0
    print(f"evaluate with 1000 replicates of 10k predictions: {dt:.2f} s")  # speed is benchmarked, not asserted
    small = evaluate(frame(200), n_boot=1000).summary
    width = lambda s: s["macro_f1_hi"] - s["macro_f1_lo"]
    assert width(e.summary) < width(small) / 3

def test_calibration_and_risk_coverage():
    rng = np.random.default_rng(1)
    p = rng.random(100_000)
    y = rng.random(100_000) < p
    assert ece(p, y) < 0.01 and ece(np.where(p > 0.5, 1.0, 0.0), y) > 0.2
    ok = rng.random(1000) < 0.7
    assert aurc(ok, ok + rng.random(1000)) < aurc(ok, rng.random(1000)) < aurc(ok, ~ok + rng.random(1000))
    curve = risk_coverage(ok, ok + 0.1 * rng.random(1000))
    assert curve.risk.is_monotonic_increasing and curve.coverage.iloc[-1] == 1.0

def test_visit_rule():
    assert visited([[6565, 6700]], [(6540, 6590)]).tolist() == [True]     # exactly half
    assert visited([[6566, 6700]], [(6540, 6590)]).tolist() == [False]
    with pytest.raises(ValueError, match="tool_stats needs"): tool_stats(pd.DataFrame(dict(task=["cv"])))

def test_framework_free():
    code = ("import sys, speco3.metrics\n"
            "bad = [m for m in ('torch', 'transformers', 'trl', 'verl', 'scipy', 'sklearn', 'matplotlib') if m in sys.modules]\n"
            "mods = sorted(m for m in sys.modules if m.startswith('speco3.') and m not in ('speco3.metrics', 'speco3.tasks'))\n"
            "print(bad, mods)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == "[] []", out


def test_strict_reading_first_lenient_beside():
    recs = [dict(task="cv", truth="YES", prediction="YES", turns=[{"text": "<think>x</think><answer>\\boxed{YES}</answer>"}]),
            dict(task="cv", truth="YES", prediction="YES", turns=[{"text": "<think>x</think><answer>\\boxed{yes}</answer>"}]),
            dict(task="cv", truth="NO", prediction="NO", turns=[{"text": "<think>x</think><answer>NO</answer>"}])]
    df = predictions_frame(recs)
    assert list(df.strict_prediction) == ["YES", None, None]
    e = evaluate(df, n_boot=0)
    assert e.summary["overall_acc"] == pytest.approx(1 / 3) and e.summary["lenient_overall_acc"] == pytest.approx(1.0)
    assert e.summary["reading"].startswith("strict")
    t = main_table({"p": e})
    assert t.loc["p", ("macro", "Acc")] == pytest.approx(33.3) and t.loc["p", ("macro lenient", "Acc")] == pytest.approx(100.0)


def test_file_of_a_policy_without_tool_calls(tmp_path):
    "A baseline's predictions file (no tool calls, no format verdict: blank cells) reads back and scores, alone and in the main table."
    from speco3.metrics import write_predictions, read_predictions
    from speco3.paper import save_predictions, main_table_from
    recs = [dict(sample_id=f"{t}{i}", task=t, truth=truth, prediction=pred) for t in PAPER_TASKS
            for i, (truth, pred) in enumerate([("YES", "YES"), ("NO", "NO"), ("NO", "YES"), ("YES", "NO")])]
    back = read_predictions(write_predictions(tmp_path / "p.csv", recs, policy="GaiaNet-like"))
    assert {(r["n_tool_calls"], r["format_ok"], r["status"]) for r in back} == {(None, None, None)}
    e = evaluate(predictions_frame(back), n_boot=0)
    assert e.summary["macro_f1"] == pytest.approx(0.5) and e.tools["n_with_calls"] == 0
    save_predictions(tmp_path, "GaiaNet-like", recs)
    save_predictions(tmp_path, "Expert", [dict(r, n_tool_calls=2, format_ok=True) for r in recs])
    table = main_table_from(tmp_path, n_boot=10)
    assert table.loc["GaiaNet-like", ("macro", "F1")] == table.loc["Expert", ("macro", "F1")] == 50.0
