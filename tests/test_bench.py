"""The SpecVI-Sim benchmark builder (speco3.bench, from nbs/06a_bench.ipynb): the smoke profile builds the promised
files in the SpecVI-Bench format, splits are object-level, negatives are hard, the same seed gives the same bytes
(through the CLI too), and failures leave nothing behind."""
import errno, hashlib, io, json
import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest
from PIL import Image

import speco3.bench as bench
from speco3.bench import (REAL_CONTAMINANTS, build, load, set_info, file_stem, split_counts, resolve_sizes, intrinsic_params, SIZES,
                          THRESHOLD, LOW_SNR)
from speco3.cli import main
from speco3.io import read_spectrum
from speco3.simulate import kinds_for
from speco3.tasks import PAPER_TASKS

TINY = dict(train=4, test=6, cross_survey=3, cross_task=3, qso=3, cv_lowsnr=3, weak_train=30, archive_chunk=300)


@pytest.fixture(scope="module")
def smoke(tmp_path_factory):
    "The smoke profile, built once (seed 0, with images)."
    out = tmp_path_factory.mktemp("bench") / "smoke"
    stats = build(out, profile="smoke", seed=0, progress=False)
    return out, stats, load(out)


def digests(folder):
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.iterdir()) if p.name != "build.json"}


def truth(df):
    return df.reward_model.map(lambda r: r["ground_truth"]) == "YES"


def test_files_and_counts(smoke):
    out, stats, ds = smoke
    sz = resolve_sizes("smoke")
    expected = {file_stem(s, t) for t in PAPER_TASKS for s in ("train", "test")}
    expected |= {file_stem("test", t, v) for t in PAPER_TASKS for v in ("sdss", "desi")}
    expected |= {"test_ostar", "test_bstar", "test_astar", "test_qso", "test_cv_lowsnr"}
    assert set(ds) == expected
    assert "train_cc" in ds and "train_carbon" not in ds  # the published file suffix for carbon stars
    for stem, df in ds.items():
        info = set_info(stem)
        n = sz["train"][info["task"]] if info["split"] == "train" else (
            sz["test"][info["task"]] if info["variant"] is None and info["task"] in PAPER_TASKS else
            sz["cross_survey"] if info["variant"] in ("sdss", "desi") else
            sz["cv_lowsnr"] if info["variant"] == "lowsnr" else sz["qso"] if info["task"] == "qso" else sz["cross_task"])
        assert len(df) == n, stem
        ratio = 1 if info["split"] == "train" else sz["ratio"]
        assert int(truth(df).sum()) == split_counts(n, ratio)[0], stem
        assert set(df.data_source) == {info["task"]}
        assert stats["files"][stem]["rows"] == n
    card = (out / "README.md").read_text()
    assert "SIMULATED data, not LAMOST" in card and "train_cc.parquet" in card and "acceptance" in card.lower()


def test_specvi_columns(smoke):
    out, _, ds = smoke
    cols = pq.read_schema(out / "train_cv.parquet").names
    assert cols[:6] == ["images", "data_source", "prompt", "reward_model", "agent_name", "extra_info"]
    assert {"survey", "label", "subclass", "snr", "sim_params", "object_id"} <= set(cols)
    row = ds["test_wd"].iloc[0]
    assert set(row.reward_model) == {"ground_truth", "type"} and row.reward_model["type"] == "rule"
    assert row.agent_name == "tool_agent"
    assert [m["role"] for m in row.prompt] == ["system", "user"] and row.prompt[1]["content"].startswith("<image>")
    ck = row.extra_info["tools_kwargs"]["spectral_visualization_tool"]["create_kwargs"]
    assert set(ck) == {"flux", "wavelength", "redshift"} and len(ck["flux"]) == len(ck["wavelength"]) == 3909
    assert row.extra_info["name"].startswith("spec-") and "SIM" in row.extra_info["name"]
    img = Image.open(io.BytesIO(row.images[0]["bytes"]))
    assert img.format == "PNG" and img.size[0] > 500
    assert json.loads(row.sim_params)["kind"] == row.kind
    assert row.survey == "SpecVI-Sim/LAMOST"


def test_every_row_reads_back(smoke):
    _, _, ds = smoke
    for stem, df in ds.items():
        for i in range(len(df)):
            s = read_spectrum(df.iloc[i])
            ck = df.iloc[i].extra_info["tools_kwargs"]["spectral_visualization_tool"]["create_kwargs"]
            assert np.array_equal(s.flux, np.asarray(ck["flux"])) and s.redshift == ck["redshift"]
            assert s.meta["ground_truth"] in ("YES", "NO")


def test_object_level_split(smoke):
    _, _, ds = smoke
    ids = {sp: set() for sp in ("train", "test")}
    for stem, df in ds.items():
        assert df.object_id.is_unique, stem
        ids[set_info(stem)["split"]] |= set(df.object_id)
    assert ids["train"] and ids["test"] and not ids["train"] & ids["test"]
    names = [e["name"] for df in ds.values() for e in df.extra_info]
    assert len(names) == len(set(names))


def test_cross_survey_reobserves_test_objects(smoke):
    _, _, ds = smoke
    for t in PAPER_TASKS:
        test = ds[file_stem("test", t)].set_index("object_id")
        for v in ("sdss", "desi"):
            views = ds[file_stem("test", t, v)]
            assert set(views.object_id) <= set(test.index)
            assert (views.survey == f"SpecVI-Sim/{v.upper()}").all()
            for _, r in views.iterrows():
                a, b = json.loads(test.loc[r.object_id].sim_params), json.loads(r.sim_params)
                assert b["instrument"] == v and a["instrument"] == "lamost"
                assert intrinsic(a) == intrinsic(b) and intrinsic(a)  # same object: same intrinsic parameters
                assert a["lsf_scale"] != b["lsf_scale"]  # another instrument chain
                assert test.loc[r.object_id].reward_model == r.reward_model


def intrinsic(params):
    from speco3.spectrum import Spectrum
    return intrinsic_params(Spectrum([1., 2.], [1., 1.], meta={"sim_params": params}))


def test_negatives_are_hard(smoke):
    _, stats, ds = smoke
    for stem, df in ds.items():
        info, yes = set_info(stem), truth(ds[stem])
        assert not set(df.kind[~yes]) & set(kinds_for(info["task"])), stem
        assert set(df.kind[yes]) <= set(kinds_for(info["task"])), stem
        if info["variant"] not in ("sdss", "desi"):
            direct = df.kind.isin(list(REAL_CONTAMINANTS.get(info["task"], {})))  # drawn straight from the real-data contaminants
            easy = int((df.weak_score[~yes & ~direct] <= THRESHOLD).sum())  # test files: none; train files: only the direct archive draws
            tr = stats["train_rows"].get(info["task"], {})  # (corrupted ones are scored after the corruption)
            assert easy <= (tr["direct_negatives"] + tr["corrupted"] - tr["corrupted_positives"] if info["split"] == "train" else 0), stem
    for run, a in stats["acceptance"].items():
        assert 0 < a["acceptance"] < 1 and a["accepted"] >= a["used"] and a["acceptance"] == round(a["accepted"] / a["scored"], 5), run
    assert (ds["test_cv_lowsnr"].snr < LOW_SNR).all()


def test_same_seed_same_bytes_through_cli(smoke, tmp_path, capsys):
    out, _, _ = smoke
    again = tmp_path / "again"
    assert main(["bench", "build", "--profile", "smoke", "--out", str(again), "--seed", "0", "--quiet"]) == 0
    assert digests(again) == digests(out)
    assert main(["bench", "build", "--profile", "smoke", "--out", str(again), "--quiet"]) == 1  # exists, no --overwrite
    assert "already exists" in capsys.readouterr().err


def test_other_seed_other_objects():
    a, b = (bench.sample(kinds_for("cv"), 5, seed=seed, tag="cv/pos") for seed in (1, 2))
    assert not {bench.object_id(s) for s in a} & {bench.object_id(s) for s in b}


def test_full_disk_leaves_nothing(tmp_path, monkeypatch):
    calls = []
    def full(path, *a, **k):
        calls.append(path)
        if len(calls) == 3:  # two files written, the third one fails half way
            path.write_bytes(b"PAR1")
            raise OSError(errno.ENOSPC, "No space left on device", str(path))
        return real(path, *a, **k)
    real = bench.write_set
    monkeypatch.setattr(bench, "write_set", full)
    with pytest.raises(OSError, match="No space left on device") as e:
        build(tmp_path / "out", profile="smoke", sizes=TINY, progress=False, images=False)
    assert e.value.errno == errno.ENOSPC and "nothing was written" in str(e.value)
    assert len(calls) == 3 and list(tmp_path.iterdir()) == []


def test_existing_output(tmp_path):
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("keep")
    with pytest.raises(FileExistsError, match="already exists"):
        build(tmp_path / "mine", profile="smoke", sizes=TINY)
    with pytest.raises(FileExistsError, match="refusing to replace"):
        build(tmp_path / "mine", profile="smoke", sizes=TINY, overwrite=True)
    (tmp_path / "afile").write_text("x")
    with pytest.raises(FileExistsError, match="not a folder"):
        build(tmp_path / "afile", profile="smoke", sizes=TINY)
    assert (tmp_path / "mine" / "notes.txt").read_text() == "keep"


def test_overwrite_replaces_a_build(tmp_path):
    small = {**TINY, "train": 2, "test": 3, "cross_survey": 0, "cross_task": 0, "qso": 0, "cv_lowsnr": 0}
    build(tmp_path / "d", profile="smoke", sizes=small, seed=1, progress=False, images=False)
    build(tmp_path / "d", profile="smoke", sizes={**small, "train": 4}, seed=1, progress=False, images=False, overwrite=True)
    assert len(load(tmp_path / "d")["train_cv"]) == 4
    assert sorted(p.name for p in tmp_path.iterdir()) == ["d"]


@pytest.mark.parametrize("kw, msg", [(dict(profile="laptop"), "unknown profile"), (dict(seed=-3), "seed"),
                                     (dict(sizes=dict(tests=3)), "unknown key"), (dict(sizes=dict(ratio=-1)), "ratio"),
                                     (dict(sizes=dict(train={"xx": 3})), "unknown task"), (dict(style="comic"), "style")])
def test_bad_arguments(tmp_path, kw, msg):
    with pytest.raises(ValueError, match=msg):
        build(tmp_path / "x", **kw)
    assert list(tmp_path.iterdir()) == []


def test_cli_rejects_unknown_profile(tmp_path, capsys):
    assert main(["bench", "build", "--profile", "huge", "--out", str(tmp_path / "x")]) == 2   # argparse's usage error
    assert "invalid choice: 'huge'" in capsys.readouterr().err and not (tmp_path / "x").exists()


def test_load_reads_a_published_style_folder(tmp_path, smoke):
    "A folder with only the SpecVI-Bench columns (no provenance), nested one level, as a download might be."
    out, _, ds = smoke
    core = ["images", "data_source", "prompt", "reward_model", "agent_name", "extra_info"]
    (tmp_path / "data").mkdir()
    pq.write_table(pq.read_table(out / "test_cc.parquet", columns=core), tmp_path / "data" / "test_cc.parquet")
    got = load(tmp_path, columns=core + ["object_id"])
    assert list(got) == ["test_cc"] and list(got["test_cc"].columns) == core
    s = read_spectrum(got["test_cc"].iloc[0])
    assert set_info("test_cc")["task"] == "carbon" and s.meta["data_source"] == "carbon"
    with pytest.raises(FileNotFoundError):
        load(tmp_path / "nothing")


def test_nova_share_leaves_test_splits_unchanged(tmp_path):
    "A share of classical novae among the cv train positives changes train_cv only: every test file keeps its bytes."
    small = {**TINY, "train": 6, "test": 6, "cross_task": 0, "qso": 0}
    build(tmp_path / "a", profile="smoke", sizes=small, seed=2, progress=False, images=False)
    build(tmp_path / "b", profile="smoke", sizes={**small, "train_nova_share": 0.4}, seed=2, progress=False, images=False)
    a, b = digests(tmp_path / "a"), digests(tmp_path / "b")
    assert {f for f in a if a[f] != b[f]} == {"train_cv.parquet", "stats.json", "README.md"}
    tr = load(tmp_path / "b" / "train_cv.parquet")["train_cv"]
    yes = truth(tr)
    assert int(yes.sum()) == 3 and int((tr.kind[yes] == "nova").sum()) == 1   # round(0.4 * 3) of the 3 positives
    assert (tr.label[yes] == "CV").all()
    assert json.loads((tmp_path / "b" / "stats.json").read_text())["sizes"]["train_nova_share"] == 0.4


def test_train_recipe_leaves_test_files(tmp_path):
    "Direct negatives and corruptions change the train files only: the test files are byte-identical without them."
    from speco3.corrupt import CORRUPTIONS
    small = {**TINY, "cross_task": 0, "qso": 0}
    a = build(tmp_path / "a", profile="smoke", sizes=small, seed=3, progress=False, images=False)
    b = build(tmp_path / "b", profile="smoke", seed=3, progress=False, images=False,
              sizes={**small, "train_direct": 0.0, "train_corrupt": 1.0, "train_corruptions": list(CORRUPTIONS)})
    da, db = digests(tmp_path / "a"), digests(tmp_path / "b")
    tests = [f for f in da if f.startswith("test_")]
    assert len(tests) == 3 * len(PAPER_TASKS) + 1 and all(da[f] == db[f] for f in tests)
    assert all(da[f] != db[f] for f in da if f.startswith("train_"))
    n_neg, sz = split_counts(TINY["train"], 1)[1], resolve_sizes("smoke")  # a: the profile's own train recipe
    for t in PAPER_TASKS:
        assert a["train_rows"][t]["direct_negatives"] == int(sz["train_direct"] * n_neg)
        assert a["train_rows"][t]["corrupted"] == (int(sz["train_corrupt"] * TINY["train"]) if sz["train_corruptions"] else 0)
        assert b["train_rows"][t]["direct_negatives"] == 0 and b["train_rows"][t]["corrupted"] == TINY["train"]
    card_a = (tmp_path / "a" / "README.md").read_text()
    assert ("carry artefacts" in card_a) == bool(sz["train_corruptions"] and sz["train_corrupt"])
    assert "carry artefacts" in (tmp_path / "b" / "README.md").read_text() and "sky_telluric" in (tmp_path / "b" / "README.md").read_text()
