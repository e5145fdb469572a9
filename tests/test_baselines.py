"""Bad input to the specialist baselines fails with one clear line; spectra of every survey reach the same grid."""
import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="torch is not installed (pip install 'speco3[train]')")
from speco3.spectrum import Spectrum, SpectrumError
from speco3.baselines import (N_PIX, GaiaNet, Specialist, prepare, split_train, pretrain, truths, vet, grid, throughput)

W = np.geomspace(3700, 9100, 3909)


def one_line(excinfo):
    msg = str(excinfo.value)
    assert msg and "\n" not in msg, f"not a one-line message: {msg!r}"
    return msg


@pytest.fixture(scope="module")
def specialist(one_thread):
    torch.manual_seed(0)
    return Specialist("GaiaNet-like 1-D CNN", "cv", GaiaNet().eval())


@pytest.mark.parametrize("bad, words", [
    ([], "no spectra given"),
    (np.array([]), "no spectra given"),
    ([np.array([])], "shape (0,)"),
    ([np.ones(N_PIX - 1)], f"has {N_PIX - 1} values, the grid has {N_PIX}"),
    (np.ones((3, 100)), "has 100 values"),
    ([np.r_[np.ones(N_PIX - 2), np.nan, np.inf]], "2 non-finite value(s)"),
    ([np.ones((2, N_PIX))], "shape (2, 1024)"),
    (["not a spectrum".encode()], "a bytes, not a Spectrum"),
    ([None], "a NoneType, not a Spectrum"),
])
def test_prepare_rejects_bad_arrays(bad, words):
    with pytest.raises(SpectrumError) as e: prepare(bad)
    assert words in one_line(e)


def test_bad_spectra():
    with pytest.raises(SpectrumError) as e: prepare([Spectrum(W, np.full(len(W), np.nan))])   # all NaN: no usable pixel
    assert "no usable pixel" in one_line(e)
    with pytest.raises(SpectrumError) as e: prepare([Spectrum(np.linspace(1000, 3000, 50), np.ones(50))])
    assert "nothing inside" in one_line(e)
    with pytest.raises(SpectrumError) as e: prepare([Spectrum(W, np.where(W < 3850, 1.0, np.nan))])   # a sliver on the grid
    assert "usable points" in one_line(e)
    with pytest.raises(SpectrumError) as e: prepare([Spectrum(W, np.zeros(len(W)))])
    assert "not positive" in one_line(e)
    with pytest.raises(SpectrumError): prepare(["no/such/file.fits"])


def test_partial_nans_in_a_spectrum_are_masked_not_fatal():
    f = np.ones(len(W)); f[1000:1100] = np.nan
    X = prepare([Spectrum(W, f)])
    assert np.isfinite(X).all() and 0 < X[0, 1].sum() < N_PIX


def test_a_specialist_passes_the_errors_on(specialist):
    with pytest.raises(SpectrumError) as e: specialist.predict_proba([np.ones(10)])
    assert "the grid has 1024" in one_line(e)
    p = specialist.predict_proba([np.ones(N_PIX), Spectrum(W, 1 + W / 1e4)])
    assert p.shape == (2,) and ((p >= 0) & (p <= 1)).all()


def test_bad_labels_and_sizes(specialist):
    with pytest.raises(ValueError) as e: truths([{"reward_model": {}}])
    assert "not YES or NO" in one_line(e)
    with pytest.raises(ValueError) as e: vet(specialist, [{"id": "x", "reward_model": {"ground_truth": "YES"}}])
    one_line(e)
    with pytest.raises(ValueError) as e: split_train([True] * 5)
    assert "0 negative" in one_line(e)
    with pytest.raises(ValueError) as e: pretrain(np.zeros((3, 3, N_PIX), np.float32))
    assert "(n, 2, n_pix)" in one_line(e)
    with pytest.raises(ValueError) as e: grid(4)
    one_line(e)
    with pytest.raises(ValueError) as e: throughput([], [specialist])
    one_line(e)


def test_every_survey_reaches_the_same_grid():
    from speco3.bench import sample
    from speco3.simulate import kinds_for
    X = {inst: prepare(sample(kinds_for("carbon"), 2, seed=0, tag="test-baselines", instrument=inst))
         for inst in ("lamost", "sdss", "desi")}
    for inst, x in X.items():
        assert x.shape == (2, 2, N_PIX) and np.isfinite(x).all(), inst
        assert x[:, 1].mean() > 0.9, f"{inst}: most of the grid should be usable"


def test_baselines_for_retrains_over_an_unreadable_cache(specialist, tmp_path, capsys):
    from speco3.baselines import baselines_for
    calls = []
    def train(data, settings, seed=0, device="cpu"):
        calls.append(seed)
        return dict(specialists={(specialist.name, "cv"): specialist}, train_log=[], pretrain_curve=[], pretrain_s=0.0, corpus=0, unlabeled=0)
    (tmp_path / "runs").mkdir()
    (tmp_path / "runs" / "baselines.pt").write_bytes(b"not a torch file")
    out = baselines_for(tmp_path, "smoke", tmp_path / "runs", train=train)
    assert out["source"] == "trained" and calls == [0] and "unreadable" in capsys.readouterr().out
    assert baselines_for(tmp_path, "smoke", tmp_path / "runs", train=train)["source"].startswith("loaded") and calls == [0]
    with pytest.raises(ValueError) as e: baselines_for(tmp_path, "fast", tmp_path / "runs", train=train)
    assert "unknown profile 'fast'" in one_line(e)


def test_vet_real_lists_what_it_cannot_read(specialist):
    from speco3.baselines import vet_real
    good = Spectrum(W, 1 + 0.01 * np.sin(W / 50), meta={"id": "ok", "label": "CV"})
    far = Spectrum(np.linspace(9500, 10500, 400), np.ones(400), meta={"id": "ir", "label": "M_DWARF", "survey": "X"})
    recs, unscored = vet_real([specialist], [good, far])
    assert [(r["sample_id"], r["truth"]) for r in recs] == [("ok", "YES")]
    assert [(u["id"], u["task"]) for u in unscored] == [("ir", "cv")] and "nothing inside" in unscored[0]["reason"]
    recs, unscored = vet_real([specialist], [far])
    assert recs == [] and len(unscored) == 1
