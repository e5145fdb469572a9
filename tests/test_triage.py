"""Triage (speco3.triage): the split-conformal recall threshold's coverage, ECE on calibrated data, `speco3 vet --rank
--recall --calibrate` end to end on real spectra, and the one-line errors of a triage that cannot be met."""
import json
import numpy as np
import pandas as pd
import pytest
from speco3.cli import main
from speco3.io import real_spectra_dir
from speco3.metrics import ece
from speco3.triage import recall_threshold, p_yes, positives_needed

TABLE = real_spectra_dir() / "spectra.parquet"
IDS = ["NOVA:GQMUSA", "NOVA:V1419AQA", "LAMOST:spec-55862-B6212_sp10-079", "LAMOST:spec-55862-B6212_sp16-230",
       "CALSPEC:gd71_stiswfcnic_004"]   # two novae (real CVs) and three non-CVs of the collection's test half


@pytest.mark.parametrize("recall,n", [(0.9, 9), (0.9, 30), (0.95, 19), (0.95, 60)])
def test_conformal_threshold_covers_on_average(recall, n):
    "Over 2000 random calibration sets of exchangeable scores, the mean recall on new positives is >= the asked level."
    rng = np.random.default_rng(n)
    cover = np.array([(rng.standard_t(3, size=500) >= recall_threshold(rng.standard_t(3, size=n), recall)).mean()
                      for _ in range(2000)])
    # the exact mean is 1 - k/(n+1) >= recall; the standard error of the mean over 2000 splits is < 0.002
    assert cover.mean() >= recall - 0.006, (cover.mean(), recall, n)
    k = int(np.floor((1 - recall) * (n + 1) + 1e-9))
    assert abs(cover.mean() - (1 - k / (n + 1))) < 0.01     # and it is the stated bound, not far above


def test_ece_of_calibrated_scores_is_near_zero():
    rng = np.random.default_rng(0)
    s = rng.normal(size=50_000)
    y = rng.uniform(size=s.size) < p_yes(s)
    assert ece(p_yes(s), y) < 0.01
    assert ece(p_yes(3 * s), y) > 0.05      # over-confident: not calibrated


def vet(*args): return main(["vet", str(TABLE), "--task", "cv", *sum((["--target", i] for i in IDS), []),
                             "--quiet", *map(str, args)])


def test_rank_and_recall_end_to_end_on_real_spectra(tmp_path, capsys):
    cal = tmp_path / "cal.csv"   # 20 labelled positives scoring 0..19, 20 negatives: recall 0.9 -> k = 2, t = 1
    pd.DataFrame(dict(task="cv", score=list(range(20)) + [-5] * 20,
                      truth=["YES"] * 20 + ["NO"] * 20)).to_csv(cal, index=False)
    run = tmp_path / "run"
    assert vet("--out", run, "--recall", "0.9", "--calibrate", cal) == 0
    out = capsys.readouterr().out
    ranked = pd.read_csv(run / "ranked.csv")
    assert sorted(ranked.sample_id) == sorted(IDS) and ranked.score.is_monotonic_decreasing
    yes = ranked.prediction == "YES"
    assert (ranked.score[yes] >= 0).all() and (ranked.score[~yes] <= 0).all()
    tri = json.loads((run / "triage.json").read_text())["cv"]
    assert tri["threshold"] == 1.0 and tri["k"] == 2 and tri["n"] == 5
    assert tri["n_look"] == int((ranked.score >= 1.0).sum()) == int(ranked.look.sum())
    assert f"triage cv: look at {tri['n_look']} of 5 spectra" in out
    assert "marginal over exchangeable positives" in out
    assert vet("--out", tmp_path / "rank", "--rank") == 0            # rank only: no threshold
    assert (tmp_path / "rank" / "ranked.csv").exists() and not (tmp_path / "rank" / "triage.json").exists()
    capsys.readouterr()   # these real table rows carry no truth, so the run folder cannot calibrate another
    assert vet("--out", tmp_path / "again", "--recall", "0.8", "--calibrate", run) == 1
    err = capsys.readouterr().err.strip()
    assert err.endswith("5 row(s) without a YES/NO truth (unlabelled); calibration needs labels")


def err_of(capsys, *args, tmp_path):
    code = vet("--out", tmp_path / "bad", *args)
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 1 and len(err) >= 1
    return err[-1]


def test_bad_triage_requests_get_one_line_errors(tmp_path, capsys):
    nopos = tmp_path / "nopos.csv"
    pd.DataFrame(dict(task="cv", score=[0.1, 0.2], truth=["NO", "NO"])).to_csv(nopos, index=False)
    assert err_of(capsys, "--recall", "0.9", "--calibrate", nopos, tmp_path=tmp_path).endswith(
        "no labelled positives (YES); a recall threshold needs some")
    few = tmp_path / "few.csv"
    pd.DataFrame(dict(task="cv", score=range(5), truth=["YES"] * 5)).to_csv(few, index=False)
    assert "recall 0.99 cannot be guaranteed with 5 positives (at most 0.833; 99 needed)" in err_of(
        capsys, "--recall", "0.99", "--calibrate", few, tmp_path=tmp_path)
    assert "between 0 and 1" in err_of(capsys, "--recall", "1.0", "--calibrate", few, tmp_path=tmp_path)
    unl = tmp_path / "unlabelled.csv"
    pd.DataFrame(dict(task="cv", score=[0.1, 0.2])).to_csv(unl, index=False)
    assert "no column(s) truth" in err_of(capsys, "--recall", "0.9", "--calibrate", unl, tmp_path=tmp_path)
    assert "carries no truth (unlabelled)" in err_of(capsys, "--recall", "0.9", "--calibrate", TABLE, tmp_path=tmp_path)
    assert "--recall and --calibrate go together" in err_of(capsys, "--recall", "0.9", tmp_path=tmp_path)
    assert "gives no score yet" in err_of(capsys, "--rank", "--policy", "openai:x", tmp_path=tmp_path)
    assert positives_needed(0.95) == 19


def test_real_dev_cannot_guarantee_95_percent_cv_recall(tmp_path, capsys):
    "The real collection's dev half holds 16 novae: recall 0.95 needs 19 calibration positives, so it is refused."
    assert "recall 0.95 cannot be guaranteed with 16 positives (at most 0.941; 19 needed)" in err_of(
        capsys, "--recall", "0.95", "--calibrate", "real:dev", tmp_path=tmp_path)
