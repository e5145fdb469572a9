"tools/answer_probe.py: a linear probe of the answer on each model's pooled overview tokens, per task, and its bad input."
import subprocess, sys
from pathlib import Path
import numpy as np, pandas as pd, pytest

ROOT = Path(__file__).resolve().parents[1]
TOOL = ROOT / "tools" / "answer_probe.py"


def probe(*args):
    return subprocess.run([sys.executable, str(TOOL), *map(str, args)], capture_output=True, text=True, cwd=ROOT, timeout=600)


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    from speco3.bench import build
    from speco3.tiny import build_tiny
    d = tmp_path_factory.mktemp("probe")
    build(d / "bench", profile="smoke", seed=0, progress=False, images=False,
          sizes=dict(train=6, test=6, cross_survey=0, cross_task=0, qso=0, cv_lowsnr=0, weak_train=30, archive_chunk=300))
    build_tiny(d / "a", seed=0); build_tiny(d / "b", seed=1)
    return d


def test_a_row_per_model_and_task(setup):
    out = setup / "probe.csv"
    r = probe("--data", setup / "bench", "--out", out, "--l2", "1,10", f"a={setup / 'a'}", f"b={setup / 'b'}")
    assert r.returncode == 0, r.stderr[-2000:]
    df = pd.read_csv(out)
    assert list(df.model.unique()) == ["a", "b"] and len(df) == 10 and set(df.task) == {"cv", "carbon", "gm", "ss", "wd"}
    cols = ["balanced_acc_l2_1", "f1_l2_1", "balanced_acc_l2_10", "f1_l2_10"]
    assert df[cols].apply(lambda c: c.between(0, 100)).all().all() and (df.test_rows == 6).all()


def test_the_scores_are_balanced_accuracy_and_f1():
    sys.path.insert(0, str(ROOT / "tools"))
    from answer_probe import scores
    truth, pred = np.array([1, 1, 0, 0, 0, 0.]), np.array([1, 0, 1, 0, 0, 0.])
    assert scores(pred, truth) == pytest.approx((100 * (0.5 + 0.75) / 2, 100 * 2 / 4))   # tp 1, fp 1, fn 1


def test_bad_input_says_what(setup, tmp_path):
    r = probe("--data", setup / "bench", "--out", tmp_path / "x.csv", "no-equals-sign")
    assert r.returncode != 0 and "'no-equals-sign' is not NAME=MODEL_DIR" in r.stderr
    r = probe("--data", setup / "bench", "--out", tmp_path / "x.csv", f"m={tmp_path / 'nothing'}")
    assert r.returncode != 0 and "no model folder here" in r.stderr
    r = probe("--data", setup / "bench", "--out", tmp_path / "x.csv", "--l2", "ten", f"a={setup / 'a'}")
    assert r.returncode != 0 and "--l2 'ten'" in r.stderr
    r = probe("--data", tmp_path / "no-bench", "--out", tmp_path / "x.csv", f"a={setup / 'a'}")
    assert r.returncode != 0 and "no benchmark folder here" in r.stderr
    assert not (tmp_path / "x.csv").exists()
