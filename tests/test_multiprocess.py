"""Training in two processes (speco3.launch: `train_sft(..., processes=2)`, `train_grpo(..., processes=2)`) on the tiny
offline Qwen2.5-VL, DDP over gloo on the CPU: both ranks finish, one model folder and one set of checkpoints are
written, and the record is the one a one-process run returns.

SFT: at the same global batch (4 conversations: 1 per device x 2 processes x 2 accumulation steps, against 1 x 1 x 4)
the two runs see the same conversations in each step, so their losses must agree; measured on this stack they agree to
every printed digit (loss 8.2582 then 7.9365, gradient norms equal) and the trained weights to 2.5e-7 against a
training movement of 1.5e-3. The test allows a relative 1e-4 on the loss and 1e-5 on the weights. A two-process run
killed in both processes after its step-1 checkpoint fails with one line naming rank 0 and its log, and resumed in two
processes it ends on the unbroken two-process run's weights (measured gap 0.0).

GRPO: each process samples its own rollouts (seeded per process), so two layouts never draw the same completions and
their losses cannot be compared number for number. What must hold is that the logged loss of a step is the loss of
the whole step's rollouts, gathered over the processes: at the first step (policy = sampling policy, no KL) the
token-mean GRPO loss is -sum(A_i L_i)/sum(L_i) over every rollout i of the step (advantage A_i, trained tokens L_i).
A callback records each rank's advantages and token counts; the test computes that sum over both ranks and compares
it with the logged loss (tolerance 1e-5 absolute), and the same on the one-process run. Skips without the `train` extra."""
import csv, json, os
from pathlib import Path
import pytest

pytest.importorskip("torch", reason="torch is not installed (pip install 'speco3[train]')")
pytest.importorskip("trl", reason="trl is not installed (pip install 'speco3[train]')")
from safetensors.torch import load_file

from speco3.launch import launch
from speco3.sft import demo_conversations, train_sft
from speco3.grpo import demo_rows, grpo_dataset, train_grpo
from speco3.tiny import build_tiny, load_tiny, overfit, scripted_conversations
from mp_record import KillAfterSave, RecordRounds, step_loss

pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py
HERE = Path(__file__).parent


@pytest.fixture
def reach_tests(monkeypatch):
    "The launched processes can import this folder's helpers (the recording callback travels pickled)."
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(HERE)] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]))


def losses(result):
    return [float(r["loss"]) for r in csv.DictReader(open(result.get("loss_csv") or result["rewards_csv"]))]


def one_run_written(out):
    "Both ranks finished, none failed, and one model and one checkpoint per save step were written."
    logs = out / "launch"
    assert sorted(p.name for p in logs.glob("rank*")) == ["rank0.log", "rank1.log"]  # no rank*.error
    assert all(p.read_text().rstrip().endswith(f"rank {r}: finished") for r, p in enumerate(sorted(logs.glob("rank*.log"))))
    assert (out / "model" / "model.safetensors").is_file() and not list(out.glob("model?*"))
    return sorted(p.name for p in (out / "checkpoints").glob("checkpoint-*"))


def test_sft_in_two_processes_matches_one(tmp_path, reach_tests):
    chats = demo_conversations(8, seed=3, guidelines=False)
    run = dict(profile="smoke", max_steps=2, save_steps=2, progress=False, global_batch=4, per_device_train_batch_size=1)
    one = train_sft(chats, tmp_path / "one", **run)
    two = train_sft(chats, tmp_path / "two", processes=2, **run)
    assert set(two) == set(one) and (one["processes"], two["processes"]) == (1, 2)
    assert one_run_written(tmp_path / "two") == ["checkpoint-2"]
    assert two["global_step"] == one["global_step"] == 2
    assert two["samples"] == one["samples"] == 8 and two["tokens"] == one["tokens"]  # counted over both ranks
    assert json.loads((tmp_path / "two" / "metrics.json").read_text()) == two
    a, b = losses(one), losses(two)
    assert len(a) == len(b) == 2 and all(abs(x - y) <= 1e-4 * abs(x) for x, y in zip(a, b)), (a, b)
    w1, w2 = load_file(one["model_dir"] + "/model.safetensors"), load_file(two["model_dir"] + "/model.safetensors")
    start = load_file(str(tmp_path / "one" / "base" / "model.safetensors"))
    moved = max(float((w1[k] - start[k]).abs().max()) for k in w1)
    gap = max(float((w1[k] - w2[k]).abs().max()) for k in w1)
    print(f"SFT losses one process {a}, two {b}; weights moved {moved:.3g}, gap {gap:.3g}")
    assert moved > 1e-4 and gap < 1e-5, (moved, gap)
    # killed in both processes after the step-1 checkpoint: one line names the rank and its log; resuming ends on the same weights
    with pytest.raises(ChildProcessError, match=r"^rank 0 of 2 failed: RuntimeError: simulated kill \(log: .*rank0\.log\)$"):
        train_sft(chats, tmp_path / "killed", processes=2, **dict(run, save_steps=1), callbacks=[KillAfterSave(1)])
    resumed = train_sft(chats, tmp_path / "killed", processes=2, **dict(run, save_steps=1))
    assert resumed["resumed_from"] == "checkpoint-1" and resumed["global_step"] == 2 and losses(resumed) == b
    w3 = load_file(resumed["model_dir"] + "/model.safetensors")
    assert max(float((w2[k] - w3[k]).abs().max()) for k in w2) < 1e-6  # measured: 0.0


def test_the_cli_takes_processes_and_refuses_what_cannot_split(tmp_path, capsys):
    "Refused in one line before any process starts: a global batch or an update that N processes cannot split."
    from speco3.cli import main
    d = tmp_path / "data"; d.mkdir()   # the paths are checked first (speco3 train refuses a missing one before anything)
    assert main(["train", "sft", "--profile", "paper", "--data", str(d), "--out", str(tmp_path / "a"), "--processes", "3"]) == 1
    assert capsys.readouterr().err.strip() == ("speco3 train: profile 'paper': a global batch of 32 conversations does not split "
                                               "into 4 per device x 3 processes")
    assert main(["train", "grpo", "--profile", "smoke", "--data", str(d), "--out", str(tmp_path / "b"), "--processes", "3"]) == 1
    assert "micro-batches of 4 x 3 processes" in capsys.readouterr().err
    assert main(["train", "grpo", "--data", "d", "--out", "o", "--processes", "0"]) == 2  # argparse: must be >= 1
    assert not list(tmp_path.glob("*/launch"))


@pytest.fixture(scope="module")
def zoomer(tmp_path_factory):
    "The tiny model overfit on one scripted cv inspection (zoom on H-alpha, answer YES): varied rollouts at temperature 1."
    rows = demo_rows(4, tasks=("cv",), guidelines=False)
    call = ('<think>Is there broad Balmer emission? I zoom on H-alpha.</think>\n<tool_call>{"name": "spectral_visualization_tool", '
            '"arguments": {"wavelength_range": [6480, 6650], "label": "H-alpha"}}</tool_call>')
    path = tmp_path_factory.mktemp("zoomer")
    build_tiny(path)
    model, processor = load_tiny(path)
    overfit(model, processor, scripted_conversations(rows[:1], [call, "<think>The line settles it.</think>\n<answer>\\boxed{YES}</answer>"],
                                                     style="fast", guidelines=False))
    model.save_pretrained(path)
    return path, grpo_dataset(rows, style="fast")


def test_grpo_in_two_processes_takes_the_whole_step(zoomer, tmp_path, reach_tests):
    init, data = zoomer
    run = dict(init=init, profile="smoke", prompt="paper", temperature=1.0, num_generations=4, max_steps=1, save_steps=1, micro_batch=2, progress=False)
    one = train_grpo(data, tmp_path / "one", callbacks=[RecordRounds(tmp_path / "rec1")], **run)
    two = train_grpo(data, tmp_path / "two", processes=2, callbacks=[RecordRounds(tmp_path / "rec2")], **run)
    assert set(two) == set(one) and (one["processes"], two["processes"]) == (1, 2)
    assert one_run_written(tmp_path / "two") == ["checkpoint-1"] and two["global_step"] == 1
    assert two["rollouts_this_session"] == one["rollouts_this_session"] == 8  # 2 questions x 4 rollouts
    for rec, res in (("rec1", one), ("rec2", two)):
        want, n = step_loss(tmp_path / rec)
        print(f"GRPO {res['processes']} process(es): logged loss {losses(res)[0]:.9g}, from the step's rollouts {want:.9g}")
        assert n == 8 and abs(losses(res)[0] - want) <= 1e-5, (rec, losses(res), want)
    assert step_loss(tmp_path / "rec1")[0] != 0 and step_loss(tmp_path / "rec2")[0] != 0  # rewards and lengths varied: not a trivial 0
