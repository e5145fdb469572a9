"""The gpu profile on the project's own data (SpecVI-Sim, 03_cold_start's drafts): the paper notebooks that take a profile
run their `gpu` code path at miniature size on a CPU, with papermill, offline: a tiny model built here stands in for the
profile's hub model (`model=`), the benchmark is the smoke build (`bench_size=`), training takes a step or two and the
evaluation a row per task. (An author's inputs, at gpu and at paper, run end to end in bin/test step 7.)

What stays the profile's: the recipe's code path (its model loading from a folder, the SFT and GRPO settings not
overridden below, the spec-o3 plots), the style handed from 03 to 04 and 05, and
the names and files each notebook writes for the next. bf16 is on where a GPU is (the recipes' own setting), off on a CPU."""
import json, shutil
from pathlib import Path
import pandas as pd
import pytest

torch = pytest.importorskip("torch", reason="torch is not installed (pip install 'speco3[train]')")
pytest.importorskip("trl", reason="trl is not installed (pip install 'speco3[train]')")
pytest.importorskip("papermill", reason="papermill is not installed (pip install 'speco3[dev]')")
import papermill as pm

from speco3.tiny import build_tiny

PAPER = Path(__file__).resolve().parent.parent / "nbs" / "paper"
SIZE = dict(bench_size="smoke", max_eval=1, max_new_tokens=16)             # the smoke benchmark, a row per task, short turns
BF16 = torch.cuda.is_available()                                          # the profiles' bf16 needs a GPU
SFT = dict(max_steps=2, bf16=BF16, learning_rate=1e-3, logging_steps=1, save_steps=2, per_device_train_batch_size=2, global_batch=2)
GRPO = dict(bf16=BF16, num_generations=2, prompts_per_step=2, prompts_per_update=2, micro_batch=4,
            reasoning_tokens=16, answer_tokens=16, max_completion_length=2400, save_steps=1)  # 2 400 holds 8 spec-o3 plots


def params(nb, profile, out, tiny):
    "The papermill parameters of one paper notebook at miniature size."
    p = dict(profile=profile, out_dir=str(out), **(SIZE if nb in ("04_sft", "05_grpo", "06_ablations") else {"bench_size": "smoke"}))
    if nb == "03_cold_start": p.update(n_per_task=2, n_qso=2)
    if nb == "04_sft": p.update(model=str(tiny), sft_overrides=SFT, n_small=2)
    if nb == "05_grpo": p.update(grpo_overrides=GRPO, max_steps=1)
    if nb == "06_ablations": p.update(model=str(tiny), grpo_overrides=GRPO, rl_steps=1)
    if nb == "04a_ablation_runs": p.update(model=str(tiny), sft_overrides=SFT, grpo_overrides=GRPO, max_steps=1, rl_steps=1)  # as 04, 05, 06
    if nb == "05a_small_grpo": p.update(grpo_overrides=GRPO, max_steps=1)  # as 05
    return p


def run_chain(profile, notebooks, out, tiny, **extra):
    "Run `notebooks` in order at `profile` into `out` (the notebooks with their outputs go to out/nbs); `extra` wins over `params`."
    (out / "nbs").mkdir(parents=True, exist_ok=True)
    for nb in notebooks:
        p = {**params(nb, profile, out, tiny), **extra}
        pm.execute_notebook(str(PAPER / f"{nb}.ipynb"), str(out / "nbs" / f"{nb}.ipynb"), parameters=p,
                            kernel_name="python3", cwd=str(PAPER), progress_bar=False, log_output=False)
    return out


def summary(out, target): return json.loads((out / "results" / target / "summary.json").read_text())


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    d = tmp_path_factory.mktemp("tiny") / "model"
    build_tiny(d, size="tiny", seed=0)
    return d


@pytest.fixture(scope="module")
def gpu(tiny, tmp_path_factory):
    "Every paper notebook that takes a profile, at gpu: cold start, SFT, the ablations' early runs, GRPO, ablations, main results."
    return run_chain("gpu", ["03_cold_start", "04_sft", "04a_ablation_runs", "05_grpo", "05a_small_grpo", "06_ablations", "02_main_results"],
                     tmp_path_factory.mktemp("gpu"), tiny)


def test_gpu_profile_runs_every_paper_notebook(gpu, tiny):
    cold, sft, grpo = summary(gpu, "cold_start"), summary(gpu, "sft"), summary(gpu, "grpo")
    assert cold["style"] == sft["style"] == grpo["style"] == "spec-o3"   # 03 renders, 04 and 05 train on the same plots
    assert sft["base_model"] == tiny.name and sft["sft_profile"]["name"] == "gpu" and sft["sft_profile"]["global_batch"] == "32"
    assert grpo["grpo_profile"]["name"] == "gpu" and grpo["training"]["global_step"] == 1
    assert (gpu / "results" / "ablations" / "run.json").exists() and (gpu / "results" / "main" / "main_table.csv").exists()
    said = "".join("".join(o.get("text", "")) for c in json.loads((gpu / "nbs" / "06_ablations.ipynb").read_text())["cells"] for o in c.get("outputs", []))
    for run in ("grpo-from-base", "sft-notool", "grpo-notool", "grpo-small"):  # 04a and 05a trained them as 06 would: read back
        assert f"{run}: finished earlier" in said, run


# The paper profile, and both profiles on an author's inputs in their published layouts (a SpecVI-Bench snapshot, the
# authors' ShareGPT cold-start set, a local model folder), run end to end in bin/test step 7: bin/reproduce gpu|paper --toy on
# tools/author_fixture.py's fixture, checked by tools/check_author_run.py.
