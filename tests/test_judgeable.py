""""Cannot judge" is an answer (issue 44, item 2): the hostile versions of a simulated CV the scripted expert calls YES
(wavelengths in nm, µm or log10 Å given as Å, flux all zero, z = 1e10, S/N ~2, Hα masked out) each become a
`cannot_judge` record with its reason through `speco3 vet`, never a silent NO; a good spectrum still gets its verdict;
the outcome shows in stderr, the closing line, summary.json, predictions.csv, metrics.json and the report; a resumed run
does not retry it. Scripted policy, fast style."""
import json

import numpy as np
import pyarrow as pa, pyarrow.parquet as pq
import pytest

from speco3.agent import read_trajectories, run
from speco3.cli import main
from speco3.expert import ScriptedExpertPolicy
from speco3.io import to_specvi_row
from speco3.judgeable import judge_checks
from speco3.metrics import read_predictions
from speco3.simulate import simulate
from speco3.view import write_report, read_index

FAST = ["--policy", "scripted", "--style", "fast", "--quiet"]
CV = simulate("cv_dn", 1, "lamost", snr=30, seed=1)[0]   # a dwarf nova the scripted expert calls YES
HA = (CV.rest_wavelength > 6480) & (CV.rest_wavelength < 6650)
HOSTILE = {  # sample id -> (the spectrum, the kind of reason it must get)
    "nm": (CV.replace(wavelength=CV.wavelength / 10), "units"),
    "um": (CV.replace(wavelength=CV.wavelength / 1e4), "units"),
    "log10": (CV.replace(wavelength=np.log10(CV.wavelength)), "units"),
    "zero": (CV.replace(flux=np.zeros(len(CV))), "flux"),
    "z1e10": (CV.replace(redshift=1e10), "redshift"),
    "snr2": (simulate("cv_dn", 1, "lamost", snr=2, seed=1)[0], "snr"),
    "ha-masked": (CV.replace(flux=np.where(HA, np.nan, CV.flux)), "masked"),
}
WORDS = {"units": "hold 0 Å of the optical", "flux": "flux is zero everywhere",
         "redshift": "redshift 1e+10 is outside", "snr": "is below the floor of",
         "masked": "Hα 6563 Å: only 0% of 6500–6630 Å usable"}


def table(path):
    "A SpecVI-Bench-style table of the good CV and its hostile versions, all labelled YES for the cv question."
    spectra = {"good": CV, **{k: s for k, (s, _) in HOSTILE.items()}}
    rows = [to_specvi_row(s, "cv", "YES", name=k, index=i) for i, (k, s) in enumerate(spectra.items())]
    pq.write_table(pa.Table.from_pylist(rows), path)
    return path


def records(run_dir): return {r["sample_id"]: r for r in read_trajectories(run_dir)}


@pytest.fixture(scope="module")
def vetted(tmp_path_factory):
    "One `speco3 vet` run over the table (check on, the default): its folder, exit status, stdout and stderr."
    import contextlib, io
    d = tmp_path_factory.mktemp("judge")
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = main(["vet", str(table(d / "rows.parquet")), "--out", str(d / "run"), *FAST])
    return d, rc, out.getvalue(), err.getvalue()


def test_each_hostile_spectrum_has_its_own_reason():
    assert judge_checks(CV, "cv") == []
    for name, (s, kind) in HOSTILE.items():
        assert [k for k, _ in judge_checks(s, "cv")] == [kind], name


def test_vet_says_cannot_judge_with_the_reason_never_a_silent_no(vetted):
    d, rc, out, err = vetted
    assert rc == 0
    recs = records(d / "run")
    assert recs["good"]["status"] == "answered" and recs["good"]["prediction"] == "YES"
    for name, (_, kind) in HOSTILE.items():
        r = recs[name]
        assert (r["status"], r["prediction"], r["turns"], r["n_tool_calls"]) == ("cannot_judge", None, [], 0), r
        assert len(r["cannot_judge"]) == 1 and WORDS[kind] in r["cannot_judge"][0], (name, r["cannot_judge"])
        assert f"speco3 vet: cannot judge: {name}: {r['cannot_judge'][0]}" in err
    assert out.startswith("vetted 8 of 8: 1 YES, 0 NO, 7 cannot judge, 0 without a verdict; 0 unreadable"), out


def test_cannot_judge_shows_in_every_output(vetted):
    d, *_ = vetted
    summary = json.loads((d / "run" / "summary.json").read_text())
    assert (summary["judge_check"], summary["n_cannot_judge"]) == (True, 7)
    preds = {r["sample_id"]: r for r in read_predictions(d / "run" / "predictions.csv")}
    assert preds["zero"]["status"] == "cannot_judge" and preds["zero"]["prediction"] is None
    assert preds["zero"]["cannot_judge"] == ["flux is zero everywhere"] and "cannot_judge" not in preds["good"]
    metrics = json.loads((d / "run" / "metrics.json").read_text())
    assert metrics["summary"]["n"] == 1   # only the good spectrum is scored; the seven are left out, not counted NO
    assert metrics["left_out"]["by_reason"] == {"cannot judge": 7}
    assert {r["sample_id"] for r in metrics["left_out"]["rows"]} == set(HOSTILE)
    index = write_report(d / "run")
    rows = {r["sample_id"]: r for r in read_index(index)}
    assert rows["zero"]["outcome"] == "cannot judge" and "flux is zero everywhere" in rows["zero"]["note"]
    assert [r["outcome"] for r in read_index(index)][:8] == ["YES"] * (rows["good"]["outcome"] == "YES") + ["cannot judge"] * 7 + (
        [] if rows["good"]["outcome"] == "YES" else [rows["good"]["outcome"]])   # the seven come before any NO


def test_a_resumed_run_does_not_retry_cannot_judge(vetted, capsys):
    d, *_ = vetted
    before = (d / "run" / "trajectories.jsonl").read_bytes()
    assert main(["vet", str(d / "rows.parquet"), "--out", str(d / "run"), *FAST]) == 0
    out = capsys.readouterr().out
    assert (d / "run" / "trajectories.jsonl").read_bytes() == before
    assert "retried" not in out and "7 cannot judge" in out
    summary = json.loads((d / "run" / "summary.json").read_text())
    assert (summary["n_resumed"], summary["n_run"], summary["n_retried"], summary["n_cannot_judge"]) == (8, 0, 0, 7)


def test_without_the_check_the_same_inputs_get_silent_answers(vetted, capsys):
    d, *_ = vetted
    assert main(["vet", str(d / "rows.parquet"), "--out", str(d / "off"), "--no-judge-check", *FAST]) == 0
    recs = records(d / "off")
    assert "cannot_judge" not in {r["status"] for r in recs.values()}
    # the bug: silent answers
    assert [recs[k]["prediction"] for k in ("good", "nm", "zero", "z1e10")] == ["YES", "NO", "NO", "NO"]
    assert "cannot judge" not in capsys.readouterr().out
    # a folder made with the check is not resumed without it (answers of two settings must not mix)
    assert main(["vet", str(d / "rows.parquet"), "--out", str(d / "run"), "--no-judge-check", *FAST]) == 1
    assert "made for judge_check=true, not judge_check=null" in capsys.readouterr().err


def test_run_keeps_the_paper_default_off(tmp_path):
    "The library's `run` (the paper notebooks, the benchmark evaluation) answers every readable row unless asked."
    rows = pq.read_table(table(tmp_path / "rows.parquet")).to_pylist()
    run(rows, ScriptedExpertPolicy(), tmp_path / "run", progress=False, style="fast")
    assert {r["status"] for r in read_trajectories(tmp_path / "run")} == {"answered"}
    cfg = json.loads((tmp_path / "run" / "run_config.json").read_text())
    assert "judge_check" not in cfg
