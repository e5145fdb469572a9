# Sourced by bin/test and bin/reproduce: make sure ./.venv exists and holds speco3 with its dev tools.
# - Uses Python >= 3.11 (override with PYTHON=/path/to/python).
# - If that Python already has torch (e.g. a GPU machine), the venv sees the system packages, so the
#   user's torch is used and never replaced. Otherwise a CPU machine gets the CPU build of torch (never PyPI's
#   multi-GB CUDA build). speco3's core needs no torch at all; the model side (HF policy, tiny model, trainers) does.
# - Re-installs only when setup.py or settings.ini changed (a stamp in .venv records their hash).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
PY="${PYTHON:-}"
if [ -z "$PY" ]; then
  for c in python3.11 python3.12 python3.13 python3; do
    if command -v "$c" >/dev/null 2>&1 && "$c" -c 'import sys; sys.exit(sys.version_info < (3, 11))'; then PY="$c"; break; fi
  done
fi
[ -n "$PY" ] || { echo "speco3 needs Python >= 3.11; set PYTHON=/path/to/python3.11" >&2; exit 1; }
VENV="$ROOT/.venv"
if [ ! -x "$VENV/bin/python" ]; then
  flags=""
  if "$PY" -c 'import torch' >/dev/null 2>&1; then flags="--system-site-packages"; echo "[env] $PY has torch: the venv will use it" >&2; fi
  echo "[env] creating $VENV with $PY $flags" >&2
  "$PY" -m venv $flags "$VENV"
fi
stamp="$VENV/.speco3-installed"
want="$(cat setup.py settings.ini | sha256sum | cut -c1-16)"
TORCH_VERSION=2.13.0
install_torch() {
  # A torch that is already importable (the user's, e.g. a CUDA build on a GPU machine) is never replaced.
  "$VENV/bin/python" -c 'import torch' >/dev/null 2>&1 && return 0
  if command -v nvidia-smi >/dev/null 2>&1; then
    echo "[env] GPU machine without torch: installing torch==$TORCH_VERSION (default build)" >&2
    "$VENV/bin/python" -m pip install -q "torch==$TORCH_VERSION" >&2
  elif [ "$(uname -s)-$(uname -m)" = "Linux-x86_64" ]; then
    # the CPU build (~200 MB) instead of PyPI's multi-GB CUDA build: from pip's configured sources when they hold it
    # (a local wheel via find-links, a mirror), else from the PyTorch index
    echo "[env] CPU machine: installing the CPU build of torch==$TORCH_VERSION" >&2
    "$VENV/bin/python" -m pip install -q "torch==$TORCH_VERSION+cpu" >/dev/null 2>&1 ||
      "$VENV/bin/python" -m pip install -q "torch==$TORCH_VERSION+cpu" --extra-index-url https://download.pytorch.org/whl/cpu >&2
  else
    "$VENV/bin/python" -m pip install -q "torch==$TORCH_VERSION" >&2   # macOS / ARM Linux wheels on PyPI are CPU builds
  fi
}
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
  echo "[env] installing speco3, its dev tools, the model stack and the cluster extra into .venv (first run takes a few minutes)" >&2
  "$VENV/bin/python" -m pip install -q --upgrade pip >&2
  install_torch
  "$VENV/bin/python" -m pip install -q -e ".[dev,train,cluster]" >&2
  echo "$want" > "$stamp"
fi
export PATH="$VENV/bin:$PATH"
export MPLBACKEND=Agg
