#!/usr/bin/env bash
# The tests that need verl (tests/test_verl.py), run in verl's own environment so they cannot go stale.
# verl pins transformers<5.11 while speco3's TRL stack needs 5.24, so verl never enters ./.venv; it gets ./.venv-verl:
# verl (VERL_REQUIREMENTS in speco3/verl.py: verl 0.9.1 and the packages its agent loop imports undeclared) on the CPU
# build of torch, speco3's core requirements (settings.ini), pytest, and speco3 itself without dependencies.
# First use takes ~2.5 minutes and ~2.2 GB (measured: verl 0.9.1 + torch 2.13.0+cpu); later runs reuse the environment
# until one of its inputs changes (a stamp records their hash), and the tests take ~20 s.
#   tools/verl_env.sh                  # make or reuse the environment, then run tests/test_verl.py in it
#   tools/verl_env.sh -k real -x       # extra arguments go to pytest
#   tools/verl_env.sh --setup          # only make or reuse the environment (e.g. to fill a CI cache)
# Environment: PYTHON (a Python >= 3.11 to build it with), SPECO3_VERL_VENV (where it lives; default ./.venv-verl,
# git-ignored; point it at a cached folder in CI). No verl test may skip here: SPECO3_REQUIRE_EXTRAS=verl makes a
# skip for want of verl fail the run, like any other skip under SPECO3_STRICT_SKIPS.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
VENV="${SPECO3_VERL_VENV:-$ROOT/.venv-verl}"
TORCH_VERSION=2.13.0   # the CPU build tools/env.sh installs too; verl's tests need no GPU
setup_only=0
if [ "${1:-}" = "--setup" ]; then setup_only=1; shift; fi

PY="${PYTHON:-}"
if [ -z "$PY" ]; then
  for c in python3.11 python3.12 python3.13 python3; do
    if command -v "$c" >/dev/null 2>&1 && "$c" -c 'import sys; sys.exit(sys.version_info < (3, 11))'; then PY="$c"; break; fi
  done
fi
[ -n "$PY" ] || { echo "verl_env: needs Python >= 3.11; set PYTHON=/path/to/python3.11" >&2; exit 1; }

# what goes in, read from the repository (speco3/verl.py is read as text: speco3 cannot be imported before it exists)
mapfile -t VERL_REQS < <("$PY" - <<'EOF'
import ast
for node in ast.parse(open("speco3/verl.py", encoding="utf-8").read()).body:
    if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "VERL_REQUIREMENTS" for t in node.targets):
        print("\n".join(ast.literal_eval(node.value)))
EOF
)
mapfile -t CORE_REQS < <("$PY" - <<'EOF'
import configparser
cp = configparser.ConfigParser(delimiters=["="]); cp.read("settings.ini")
print("\n".join(cp["DEFAULT"]["requirements"].split()))
EOF
)
[ "${#VERL_REQS[@]}" -gt 0 ] && [ "${#CORE_REQS[@]}" -gt 0 ] || { echo "verl_env: could not read VERL_REQUIREMENTS or settings.ini requirements" >&2; exit 1; }

want="$(printf '%s\n' "$TORCH_VERSION" "${VERL_REQS[@]}" "${CORE_REQS[@]}" pytest "$("$PY" -c 'import sys; print(sys.version)')" \
        | cat - setup.py | sha256sum | cut -c1-16)"
stamp="$VENV/.speco3-verl-installed"
if [ ! -x "$VENV/bin/python" ] || [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
  t0=$SECONDS
  echo "[verl_env] making $VENV with $PY: ${VERL_REQS[*]} (first run takes a few minutes)" >&2
  rm -rf "$VENV"
  "$PY" -m venv "$VENV"
  pip_() { "$VENV/bin/python" -m pip install -q --disable-pip-version-check "$@"; }
  if [ "$(uname -s)-$(uname -m)" = "Linux-x86_64" ]; then
    # the CPU build (~200 MB) instead of PyPI's CUDA build (with it, plain `pip install verl` makes a 6.4 GB environment)
    pip_ "torch==$TORCH_VERSION+cpu" >/dev/null 2>&1 ||
      pip_ "torch==$TORCH_VERSION+cpu" --extra-index-url https://download.pytorch.org/whl/cpu >&2
  else
    pip_ "torch==$TORCH_VERSION" >&2   # macOS / ARM Linux wheels on PyPI are CPU builds
  fi
  pip_ "${VERL_REQS[@]}" "${CORE_REQS[@]}" pytest >&2
  pip_ -e "$ROOT" --no-deps >&2
  "$VENV/bin/python" -c 'import verl, torch, speco3.tool, speco3.reward' ||
    { echo "verl_env: $VENV was made but verl or speco3's core does not import" >&2; exit 1; }
  echo "$want" > "$stamp"
  echo "[verl_env] made in $((SECONDS - t0)) s, $(du -sh "$VENV" | cut -f1)" >&2
fi
"$VENV/bin/python" -c 'import importlib.metadata as m; print("[verl_env]", ", ".join(f"{p} {m.version(p)}" for p in ("verl", "torch", "transformers")))' >&2
[ "$setup_only" = 1 ] && exit 0

scratch="$(mktemp -d "${TMPDIR:-/tmp}/speco3-verl.XXXXXX")"
trap 'rm -rf "$scratch"' EXIT
TMPDIR="$scratch" MPLBACKEND=Agg SPECO3_STRICT_SKIPS=1 SPECO3_REQUIRE_EXTRAS=verl \
  "$VENV/bin/python" -m pytest -q -p no:cacheprovider --basetemp "$scratch/pytest" tests/test_verl.py "$@"
