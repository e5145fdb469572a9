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
    assert "policy openai:x gives none" in err_of(capsys, "--rank", "--policy", "openai:x", tmp_path=tmp_path)
    assert positives_needed(0.95) == 19


def test_real_dev_cannot_guarantee_95_percent_cv_recall(tmp_path, capsys):
    "The real collection's dev half holds 16 novae: recall 0.95 needs 19 calibration positives, so it is refused."
    assert "recall 0.95 cannot be guaranteed with 16 positives (at most 0.941; 19 needed)" in err_of(
        capsys, "--recall", "0.95", "--calibrate", "real:dev", tmp_path=tmp_path)


# --- a policy that gives p(YES): the contract, and triage on its own scores ------------------------------------------

from speco3.agent import Sample, run as vet_run, read_trajectories
from speco3.metrics import write_predictions, read_predictions
from speco3.policy import Policy
from speco3.spectrum import Spectrum, lamost_wavelength
from speco3.triage import rank_run, check_request, labelled_scores


class Scored(Policy):
    "Answers at once: YES when the spectrum's meta p >= 0.5, and gives that p as its p(YES) (or none: `give=False`)."
    gives_p_yes = True
    def __init__(self, name="scored", give=True): self.name, self.give = name, give
    def describe(self): return dict(name=self.name)
    def act(self, episodes):
        for ep in episodes:
            if self.give: ep.meta["p_yes"] = ep.spectrum.meta["p"]
        return [f"<think>p is {ep.spectrum.meta['p']:.2f}.</think>\n<answer>\\boxed{{{'YES' if ep.spectrum.meta['p'] >= 0.5 else 'NO'}}}"
                "</answer>" for ep in episodes]


def samples(ps, truths=None, tag="s"):
    w = lamost_wavelength()
    return [Sample(f"{tag}{i}", "cv", Spectrum(w, np.ones_like(w), meta={"id": f"{tag}{i}", "p": float(p)}),
                   None if truths is None else truths[i]) for i, p in enumerate(ps)]


def vetted(items, policy, out):
    vet_run(items, policy, out, progress=False, zoom=False)
    write_predictions(out / "predictions.csv", read_trajectories(out))
    return out


def test_p_yes_reaches_the_record_and_predictions_and_old_logs_read(tmp_path):
    out = vetted(samples([0.2, 0.9]), Scored(), tmp_path / "run")
    assert [r["p_yes"] for r in read_trajectories(out)] == [0.2, 0.9]
    assert [r["p_yes"] for r in read_predictions(out / "predictions.csv")] == [0.2, 0.9]
    none = vetted(samples([0.2, 0.9]), Scored(give=False), tmp_path / "none")
    assert pd.read_csv(none / "predictions.csv").p_yes.isna().all()          # a policy that gives none: empty column
    # an old log (written before p_yes): records read with None, and a resumed run adds scored records beside them
    log = out / "trajectories.jsonl"
    log.write_text("".join(json.dumps({k: v for k, v in json.loads(l).items() if k != "p_yes"}) + "\n"
                           for l in log.read_text().splitlines()))
    s = vet_run(samples([0.2, 0.9, 0.7]), Scored(), out, progress=False, zoom=False)
    assert (s["n_resumed"], s["n_run"]) == (2, 1)
    write_predictions(out / "predictions.csv", read_trajectories(out))
    assert [r.get("p_yes") for r in read_predictions(out / "predictions.csv")] == [None, None, 0.7]
    assert pd.read_csv(out / "predictions.csv").p_yes.isna().tolist() == [True, True, False]


def test_triage_of_a_scored_policy_calibrates_on_its_own_run(tmp_path):
    rng = np.random.default_rng(0)
    pos, neg = rng.uniform(0.3, 1, 30), rng.uniform(0, 0.6, 30)
    cal = vetted(samples(np.r_[pos, neg], ["YES"] * 30 + ["NO"] * 30, "c"), Scored(), tmp_path / "cal")
    test_items = samples(rng.uniform(0, 1, 25), tag="t")
    run_dir = vetted(test_items, Scored(), tmp_path / "run")
    tri = rank_run(run_dir, test_items, "cv", 0.9, cal)["cv"]
    assert tri["threshold"] == recall_threshold(pos, 0.9) and tri["by"] == "p(YES)"
    ranked = pd.read_csv(run_dir / "ranked.csv")
    assert ranked.score.is_monotonic_decreasing and (ranked.score == ranked.p_yes).all()
    assert tri["n_look"] == int((ranked.score >= tri["threshold"]).sum()) == int(ranked.look.sum())
    test_eq = lambda a, b: (a == b) or pytest.fail(f"{a} != {b}")
    test_eq(labelled_scores(cal, "cv", dict(name="scored")).score.tolist(), list(np.r_[pos, neg]))
    with pytest.raises(ValueError, match=r"^--calibrate real:dev: policy scored is calibrated on its own p\(YES\)"):
        rank_run(run_dir, test_items, "cv", 0.9, "real:dev")
    other = vetted(samples(np.r_[pos, neg], ["YES"] * 30 + ["NO"] * 30, "c"), Scored("other"), tmp_path / "other")
    with pytest.raises(ValueError, match="its scores come from policy other"):
        rank_run(run_dir, test_items, "cv", 0.9, other)
    with pytest.raises(ValueError, match="calibrated on its own p"):
        check_request(Scored(), recall=0.9, calibrate=str(tmp_path / "nowhere.parquet"))
    none = vetted(test_items, Scored("quiet", give=False), tmp_path / "none")
    with pytest.raises(ValueError, match="policy quiet gave no p\\(YES\\)"):
        rank_run(none, test_items, "cv")
