#!/usr/bin/env bash
# Every GPU check in one go, for a short loan of a CUDA machine on which speco3 and its [train,dev] dependencies import:
#   bench/gpu_all.sh OUT_DIR [PROFILE_TEST_SECONDS]      # about 6 min of benches, then the notebook test (default 400 s)
# 1-3. bench/gpu_vet.py, gpu_sft.py and gpu_grpo.py, one after another, each alone on the machine (their figures are the
#      machine's own; results/gpu_bench/ holds the first such run), each under its own time limit;
# 4.   the gpu-profile paper notebooks at miniature size: pytest tests/test_profiles.py -k gpu_profile (bf16 on the GPU),
#      verbose, with pytest's own timeout so that a run stopped early still says which notebook it was in.
# Each step writes OUT_DIR/<step>.txt; the last lines say how each step ended (exit status 124: its time limit).
set -uo pipefail
out="${1:?usage: bench/gpu_all.sh OUT_DIR [PROFILE_TEST_SECONDS]}"; profile_s="${2:-400}"
cd "$(dirname "${BASH_SOURCE[0]}")/.."
mkdir -p "$out"
export PYTHONUNBUFFERED=1 MPLBACKEND=Agg HF_HUB_OFFLINE=1 PYTHONWARNINGS="ignore::FutureWarning"
python3 -c 'import sys, torch; torch.cuda.is_available() or sys.exit("bench/gpu_all.sh needs a CUDA GPU: torch.cuda.is_available() is False"); print(torch.cuda.get_device_name())' || exit 1
status=()
step() {  # step NAME SECONDS COMMAND...
  local name="$1" secs="$2"; shift 2
  echo "== $name (limit ${secs} s)"
  timeout "$secs" "$@" 2>&1 | grep -v "warnings.warn" | tee "$out/$name.txt"
  status+=("$name: exit ${PIPESTATUS[0]}")
}
step gpu_vet 150 python3 bench/gpu_vet.py --n 48
step gpu_sft 150 python3 bench/gpu_sft.py --steps 4
step gpu_grpo 300 python3 bench/gpu_grpo.py --steps 2
stop=(); python3 -c 'import pytest_timeout' 2>/dev/null && stop=(--timeout "$profile_s")  # where pytest-timeout is there
step profiles $((profile_s + 30)) python3 -m pytest -v -p no:cacheprovider "${stop[@]}" --durations=0 tests/test_profiles.py -k gpu_profile
printf '%s\n' "${status[@]}" | tee "$out/status.txt"
