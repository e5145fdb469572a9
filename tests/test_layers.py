"""The layer rules of the design notes: the core imports no deep-learning framework, and a module imports only
the speco3 modules of the layers above it."""
import ast, subprocess, sys
from pathlib import Path
import pytest

LIB = Path(__file__).resolve().parents[1] / "speco3"
CORE = ["spectrum", "io", "simulate", "classify", "indices", "render", "tool", "prompts", "reward", "metrics"]  # design §2; grows with simulate, bench, prompts, metrics
FRAMEWORKS = ["torch", "transformers", "trl", "verl", "peft", "accelerate"]
# module -> speco3 modules it may import (layers above it)
ALLOWED = {"spectrum": set(), "io": {"spectrum"}, "simulate": {"spectrum", "io"}, "classify": {"spectrum"}, "indices": {"spectrum"}, "render": {"spectrum", "io"}, "tool": {"spectrum", "io", "render"},
           "reward": set(), "metrics": set(),
           "prompts": {"tool"},  # the tool schema is defined once, in speco3.tool
           "policy": {"spectrum"}, "view": set(), "remote": {"prompts", "tool", "policy"},
           "hf": {"policy", "prompts"}, "tiny": {"spectrum", "tool", "prompts", "agent", "policy", "hf"},
           "expert": {"spectrum", "indices", "policy", "prompts", "tool"},
           "coldstart": {"spectrum", "agent", "policy", "prompts", "reward", "tool", "simulate", "expert", "view", "bench", "io", "remote"},
           "agent": {"spectrum", "io", "tool", "prompts", "reward", "policy"}}

def speco3_imports(mod):
    tree = ast.parse((LIB / f"{mod}.py").read_text())
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.level or (node.module or "").startswith("speco3")):
            name = (node.module or "").removeprefix("speco3").lstrip(".")
            found |= {name.split(".")[0]} if name else {a.name for a in node.names}
        elif isinstance(node, ast.Import):
            found |= {a.name.split(".")[1] for a in node.names if a.name.startswith("speco3.")}
    return found

@pytest.mark.parametrize("mod", [m for m in ALLOWED if (LIB / f"{m}.py").exists()])
def test_imports_only_layers_above(mod):
    extra = speco3_imports(mod) - ALLOWED[mod]
    assert not extra, f"speco3.{mod} imports {sorted(extra)}, which are not in a layer above it"

def test_core_imports_no_framework():
    mods = [m for m in CORE if (LIB / f"{m}.py").exists()]
    code = ("import sys\n" + "".join(f"import speco3.{m}\n" for m in mods) +
            f"bad = [f for f in {FRAMEWORKS!r} if f in sys.modules]\nprint(','.join(bad))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == "", f"importing the core pulled in {out}"
