"""The generalisation tables' inputs when the paper notebooks' records are broken, partial or from elsewhere: one clear line each."""
import json
import numpy as np
import pytest
from speco3.agent import Sample
from speco3.spectrum import Spectrum
from speco3.metrics import write_predictions
from speco3.generalisation import learned_stages, vet_learned, vet_sets, score_sets, set_dir


def _rows(task="qso", n=2):
    w = np.linspace(3700, 9000, 500)
    return {(task, None): [Sample(f"{task}{i}", task, Spectrum(w, np.ones_like(w)), "NO") for i in range(n)]}


def test_broken_summary_names_file_and_notebook(tmp_path):
    (tmp_path / "results" / "sft").mkdir(parents=True)
    (tmp_path / "results" / "sft" / "summary.json").write_text("{not json")
    with pytest.raises(ValueError, match=r"summary.json: not a JSON record .*run the paper notebook writing results/sft/ again"):
        learned_stages(tmp_path, "smoke")


def test_nothing_run_yet_gives_notes_not_rows(tmp_path):
    stages, notes = learned_stages(tmp_path, "smoke")
    assert stages == [] and len(notes) == 3
    assert [n.split()[0] for n in notes] == ["results/main/run.json", "results/sft/summary.json", "results/grpo/summary.json"]


def test_stage_without_model_or_answers_answers_nothing(tmp_path):
    stage = dict(name="Gone", model=None, style="fast", max_new_tokens=8, saved=[], made_by="sft")
    got, source = vet_learned(stage, _rows(), tmp_path / "runs")
    assert got == {} and source["qso-lamost"].startswith("no answers") and not (tmp_path / "runs").exists()


def test_saved_answers_must_cover_the_rows_and_the_task(tmp_path):
    rows = _rows("qso", 2)
    other_task = write_predictions(tmp_path / "p.csv", [dict(sample_id="qso0", task="cv", truth="NO", prediction="NO"),
                                                        dict(sample_id="qso1", task="cv", truth="NO", prediction="NO")], policy="X")
    assert vet_sets(None, rows, tmp_path / "r", "fast", saved=[other_task])[0] == {}   # same ids, another task: not these answers
    with pytest.raises(ValueError, match="max_eval must be None"):
        vet_sets(None, rows, tmp_path / "r", "fast", max_eval=-1)


def test_answers_in_the_wrong_set_folder_are_refused(tmp_path):
    write_predictions(set_dir(tmp_path, "oba", make=True) / "predictions_x.csv",
                      [dict(sample_id="a", task="qso", truth="NO", prediction="NO")], policy="X")
    with pytest.raises(ValueError, match=r"task\(s\) \['qso'\] are not part of set 'oba'"):
        score_sets(tmp_path, n_boot=0)
