"""Every notebook opens in Jupyter with a kernel chosen: chapters and paper notebooks carry a Python 3 kernelspec."""
import json
from pathlib import Path
import pytest

NBS = sorted((Path(__file__).resolve().parents[1] / "nbs").glob("**/*.ipynb"))
NBS = [p for p in NBS if not any(part.startswith(("_", ".")) for part in p.parent.parts[-2:])]


def test_notebooks_found():
    assert len(NBS) > 30


@pytest.mark.parametrize("path", NBS, ids=lambda p: p.name)
def test_kernelspec(path):
    spec = json.loads(path.read_text(encoding="utf-8"))["metadata"].get("kernelspec")
    assert spec and spec["name"] == "python3" and spec["language"] == "python", f"{path.name}: no python3 kernelspec"
