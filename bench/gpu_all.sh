#!/usr/bin/env bash
# The GPU shapes no figure in results/gpu_bench/ covers yet, in one go of under 10 minutes on a one-GPU loan of a CUDA
# machine on which speco3 and its [train,dev] dependencies import:
#   bench/gpu_all.sh OUT_DIR [PROFILE_TEST_SECONDS]  # about 9 min of benches; the notebook test only when seconds > 0
#   bench/gpu_all.sh results/gpu_bench/shapes        # where tools/gpu_cost.py reads them; commit them, rerun the tool
#   bench/gpu_all.sh --tiny OUT_DIR                  # every step's code path on CPU with the tiny model, to check it
# Each step runs alone on the machine under its own time limit (the limits add up to 520 s on one GPU, plus the FSDP
# step's skip) and writes OUT_DIR/<step>.txt:
#   vet_320          bench/gpu_vet.py: vetting with turns as long as the evaluation's max_new_tokens (320 at gpu/paper)
#   sft_7b           bench/gpu_sft.py --size 7b: full fine-tuning of a Qwen2.5-VL-7B-shaped model; "does not fit" is
#                    a result
#   sft_7b_lora      bench/gpu_sft.py --size 7b --lora: the same with LoRA
#   grpo_7b_micro    bench/gpu_memory.py --size 7b: the largest GRPO micro-batch (1, 2, 4, 8) whose training pass fits
#   grpo_gpu_profile bench/gpu_grpo.py: GRPO at the gpu profile's shape, 8 questions x 8 rollouts, 4 per update,
#                    micro-batch 4, up to 7 zooms allowed (budgeted), 3 made: one round, warm-up included
#   (vet_320 runs without a warm-up batch, one batch of 16 at 4 x 320 tokens: its time is an upper bound)
#   fsdp_sft         bench/gpu_fsdp.py: a 2-process FSDP SFT under accelerate launch; on fewer than 2 GPUs it says it
#                    skipped and why
#   profiles         (PROFILE_TEST_SECONDS > 0 only) the gpu-profile paper notebooks at miniature size on the GPU
# Then OUT_DIR/status.txt (how each step ended; exit status 124: its time limit) and OUT_DIR/run.json (the machine,
# versions, commit, each step's command, exit status and measured lines: bench/gpu_run_json.py).
set -uo pipefail
tiny=(); [ "${1:-}" = "--tiny" ] && { tiny=(--tiny); shift; }
out="${1:?usage: bench/gpu_all.sh [--tiny] OUT_DIR [PROFILE_TEST_SECONDS]}"; profile_s="${2:-0}"
cd "$(dirname "${BASH_SOURCE[0]}")/.."
mkdir -p "$out"; out="$(cd "$out" && pwd)"
export PYTHONUNBUFFERED=1 MPLBACKEND=Agg HF_HUB_OFFLINE=1 PYTHONWARNINGS="ignore::FutureWarning"
if [ ${#tiny[@]} -eq 0 ]; then
  python3 -c 'import sys, torch
torch.cuda.is_available() or sys.exit("bench/gpu_all.sh needs a CUDA GPU: torch.cuda.is_available() is False "
                                      "(--tiny checks it on CPU)")
print(torch.cuda.get_device_name())' || exit 1
fi
started="$(date -u +%Y-%m-%dT%H:%M:%SZ)"
status=(); commands=()
step() {  # step NAME SECONDS COMMAND...
  local name="$1" secs="$2"; shift 2
  echo "== $name (limit ${secs} s)"
  local t0=$SECONDS
  timeout "$secs" "$@" 2>&1 | grep -v "warnings.warn" | tee "$out/$name.txt"
  status+=("$name: exit ${PIPESTATUS[0]}, $((SECONDS - t0)) s")
  commands+=("$name	$*")
}
if [ ${#tiny[@]} -eq 0 ]; then  # the loan's sizes
  step vet_320 110 python3 bench/gpu_vet.py --n 16 --batch 16 --calls 3 --max-new-tokens 320 --turn-tokens 320 \
    --warmup 0
  step sft_7b 75 python3 bench/gpu_sft.py --size 7b --steps 3
  step sft_7b_lora 75 python3 bench/gpu_sft.py --size 7b --lora --steps 3
  step grpo_7b_micro 60 python3 bench/gpu_memory.py --size 7b --micro 1 2 4 8
  step grpo_gpu_profile 200 python3 bench/gpu_grpo.py --questions 8 --generations 8 --per-update 4 --micro 4 \
    --calls 3 --max-calls 7 --steps 2
  step fsdp_sft 150 python3 bench/gpu_fsdp.py --processes 2 --steps 3
else  # the same steps' code paths on CPU at the smallest sizes that exercise them
  step vet_320 300 python3 bench/gpu_vet.py --tiny --n 2 --batch 2 --calls 1 --max-new-tokens 320 --turn-tokens 320 \
    --warmup 0
  step sft_7b 300 python3 bench/gpu_sft.py --tiny --size 7b --steps 2 --batch 1
  step sft_7b_lora 300 python3 bench/gpu_sft.py --tiny --size 7b --lora --steps 2 --batch 1
  step grpo_7b_micro 300 python3 bench/gpu_memory.py --tiny --size 7b --micro 1 2
  step grpo_gpu_profile 300 python3 bench/gpu_grpo.py --tiny --questions 2 --generations 2 --per-update 1 --micro 2 \
    --calls 1 --max-calls 3 --steps 2
  step fsdp_sft 300 python3 bench/gpu_fsdp.py --tiny --processes 2 --steps 2
fi
if [ "$profile_s" -gt 0 ]; then
  stop=(); python3 -c 'import pytest_timeout' 2>/dev/null && stop=(--timeout "$profile_s")  # where it is there
  step profiles $((profile_s + 30)) python3 -m pytest -v -p no:cacheprovider "${stop[@]}" --durations=0 \
    tests/test_profiles.py -k gpu_profile
fi
printf '%s\n' "${status[@]}" | tee "$out/status.txt"
printf '%s\n' "${commands[@]}" > "$out/commands.txt"
python3 bench/gpu_run_json.py "$out" --started "$started" "${tiny[@]}" && echo "wrote $out/run.json"
