"""The GPU benches' code paths on CPU (`--tiny`), so that the scripts a GPU loan runs cannot rot unseen.

The cheapest paths only (bench/gpu_all.sh --tiny runs every step, in minutes): the GRPO micro-batch sweep, vetting with
long forced turns, the FSDP bench's skip on a machine with too few GPUs, the refusals, and run.json from gpu_all.sh's
files. The 7B architecture is checked by its parameter count on the meta device (tests/test_gpu_cost.py).
"""
import json, os, re, subprocess, sys
from pathlib import Path
import pytest

ROOT = Path(__file__).resolve().parent.parent
BENCH = ROOT / "bench"
sys.path.insert(0, str(BENCH))


def bench(*args, timeout=240):
    "Run bench/<script> with `args` on CPU; (exit status, stdout + stderr)."
    env = {**os.environ, "PYTHONPATH": str(ROOT), "MPLBACKEND": "Agg", "PYTHONWARNINGS": "ignore",
           "CUDA_VISIBLE_DEVICES": ""}
    p = subprocess.run([sys.executable, str(BENCH / args[0]), *args[1:]], capture_output=True, text=True, env=env,
                       timeout=timeout, cwd=ROOT)
    return p.returncode, p.stdout + p.stderr


def test_memory_sweep_tiny():
    code, out = bench("gpu_memory.py", "--tiny", "--micro", "1", "2", "--tokens", "128")
    assert code == 0, out
    assert re.search(r"micro-batch 1: fits;.*tokens/s", out) and re.search(r"micro-batch 2: fits;", out), out
    assert "largest micro-batch that fits: 2 of [1, 2]" in out
    assert "by arithmetic, before activations" in out


def test_vet_long_turns_tiny():
    code, out = bench("gpu_vet.py", "--tiny", "--n", "2", "--batch", "2", "--calls", "1", "--max-new-tokens", "120",
                      "--turn-tokens", "120", "--warmup", "0")
    assert code == 0, out
    new = float(re.search(r"([\d,]+) new tokens", out)[1])
    assert 90 <= new <= 120, out  # the forced turns are about as long as asked, never past the budget
    assert re.search(r"[\d.]+ s/spectrum", out) and "turns forced to about 120 tokens" in out


def test_refusals():
    code, out = bench("gpu_vet.py", "--tiny", "--max-new-tokens", "96", "--turn-tokens", "320")
    assert code == 2 and "--turn-tokens 320 exceeds --max-new-tokens 96" in out
    code, out = bench("gpu_memory.py", "--tiny", "--micro", "4", "2")
    assert code == 2 and "smallest first" in out
    code, out = bench("gpu_memory.py", "--size", "7b")
    assert code == 1 and "needs a CUDA GPU" in out and out.strip().count("\n") == 0, out


def test_fsdp_skips_without_gpus():
    code, out = bench("gpu_fsdp.py", "--processes", "2")
    assert code == 0, out
    assert re.fullmatch(r"skipped: a 2-process FSDP SFT needs 2 GPUs, one per process; this machine has 0 "
                        r"\(no CUDA device\)\s*", out), out


def test_pad_thought():
    from speco3.tiny import tiny_tokenizer
    from gpu_vet import pad_thought
    tok = tiny_tokenizer()
    assert pad_thought("short", tok, 0, "</think>") == "short"
    long = pad_thought("short", tok, 200, "</think>")
    assert 150 < len(tok.encode(long + "</think>", add_special_tokens=False)) <= 200


def test_run_json(tmp_path):
    (tmp_path / "status.txt").write_text("vet_320: exit 0, 41 s\nsft_7b: exit 0, 30 s\n"
                                         "grpo_gpu_profile: exit 124, 230 s\nfsdp_sft: exit 0, 4 s\n")
    (tmp_path / "commands.txt").write_text("vet_320\tpython3 bench/gpu_vet.py --n 16\n"
                                           "fsdp_sft\tpython3 bench/gpu_fsdp.py\n")
    (tmp_path / "vet_320.txt").write_text("python 3.12\nmodel: Qwen2.5-VL-3B-shaped, 3,754.6 M parameters\n"
                                          "1.9 s/spectrum (0.5 spectra/s)\n")
    (tmp_path / "sft_7b.txt").write_text("header\ndoes not fit: CUDA out of memory on this GPU (79.2 GiB)\n")
    (tmp_path / "grpo_gpu_profile.txt").write_text("header\noptimizer step 1 done: 150.00 s\n")
    (tmp_path / "fsdp_sft.txt").write_text("skipped: a 2-process FSDP SFT needs 2 GPUs, one per process; "
                                           "this machine has 1\n")
    writer = [sys.executable, str(BENCH / "gpu_run_json.py"), str(tmp_path)]
    p = subprocess.run(writer + ["--started", "2026-12-06T00:00:00Z"], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    run = json.loads((tmp_path / "run.json").read_text())
    assert run["started_utc"] == "2026-12-06T00:00:00Z" and run["machine"]["cpu_cores"] and run["git_commit"]
    s = run["steps"]
    assert set(s) == {"vet_320", "sft_7b", "grpo_gpu_profile", "fsdp_sft"}
    assert s["vet_320"]["command"] == "python3 bench/gpu_vet.py --n 16"
    assert "1.9 s/spectrum (0.5 spectra/s)" in s["vet_320"]["measured"]
    assert s["sft_7b"]["measured"] == ["does not fit: CUDA out of memory on this GPU (79.2 GiB)"]
    assert s["grpo_gpu_profile"]["ended"] == "time limit (exit 124)"
    assert s["grpo_gpu_profile"]["measured"] == ["optimizer step 1 done: 150.00 s"]
    assert s["fsdp_sft"]["measured"][0].startswith("skipped:")
    (tmp_path / "status.txt").write_text("vet_320 went fine\n")
    p = subprocess.run(writer, capture_output=True, text=True, timeout=60)
    assert p.returncode != 0 and "status.txt: cannot read the line 'vet_320 went fine'" in p.stderr
