"""The QSO incremental-SFT paper notebook (nbs/paper/10b_qso_incremental.ipynb) without what 04_sft leaves: a one-line
error that names 04_sft, raised before anything is drafted or trained."""
import json
from pathlib import Path
import papermill as pm
import pytest

PAPER = Path(__file__).resolve().parent.parent / "nbs" / "paper"

def run(out):
    pm.execute_notebook(str(PAPER / "10b_qso_incremental.ipynb"), str(out / "12.ipynb"), parameters=dict(profile="smoke", out_dir=str(out)),
                        kernel_name="python3", cwd=str(PAPER), progress_bar=False, log_output=False)

def test_needs_04_sft(tmp_path):
    with pytest.raises(pm.PapermillExecutionError) as e: run(tmp_path)
    assert e.value.ename == "FileNotFoundError"
    assert "results/sft/summary.json is missing: run 04_sft.ipynb first with the same out_dir and profile" in e.value.evalue
    assert not (tmp_path / "runs").exists() and not (tmp_path / "data").exists()  # failed before drafting, training or building

def test_needs_the_sft_model(tmp_path):
    sft = tmp_path / "results" / "sft"; sft.mkdir(parents=True)
    (sft / "summary.json").write_text(json.dumps({"style": "fast", "training": {"Tiny + SFT": {"model_dir": "runs/sft-smoke/model"}}}))
    with pytest.raises(pm.PapermillExecutionError) as e: run(tmp_path)
    assert "runs/sft-smoke/model: the SFT model of 04_sft is not there" in e.value.evalue
    assert not (tmp_path / "runs").exists()
