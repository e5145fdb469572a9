"""tools/gpu_cost.py: the committed table recomputes from copies of the bench outputs, every figure names its source,
and the workload counts reproduce what the cpu profile's run recorded."""
import json, math, re, shutil, sys
from pathlib import Path
import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
import gpu_cost as gc

RESULTS, BENCH, COST = ROOT / "results", ROOT / "results" / "gpu_bench", ROOT / "results" / "gpu_cost"


@pytest.fixture(scope="module")
def params():
    return {s: gc.architecture_params(s) for s in ("3b", "7b")}


@pytest.fixture(scope="module")
def bench_copy(tmp_path_factory):
    "The bench outputs the committed table was computed from, copied (no shapes/ folder yet)."
    d = tmp_path_factory.mktemp("gpu_bench")
    for f in ("gpu_vet.txt", "gpu_sft.txt", "gpu_grpo.txt"): shutil.copy(BENCH / f, d / f)
    return d


@pytest.fixture(scope="module")
def recomputed(bench_copy, params):
    return gc.cost(bench_copy, RESULTS, params)


def same(a, b):
    na = a is None or (isinstance(a, float) and math.isnan(a))
    nb = b is None or (isinstance(b, float) and math.isnan(b))
    return na == nb and (na or abs(a - b) < 1e-6)


def test_table_recomputes(recomputed):
    rows, parts, _ = recomputed
    saved = pd.read_csv(COST / "cost.csv").to_dict("records")
    assert len(saved) == len(rows) == 2 * len(gc.notebooks())
    for s, r in zip(saved, rows):
        assert (s["notebook"], s["profile"]) == (r["notebook"], r["profile"])
        for k in ("gpu_hours_1xH100", "wall_hours_1xH100", "gpu_hours_8xH100", "wall_hours_8xH100"):
            assert same(s[k], r[k]), (s["notebook"], s["profile"], k, s[k], r[k])
        assert s["work"] == r["work"]
    saved_parts = pd.read_csv(COST / "cost_parts.csv")
    assert len(saved_parts) == len(parts) and list(saved_parts.units) == [p["units"] for p in parts]
    table = [l for l in (COST / "README.md").read_text().splitlines() if re.match(r"\| (\d|all)", l)]
    assert table and all(l in gc.readme(rows, recomputed[2]).splitlines() for l in table)  # the README's is this run's


def test_every_figure_has_a_source(recomputed):
    rows, parts, _ = recomputed
    for r in rows:
        assert r["source"].strip(), r
        if r["gpu_hours_8xH100"] is None: assert r["source"].startswith("not estimated"), r
        if r["gpu_hours_1xH100"] is None and r["gpu_hours_8xH100"] is not None:
            assert r["source"].startswith("1 GPU does not fit"), r
    for p in parts:
        assert p["source"].startswith("derived: ") and re.search(r"from \S*gpu_(vet|sft|grpo)\.txt", p["source"]), p
        assert "; count " in p["source"] and p["units"] > 0


def test_paper_training_does_not_fit_one_h100(recomputed):
    _, parts, _ = recomputed
    for p in parts:
        if p["profile"] == "paper" and p["kind"] != "vet":
            assert p["gpu_hours_1xH100"] is None and p["memory_gib_per_gpu_1"] > gc.H100_GIB
        if p["profile"] == "gpu": assert p["gpu_hours_1xH100"] == p["gpu_hours_8xH100"] is not None


def test_counts_match_the_cpu_run():
    c = {k: v for k, (v, _) in gc.counts("cpu", RESULTS).items()}
    read = lambda t: json.loads((RESULTS / t / "summary.json").read_text())
    assert c["test"] == read("ablations")["rows"]
    assert c["coldstart"] == read("sft")["coldstart"]["n"]
    q = read("qso_incremental")
    assert c["qso_sft"] == q["training"]["n_examples"] * q["training"]["epochs"]
    assert c["qso_test"] == q["evaluation"]["qso_rows"]
    assert c["real_mix"] == read("real_mix_sft")["records"]
    assert c["grpo_rollouts"] == read("grpo")["training"]["global_step"] * 8 * 4  # cpu: 8 questions x 4 rollouts a step
    run_now = [sum(int(m[1]) for a in st["answers"].values() if (m := re.match(r"(\d+) run", a)))
               for st in read("generalisation")["learned_stages"]]
    assert set(run_now) == {c["gen_rows"]}


def test_parameter_counts(params):
    total, = gc._figure(BENCH / "gpu_sft.txt", r"([\d,.]+) M parameters", "parameter count")
    trainable, = gc._figure(BENCH / "gpu_sft.txt", r"trainable: ([\d,.]+) M", "trainable")
    assert round(params["3b"][0] / 1e6, 1) == total and round((params["3b"][0] - params["3b"][1]) / 1e6, 1) == trainable
    assert 8.2e9 < params["7b"][0] < 8.35e9  # Qwen2.5-VL-7B: 8.29 B with its untied output head


def test_measured_shapes_replace_derived_rates(bench_copy, tmp_path):
    for f in bench_copy.iterdir(): shutil.copy(f, tmp_path / f.name)
    (tmp_path / gc.SECONDARY).mkdir()
    (tmp_path / gc.SECONDARY / "vet_320.txt").write_text("header\n2.500 s/spectrum (0.40 spectra/s): per spectrum "
                                                          "model 2.3 s\n")
    r = gc.rates(tmp_path)
    assert r["vet"].seconds == 2.5 and r["vet"].source.startswith("measured: ")
    assert r["grpo"].source.startswith("derived: ") and "gpu_grpo.txt" in r["grpo"].source  # no grpo_gpu_profile.txt


def test_missing_figure_is_one_line(bench_copy, tmp_path):
    for f in bench_copy.iterdir(): shutil.copy(f, tmp_path / f.name)
    (tmp_path / "gpu_sft.txt").write_text("python 3.12\nthe run was stopped\n")
    with pytest.raises(ValueError, match=r"gpu_sft\.txt: no wall per step in it"): gc.rates(tmp_path)
    (tmp_path / "gpu_vet.txt").unlink()
    with pytest.raises(FileNotFoundError, match=r"gpu_vet\.txt: no such bench output"): gc.rates(tmp_path)


def test_measured_7b_sft_is_used_unscaled(bench_copy, tmp_path, params):
    for f in bench_copy.iterdir(): shutil.copy(f, tmp_path / f.name)
    (tmp_path / gc.SECONDARY).mkdir()
    (tmp_path / gc.SECONDARY / "sft_7b.txt").write_text("python; GPU: X; 3 steps of 4 conversations, full fine-tuning\n"
                                                         "step time (median of 2 after a warm-up): 9.00 s; "
                                                         "wall per step with collation: 10.00 s\n")
    rows, parts, r = gc.cost(tmp_path, RESULTS, params)
    assert r["sft_7b"].seconds == 2.5 and r["sft_7b"].size == "7b"
    p = next(x for x in parts if x["profile"] == "paper" and x["notebook"] == "04_sft" and x["kind"] == "sft")
    assert p["gpu_hours_8xH100"] == round(p["units"] * 2.5 / 3600, 2)
    assert "7B/3B" not in p["source"] and "measured: " in p["source"]
