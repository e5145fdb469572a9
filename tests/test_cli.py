"""`speco3 vet` from the command line: bad options refused before any work, unreadable inputs listed with their
reason, a closing summary, multi-target files, and run folders that belong to one run. Scripted policy, fast style."""
import json

import pytest

from speco3.cli import main
from speco3.io import real_spectra_dir, science_targets

RAW = real_spectra_dir() / "raw"
LAMOST = str(RAW / "lamost" / "spec-55862-B6212_sp06-005.fits")
COADD = RAW / "desi" / "coadd-sv3-dark-26065.fits"
FAST = ["--policy", "scripted", "--style", "fast"]


def vet(*args):
    return main(["vet", *map(str, args), *FAST])


def ids(run):
    return [json.loads(line)["sample_id"] for line in (run / "trajectories.jsonl").read_text().splitlines()]


@pytest.mark.parametrize("option, bad", [("--task", "foo"), ("--task", "CV"), ("--style", "pretty")])
def test_bad_options_are_refused_before_any_work(tmp_path, capsys, option, bad):
    args = ["--task", "cv", *FAST, option, bad]
    assert main(["vet", LAMOST, *args, "--out", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err
    assert f"invalid choice: '{bad}'" in err
    assert ("'cv'" in err and "'qso'" in err) if option == "--task" else "'fast'" in err
    assert not (tmp_path / "run").exists()


def test_unreadable_inputs_are_listed_and_nothing_vetted_fails(tmp_path, capsys):
    fake = tmp_path / "fake.fits"
    fake.write_text("not a FITS file\n")
    notes = tmp_path / "README.md"
    notes.write_text("# notes\n")
    missing = tmp_path / "missing.fits"
    assert vet(fake, notes, missing, "--task", "cv", "--out", tmp_path / "run", "--quiet") == 1
    out, err = capsys.readouterr()
    lines = err.splitlines()
    assert f"speco3 vet: unreadable: {fake}: not a FITS file (it does not start with a SIMPLE card)" in lines
    assert any(l.startswith(f"speco3 vet: unreadable: {notes}: unknown file type") for l in lines)
    assert f"speco3 vet: unreadable: {missing}: no such file" in lines
    assert lines[-1] == "speco3 vet: nothing could be vetted"
    assert out.startswith("vetted 0 of 3: 0 YES, 0 NO, 0 without a verdict; 3 unreadable")


def test_good_files_are_vetted_and_bad_ones_listed(tmp_path, capsys):
    missing = tmp_path / "missing.fits"
    assert vet(LAMOST, missing, "--task", "cv", "--out", tmp_path / "run") == 0
    out, err = capsys.readouterr()
    assert f"speco3 vet: unreadable: {missing}: no such file" in err.splitlines()
    assert "vetting (scripted-expert)" in err      # the progress bar
    assert out.startswith("vetted 1 of 2: ") and "1 unreadable" in out
    assert sorted(ids(tmp_path / "run")) == ["missing.fits", "spec-55862-B6212_sp06-005.fits"]


def test_desi_coadd_vets_each_science_target(tmp_path, capsys):
    tids = science_targets(COADD)
    assert len(tids) == 2                          # of five fibres: sky fibres are not targets
    assert vet(COADD, "--task", "qso", "--out", tmp_path / "all", "--quiet") == 0
    assert ids(tmp_path / "all") == [f"{COADD.name}#{t}" for t in tids]
    assert capsys.readouterr().out.startswith("vetted 2 of 2: ")
    assert vet(COADD, "--task", "qso", "--out", tmp_path / "one", "--target", tids[1], "--quiet") == 0
    assert ids(tmp_path / "one") == [f"{COADD.name}#{tids[1]}"]


def test_unknown_target_is_refused(tmp_path, capsys):
    assert vet(COADD, "--task", "qso", "--out", tmp_path / "run", "--target", "42", "--quiet") == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith("speco3 vet: target(s) 42 not in the inputs (their targets: ")
    assert not (tmp_path / "run").exists()


def test_table_rows_are_vetted_by_id(tmp_path, capsys):
    table = real_spectra_dir() / "spectra.parquet"
    rid = "LAMOST:spec-55862-B6212_sp06-005"
    assert vet(table, "--task", "cv", "--target", rid, "--out", tmp_path / "run", "--quiet") == 0
    assert ids(tmp_path / "run") == [rid]


def test_a_run_folder_belongs_to_one_run(tmp_path, capsys):
    run = tmp_path / "run"
    assert vet(LAMOST, "--task", "cv", "--out", run, "--quiet") == 0
    capsys.readouterr()
    assert vet(LAMOST, "--task", "wd", "--out", run, "--quiet") == 1
    err = capsys.readouterr().err.strip()
    assert err == (f'speco3 vet: {run}: this run folder was made for task="cv", not task="wd"; '
                   "use another folder, or restart (--restart) to empty it")
    assert json.loads((run / "run_config.json").read_text())["task"] == "cv"
    assert vet(LAMOST, "--task", "cv", "--out", run, "--quiet") == 0        # same settings: resumes
    assert vet(LAMOST, "--task", "wd", "--out", run, "--restart", "--quiet") == 0
    recs = [json.loads(l) for l in (run / "trajectories.jsonl").read_text().splitlines()]
    assert [r["task"] for r in recs] == ["wd"]
    assert json.loads((run / "run_config.json").read_text())["task"] == "wd"
