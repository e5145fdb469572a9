"""Write README.md from nbs/index.ipynb (markdown cells as they are, code cells as fenced Python with their
text output). A markdown line `<!-- include: PATH -->` is replaced by the file at PATH (relative to the repository
root; a .csv file becomes a Markdown table), so tables generated into results/ appear in the README without being typed.
nbdev's own nbdev_readme needs Quarto, which these machines do not have.
Usage: python tools/make_readme.py [--check]   (--check exits 1 if README.md is out of date)"""
import csv, json, re, sys
from pathlib import Path

root = Path(__file__).resolve().parents[1]

def csv_table(path):
    "A CSV file as a Markdown table, its cells as written."
    rows = list(csv.reader(path.read_text().splitlines()))
    return "\n".join("| " + " | ".join(r) + " |" for r in [rows[0], ["---"] * len(rows[0])] + rows[1:])

def include(text):
    "Replace `<!-- include: PATH -->` lines by the file's content (or a note that it has not been generated)."
    def sub(m):
        p = root / m.group(1)
        if p.exists(): return csv_table(p) if p.suffix == ".csv" else p.read_text().rstrip()
        return f"_({m.group(1)} has not been generated yet: run bin/reproduce)_"
    return re.sub(r"^<!-- include: (\S+) -->$", sub, text, flags=re.M)

def render(nb):
    parts = []
    for cell in nb["cells"]:
        src = "".join(cell["source"]).rstrip()
        if cell["cell_type"] == "markdown": parts.append(include(src))
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
