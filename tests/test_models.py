"""Shipped models (speco3.models): tiny specialists trained in seconds on SpecVI-Sim spectra, saved, loaded back with the
same predictions, vetting through `speco3 vet --policy <folder>`; a tiny miniature run shipped with its card; bad folders
fail with one line."""
import csv, json
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="torch is not installed (pip install 'speco3[train]')")
from speco3.simulate import simulate
from speco3.io import write_fits, to_specvi_row
from speco3.baselines import train_specialist, prepare, BASELINE_NAMES
from speco3.models import (save_specialist, load_specialist, SpecialistPolicy, ship_miniature, ship_specialists, read_card,
                           SPECIALIST_CONFIG)
from speco3.cli import main


def one_line(msg):
    assert msg and "\n" not in msg.strip(), f"not a one-line message: {msg!r}"
    return msg


@pytest.fixture(scope="module")
def sim(one_thread):
    "SpecVI-Sim spectra: CVs (YES) and their confusers and ordinary stars (NO), a few of each."
    yes = simulate("cv_dn", 12, seed=1, snr=30)
    no = simulate("dme", 6, seed=2, snr=30) + simulate("gm", 6, seed=3, snr=30)
    return yes, no


@pytest.fixture(scope="module")
def rows(sim):
    yes, no = sim
    return [to_specvi_row(s, "cv", truth, name=f"sim-{i}.fits")
            for i, (s, truth) in enumerate([(s, "YES") for s in yes] + [(s, "NO") for s in no])]


@pytest.fixture(scope="module")
def folder(rows, tmp_path_factory):
    sp = train_specialist("carbonnet", "cv", rows, max_epochs=3, patience=2, batch_size=8)
    d = tmp_path_factory.mktemp("models") / "carbonnet-like"
    save_specialist(sp, d)
    return sp, d


def test_saved_and_loaded_predictions_are_identical(folder, rows):
    sp, d = folder
    back = load_specialist(d)["cv"]
    assert back.name == BASELINE_NAMES["carbonnet"] and back.threshold == sp.threshold
    np.testing.assert_array_equal(back.predict_proba(rows), sp.predict_proba(rows))
    assert sorted(p.name for p in d.iterdir()) == ["cv.safetensors", SPECIALIST_CONFIG]


def test_vet_with_a_specialist_folder_end_to_end(folder, sim, tmp_path, capsys):
    _, d = folder
    yes, no = sim
    files = []
    for i, s in enumerate(yes[:2] + no[:2]):
        files.append(tmp_path / f"spec-{i}.fits"); write_fits(s, files[-1])
    run = tmp_path / "run"
    assert main(["vet", *map(str, files), "--task", "cv", "--policy", str(d), "--style", "fast", "--out", str(run), "--quiet"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("vetted 4 of 4:")
    preds = list(csv.DictReader((run / "predictions.csv").open()))
    assert len(preds) == 4 and {p["prediction"] for p in preds} <= {"YES", "NO"}
    assert all(p["n_tool_calls"] == "0" and p["format_ok"] == "True" for p in preds)
    trajs = [json.loads(l) for l in (run / "trajectories.jsonl").read_text().splitlines()]
    assert all(t["policy"]["name"] == BASELINE_NAMES["carbonnet"] for t in trajs)
    pol = SpecialistPolicy(d)   # the policy's own answers agree with the file's
    assert [p["prediction"] for p in preds] == pol.specialists["cv"].predict(files)


def test_vet_refuses_a_task_the_specialist_was_not_trained_for(folder, sim, tmp_path, capsys):
    _, d = folder
    f = tmp_path / "one.fits"; write_fits(sim[0][0], f)
    assert main(["vet", str(f), "--task", "wd", "--policy", str(d), "--out", str(tmp_path / "run")]) == 1
    err = capsys.readouterr().err.strip()
    assert one_line(err) == f"speco3 vet: {BASELINE_NAMES['carbonnet']} ({d}) was trained for cv, not for wd"
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("make, words", [
    (lambda d: None, "neither specialist.json (a specialist model) nor config.json"),
    (lambda d: (d / SPECIALIST_CONFIG).write_text("{not json"), "specialist.json: not JSON"),
    (lambda d: (d / SPECIALIST_CONFIG).write_text(json.dumps({"format": "other"})), "format 'other', expected 'speco3-specialist/1'"),
])
def test_a_bad_policy_folder_is_one_clear_line(tmp_path, capsys, sim, make, words):
    d = tmp_path / "model"; d.mkdir(); make(d)
    f = tmp_path / "one.fits"; write_fits(sim[0][0], f)
    assert main(["vet", str(f), "--task", "cv", "--policy", str(d), "--out", str(tmp_path / "run")]) == 1
    err = one_line(capsys.readouterr().err.strip())
    assert err.startswith("speco3 vet: ") and words in err


def test_missing_weights_name_the_file(folder, tmp_path):
    import shutil
    _, d = folder
    bad = tmp_path / "bad"; shutil.copytree(d, bad); (bad / "cv.safetensors").unlink()
    with pytest.raises(FileNotFoundError) as e: load_specialist(bad)
    assert one_line(str(e.value)).endswith("cv.safetensors: missing (the weights of task cv in specialist.json)")


def test_shipped_specialists_carry_thresholds_and_a_card(folder, rows, sim, tmp_path):
    sp, _ = folder
    labelled = sim[0][6:] + sim[1][6:]
    for i, s in enumerate(labelled): s.meta.update(id=f"lab-{i}", label="CV" if i < 6 else "STAR")
    [dest] = ship_specialists(tmp_path / "models", {(sp.name, "cv"): sp}, labelled=labelled, max_fpr=0.2,
                              labelled_name="a labelled test set", sim_test={"cv": rows[:4] + rows[-4:]}, commit="abc123")
    card = read_card(dest)
    assert card["name"] == BASELINE_NAMES["carbonnet"] and card["commit"] == "abc123" and "SpecVI-Sim" in card["data"]
    assert card["usage"] == "speco3 vet SPECTRA... --task cv --policy models/carbonnet-like --out run"
    th = load_specialist(dest)["cv"]
    assert th.info["threshold_from"]["source"] == "a labelled test set: FPR <= 0.2" and th.info["threshold_from"]["fpr"] <= 0.2
    readme = (dest / "README.md").read_text()
    assert readme.startswith(f"# {BASELINE_NAMES['carbonnet']}\n") and "| measured on |" in readme and "`abc123`" in readme
    assert "never the test half" in readme and "--policy models/carbonnet-like" in readme
    # at a confidence: a stricter threshold, and the card says which rule chose it
    [dest] = ship_specialists(tmp_path / "bounded", {(sp.name, "cv"): sp}, labelled=labelled, max_fpr=0.2, confidence=0.95,
                              labelled_name="a labelled test set", commit="abc123")
    tb = load_specialist(dest)["cv"]
    assert tb.info["threshold_from"]["source"] == "a labelled test set: FPR <= 0.2 at 95 % confidence (upper Wilson bound)"
    assert tb.threshold >= th.threshold and tb.info["threshold_from"]["confidence"] == 0.95
    assert "FPR <= 0.2 at 95 % confidence" in (dest / "README.md").read_text()


def test_ship_miniature_copies_the_model_folders_with_cards(tmp_path):
    "A run's layout (results/grpo/summary.json, results/main predictions, the two model folders) shipped as two folders."
    from speco3.tiny import build_tiny
    from speco3.summaries import write_summary
    from speco3.metrics import write_predictions, slug
    out_dir = tmp_path / "run"
    for m in ("runs/sft-cpu/model", "runs/grpo-cpu/model"): build_tiny(out_dir / m, size="tiny", seed=0)
    (out_dir / "runs/sft-cpu/model/checkpoint-10").mkdir()
    (out_dir / "runs/sft-cpu/model/training_args.bin").write_bytes(b"a pickle")
    sft, grpo = "Tiny + SFT", "Tiny + SFT + GRPO"
    recs = [dict(sample_id=f"s{i}", task="cv", truth="YES" if i % 3 == 0 else "NO", prediction="YES" if i % 2 == 0 else "NO",
                 format_ok=True, status="answered") for i in range(12)]
    (out_dir / "results/main").mkdir(parents=True)
    for row in (sft, grpo): write_predictions(out_dir / "results/main" / f"predictions_{slug(row)}.csv", recs, policy=row)
    (out_dir / "results/grpo").mkdir(parents=True)
    write_summary(out_dir / "results/grpo", dict(target="grpo", profile="cpu", seed=0, style="fast", init="runs/sft-cpu", init_row=sft,
                  grpo_profile={"num_generations": "4", "alpha": "0.2"}, overrides={},
                  training={"model_dir": "runs/grpo-cpu/model", "global_step": 50}, evaluation={}))
    (out_dir / "results/sft").mkdir(parents=True)
    (out_dir / "results/sft/run.json").write_text(json.dumps({"git_commit": "sftcommit"}))
    done = ship_miniature(tmp_path / "models", out_dir, commit="now")
    assert [p.name for p in done] == ["miniature-sft", "miniature-sft-grpo"]
    assert not (done[0] / "checkpoint-10").exists() and not (done[0] / "training_args.bin").exists() and (done[0] / "config.json").is_file()
    assert any(p.suffix == ".safetensors" for p in done[0].iterdir())
    c0, c1 = read_card(done[0]), read_card(done[1])
    assert (c0["row"], c0["commit"], c1["row"], c1["commit"]) == (sft, "sftcommit", grpo, "now")
    assert c1["metrics"]["SpecVI-Sim test (simulated)"]["n"] == 12 and c0["details"]["size (MB)"] < 20
    assert c0["details"]["style"] == "fast"   # the plots it was trained on: 05_grpo's student loop reads it
    assert "--policy models/miniature-sft-grpo" in (done[1] / "README.md").read_text()
