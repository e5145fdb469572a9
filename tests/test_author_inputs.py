"""bin/reproduce and tools/run_papers.py with an author's inputs: bad arguments are refused in one line before anything
runs, the toy sizes reach only the notebooks that declare them, the inputs are shrunk into copies of the same form, and
--processes reaches every SFT and GRPO run. (The whole toy run, at gpu and paper, is bin/test step 7.)"""
import json, subprocess, sys
from pathlib import Path
import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
import run_papers  # noqa: E402
import author_fixture  # noqa: E402

PAPER = ROOT / "nbs" / "paper"


def reproduce(*args):
    return subprocess.run([str(ROOT / "bin" / "reproduce"), *args], capture_output=True, text=True, cwd=ROOT, timeout=60)


@pytest.mark.parametrize("args, said", [
    (("bogus",), "unknown profile 'bogus'"),
    (("gpu", "--data"), "--data needs a folder"),
    (("gpu", "--data", "/no/such/snapshot"), "--data /no/such/snapshot: no such file or folder"),
    (("gpu", "--gpus", "two"), "--gpus needs a number of GPUs"),
    (("cpu", "--toy"), "--toy is for gpu and paper"),
    (("gpu", "--frobnicate"), "unknown argument '--frobnicate'"),
    (("gpu", "--endpoint", "http://localhost:8000/v1"), "--endpoint takes 'vllm'")])
def test_reproduce_refuses_bad_arguments_before_anything_runs(args, said):
    r = reproduce(*args)
    assert r.returncode == 2 and said in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr


def test_parameters_reach_only_the_notebooks_that_declare_them():
    assert {"data_dir", "coldstart_dir", "model", "sft_overrides"} <= run_papers.declared(PAPER / "04_sft.ipynb")
    given = {"model": "M", "data_dir": "D"}
    assert run_papers.extra_params("04_sft", PAPER / "04_sft.ipynb", given) == ["-p", "model", "M", "-p", "data_dir", "D"]
    assert "model" not in run_papers.extra_params("10_general_vlms", PAPER / "10_general_vlms.ipynb", given)  # there: a served model's name
    y = run_papers.yaml_params("08_baselines", PAPER / "08_baselines.ipynb", {"train_size": "smoke", "n_traj": 4})
    assert y[0] == "-y" and "train_size: smoke" in y[1] and "n_traj" not in y[1]
    assert run_papers.yaml_params("00_tool_gallery", PAPER / "00_tool_gallery.ipynb", {"n_traj": 4}) == []


def test_endpoint_reaches_every_notebook_that_vets_a_trained_model():
    vets = {nb.stem for nb in PAPER.glob("[0-9]*.ipynb") if "vet_model(" in nb.read_text()}
    assert vets and {nb for nb in vets if "endpoint" in run_papers.declared(PAPER / f"{nb}.ipynb")} == vets
    for nb in vets:  # each call hands it on
        calls = (PAPER / f"{nb}.ipynb").read_text().count("vet_model(")
        assert (PAPER / f"{nb}.ipynb").read_text().count("endpoint=endpoint") == calls, nb


def test_every_toy_size_is_declared_by_some_notebook():
    import yaml
    toy = yaml.safe_load((PAPER / "toy.yaml").read_text())
    declared = set().union(*(run_papers.declared(nb) for nb in PAPER.glob("[0-9]*.ipynb")))
    assert set(toy["params"]) <= declared, set(toy["params"]) - declared
    overrides = set(toy["params"]["grpo_overrides"]) | set(toy["params"]["sft_overrides"])
    assert not {"max_steps", "rl_steps"} & (set(toy["params"]) | overrides)   # sizes only: never a step count


@pytest.fixture(scope="module")
def fixture(tmp_path_factory):
    return author_fixture.build(tmp_path_factory.mktemp("author") / "fixture", per_class=2)


def test_the_fixture_is_in_both_published_layouts(fixture):
    from speco3.paper import check_inputs
    got = check_inputs(data=fixture / "SpecVI-Bench", coldstart=fixture / "ColdStartSFT")
    assert got["data"]["files"] == 10 and got["data"]["rows"] == 40 and got["data"]["yes"] == 20
    assert got["coldstart"]["drafter"].startswith("the authors'") and set(got["coldstart"]["per_task"]) <= {"carbon", "cv", "gm", "ss", "wd"}
    rows = json.loads((fixture / "ColdStartSFT" / "spec_o3_coldstart.json").read_text())
    assert {"conversations", "images", "sample_index", "source_name", "ground_truth", "total_iterations", "total_tool_calls"} <= set(rows[0])
    assert "simulated" in (fixture / "SpecVI-Bench" / "README.md").read_text()   # the simulated positives are said to be


def test_toy_shrinks_the_inputs_into_copies_of_the_same_form(fixture, tmp_path):
    params = {"data_dir": str(fixture / "SpecVI-Bench"), "coldstart_dir": str(fixture / "ColdStartSFT")}
    sizes, got, record = run_papers.toy_sizes("paper", params, tmp_path)
    from speco3.paper import check_inputs
    small = check_inputs(data=got["data_dir"], coldstart=got["coldstart_dir"], model=got["model"])
    assert small["data"]["rows"] == 10 * record["data_rows"] and small["coldstart"]["n"] == record["coldstart_n"]
    assert small["model"]["model_type"] == "qwen2_5_vl" and Path(got["data_dir"]).name == "toy-SpecVI-Bench"
    assert record["toy"] and sizes["bench_size"] == "smoke"
    with pytest.raises(SystemExit, match="--toy is the gpu and paper code path"): run_papers.toy_sizes("cpu", params, tmp_path)


def test_run_papers_refuses_a_bad_input_in_one_line(tmp_path):
    r = subprocess.run([sys.executable, "tools/run_papers.py", "--profile", "gpu", "--out-dir", str(tmp_path), "--dest", str(tmp_path / "x"),
                        "--param", f"data_dir={tmp_path}"], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert r.returncode == 1 and "neither a SpecVI-Sim build nor a SpecVI-Bench snapshot" in r.stderr, r.stderr
    assert not (tmp_path / "x").exists()   # refused before any notebook


def test_the_fixture_can_be_made_from_another_collection(tmp_path):
    "--spectra: a collection in data/real-spectra's schema (here a few rows of it) is the one the fixture is made from."
    import pandas as pd
    full = pd.read_parquet(author_fixture.root / "data" / "real-spectra" / "spectra.parquet")
    labels = {l for yes, no in author_fixture.LABELS.values() for l in yes + no}
    some = full[full.label.isin(labels)].groupby("label").head(3)
    (tmp_path / "other").mkdir()
    some.to_parquet(tmp_path / "other" / "spectra.parquet")
    out = author_fixture.build(tmp_path / "fixture", per_class=1, spectra=tmp_path / "other")
    ids = set()
    for f in (out / "SpecVI-Bench" / "benchmark" / "data").glob("*.parquet"):
        ids |= {r["name"] for r in pd.read_parquet(f)["extra_info"]}
    real = {i for i in ids if not i.startswith("SIM-")}
    assert real and real <= set(some["id"]), real - set(some["id"])   # every real row is from the given collection
    assert "`other`" in (out / "SpecVI-Bench" / "README.md").read_text()
    with pytest.raises(SystemExit, match="holds no spectra.parquet"):
        author_fixture.build(tmp_path / "fixture2", spectra=tmp_path)
