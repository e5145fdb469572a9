"""`speco3 vet` from the command line: bad options refused before any work, unreadable inputs listed with their
reason, a closing summary, multi-target files, and run folders that belong to one run. Scripted policy, fast style."""
import json, subprocess, sys

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
    assert not (tmp_path / "run").exists()                                   # no empty run folder left behind


def test_a_folder_made_before_stays_when_nothing_is_read(tmp_path, capsys):
    run = tmp_path / "run"
    run.mkdir(); (run / "notes.txt").write_text("mine\n")
    assert vet(tmp_path / "missing.fits", "--task", "cv", "--out", run, "--quiet") == 1
    assert (run / "notes.txt").read_text() == "mine\n" and (run / "trajectories.jsonl").exists()


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
    assert vet(LAMOST, "--task", "cv", "--out", run, "--quiet") == 0        # same settings: resumes, and says so
    assert capsys.readouterr().out.startswith(f"resumed the run in {run}: 1 of 1 samples were vetted before and kept")
    assert vet(LAMOST, "--task", "wd", "--out", run, "--restart", "--quiet") == 0
    recs = [json.loads(l) for l in (run / "trajectories.jsonl").read_text().splitlines()]
    assert [r["task"] for r in recs] == ["wd"]
    assert json.loads((run / "run_config.json").read_text())["task"] == "wd"


def _train(*args):
    "Run `speco3 train ...` in a fresh interpreter; (exit status, stderr, whether torch got imported)."
    code = ("import sys; from speco3.cli import main; rc = main(sys.argv[1:]); "
            "print('TORCH' if 'torch' in sys.modules else 'NO-TORCH', file=sys.stderr); sys.exit(rc)")
    p = subprocess.run([sys.executable, "-c", code, "train", *map(str, args)], capture_output=True, text=True, timeout=120)
    return p.returncode, p.stderr


def test_train_names_its_subcommands(tmp_path):
    rc, err = _train()
    assert rc == 2 and "the following arguments are required: {sft,grpo}" in err


@pytest.mark.parametrize("args, said", [
    (["grpo", "--data", "{d}", "--out", "{d}/run"], "speco3 train: --init is required with --profile cpu"),
    (["grpo", "--data", "{d}/nope", "--out", "{d}/run", "--init", "{d}"], "speco3 train: --data {d}/nope: no such file or folder"),
    (["sft", "--data", "{d}", "--out", "{d}/run", "--model", "{d}/typo"], "speco3 train: --model {d}/typo: no such folder"),
    (["grpo", "--data", "{d}", "--out", "{d}/file.txt", "--init", "{d}"], "speco3 train: --out {d}/file.txt is a file")])
def test_train_fails_fast_on_bad_paths_without_torch(tmp_path, args, said):
    (tmp_path / "file.txt").write_text("x\n")
    rc, err = _train(*(a.format(d=tmp_path) for a in args))
    assert rc == 1 and said.format(d=tmp_path) in err and "NO-TORCH" in err, err


def test_a_local_looking_init_is_not_taken_for_a_hub_id(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "runs").mkdir()
    rc, err = _train("grpo", "--data", ".", "--out", "out", "--init", "runs/sft")
    assert rc == 1 and "--init runs/sft: no such folder, and not a hub id" in err


def test_init_rule_is_the_grpo_profiles(tmp_path):
    "The CLI asks for --init exactly where speco3.grpo's profiles need one (it checks without importing them)."
    pytest.importorskip("trl", reason="trl is not installed (pip install 'speco3[train]')")
    from speco3.profiles import GRPO
    assert {k for k, p in GRPO.items() if p.needs_init} == {"cpu"}


def test_vet_help_lists_the_task_keys(capsys):
    assert main(["vet", "--help"]) == 0
    out = " ".join(capsys.readouterr().out.split())   # argparse wraps the help at the terminal's width
    assert all(k in out for k in ("cv (cataclysmic variable)", "wd (white dwarf)", "qso (quasar)", "ostar (O-type star)"))
