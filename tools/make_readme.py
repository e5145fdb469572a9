"""Write README.md from nbs/index.ipynb (markdown cells as they are, code cells as fenced Python with their
text output). nbdev's own nbdev_readme needs Quarto, which these machines do not have.
Usage: python tools/make_readme.py [--check]   (--check exits 1 if README.md is out of date)"""
import json, sys
from pathlib import Path

root = Path(__file__).resolve().parents[1]

def render(nb):
    parts = []
    for cell in nb["cells"]:
        src = "".join(cell["source"]).rstrip()
        if cell["cell_type"] == "markdown": parts.append(src)
        elif cell["cell_type"] == "code" and src and not src.startswith("#| hide"):
            parts.append(f"```python\n{src}\n```")
            outs = [o for o in cell.get("outputs", []) if o.get("output_type") == "stream"]
            text = "".join("".join(o["text"]) for o in outs).rstrip()
            if text: parts.append(f"```\n{text}\n```")
    return "\n\n".join(parts) + "\n"

if __name__ == "__main__":
    text = render(json.loads((root / "nbs" / "index.ipynb").read_text()))
    readme = root / "README.md"
    if "--check" in sys.argv:
        if not readme.exists() or readme.read_text() != text:
            sys.exit("README.md is out of date with nbs/index.ipynb: run `python tools/make_readme.py` and commit it")
    else: readme.write_text(text)
