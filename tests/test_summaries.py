"""The committed results records read back through speco3.summaries: every results/*/summary.json and run.json, each
declared key there, and a key a record lacks is one line naming the file and the key."""
import json
from pathlib import Path
import pytest
from speco3.summaries import COMMON_KEYS, SUMMARY_KEYS, RUN_KEYS, RecordKeyError, read_summary, read_run, write_summary

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "results"
NOT_NOTEBOOK_RUNS = {"gpu_bench"}  # its run.json is bench/gpu_run_json.py's record of a GPU bench, not a paper notebook's
SUMMARIES = sorted(p.parent.name for p in RESULTS.glob("*/summary.json"))
RUNS = sorted(p.parent.name for p in RESULTS.glob("*/run.json") if p.parent.name not in NOT_NOTEBOOK_RUNS)


def test_every_record_is_found():
    assert len(SUMMARIES) >= 15 and len(RUNS) >= 17, (SUMMARIES, RUNS)
    assert set(SUMMARY_KEYS) <= set(SUMMARIES), "a declared target has no committed summary.json"


@pytest.mark.parametrize("target", SUMMARIES)
def test_committed_summary_reads_back(target):
    rec = read_summary(ROOT, target)
    for k in COMMON_KEYS + SUMMARY_KEYS.get(target, ()): rec[k]
    assert rec["target"] == target


@pytest.mark.parametrize("target", RUNS)
def test_committed_run_record_reads_back(target):
    rec = read_run(ROOT, target)
    for k in RUN_KEYS: rec[k]
    assert rec["profile"] == rec["params"]["profile"]


def test_missing_key_is_one_line_naming_file_and_key():
    with pytest.raises(RecordKeyError) as e: read_summary(ROOT, "sft")["training"]["no such run"]
    msg = str(e.value)
    assert "\n" not in msg and msg.startswith("results/sft/summary.json: no key 'training.no such run'"), msg


def test_writer_refuses_a_dropped_key(tmp_path):
    d = tmp_path / "results" / "grpo"; d.mkdir(parents=True)
    good = json.loads((RESULTS / "grpo" / "summary.json").read_text())
    write_summary(d, good)
    assert json.loads((d / "summary.json").read_text()) == good
    with pytest.raises(KeyError, match="lacks \\['init_row'\\]"): write_summary(d, {k: v for k, v in good.items() if k != "init_row"})


def test_missing_file_is_one_line(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"^results/sft/summary.json is missing: run it$"): read_summary(tmp_path, "sft", why="run it")
    assert read_run(tmp_path, "main", optional=True) is None
