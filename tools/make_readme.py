"""Write README.md from nbs/index.ipynb and the results page docs/results.md from nbs/results.ipynb (markdown cells
as they are, code cells as fenced Python with their text output). A markdown line `<!-- include: PATH -->` is replaced
by the file at PATH (relative to the repository root; a .csv file becomes a Markdown table), so tables generated into
results/ appear in the pages without being typed. A figure in running text is written `{{PATH#KEY/KEY|FORMAT}}`: the value
at that key path of the JSON file PATH (a list index is a number; `[field=value,...]` picks the one record of a list
whose fields match), formatted by FORMAT (see `FORMATS`, or any Python
format spec such as `.1f`); so the numbers a page states are read from the run that made them, and `--check` fails
when a new run changes one.
nbdev's own nbdev_readme needs Quarto, which these machines do not have.
Usage: python tools/make_readme.py [--check]   (--check exits 1 if README.md or docs/results.md is out of date)"""
import csv, json, re, sys
from pathlib import Path

root = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(root))

def csv_table(path):
    "A CSV file as a Markdown table, its cells as written."
    from speco3.summaries import markdown_table
    rows = list(csv.reader(path.read_text().splitlines()))
    return markdown_table(rows[0], rows[1:])

def include(text):
    "Replace `<!-- include: PATH -->` lines by the file's content (or a note that it has not been generated)."
    def sub(m):
        p = root / m.group(1)
        if p.exists(): return csv_table(p) if p.suffix == ".csv" else p.read_text().rstrip()
        return f"_({m.group(1)} has not been generated yet: run bin/reproduce)_"
    return re.sub(r"^<!-- include: (\S+) -->$", sub, text, flags=re.M)

def _hm(s):
    h, m = divmod(round(s / 60), 60)
    return f"{h} h {m:02d} min" if h else f"{m} min"

FORMATS = {  # FORMAT names in {{PATH#KEYS|FORMAT}}; anything else is a Python format spec
    "pct1": lambda v: f"{100 * v:.1f}",               # a fraction as percent, one decimal
    "pct0": lambda v: f"{100 * v:.0f}",
    "int": lambda v: f"{v:,.0f}".replace(",", " "),    # 8 060
    "min": lambda v: f"{round(v / 60)}",               # seconds as whole minutes
    "hm": _hm,                                         # seconds as "2 h 14 min" (or "53 min")
    "MB": lambda v: f"{v / 1e6:.0f}",
    "GB": lambda v: f"{v / 1e9:.1f}",
    "commit": lambda v: str(v)[:7],
    "date": lambda v: str(v)[:10]}                     # an ISO time stamp's date

VALUE = re.compile(r"\{\{\s*([^#{}|]+?)\s*#\s*([^{}|]+?)\s*(?:\|\s*([^{}]*?)\s*)?\}\}")

def _pick(rows, key):
    "The one element of a list of records whose fields match `[field=value,field=value]` (values compared as text)."
    want = dict(kv.split("=", 1) for kv in key[1:-1].split(","))
    hits = [r for r in rows if all(str(r.get(f.strip())) == v.strip() for f, v in want.items())]
    if len(hits) != 1: raise LookupError(f"{len(hits)} records match {key}, not one")
    return hits[0]

def value(m):
    "One {{PATH#KEYS|FORMAT}} replaced by its value; a missing file reads as not yet generated, a missing key stops the run."
    path, keys, fmt = root / m.group(1), m.group(2).split("/"), m.group(3) or ""
    if not path.exists(): return f"_({m.group(1)} has not been generated yet: run bin/reproduce)_"
    v = json.loads(path.read_text())
    for i, k in enumerate(keys):
        try: v = _pick(v, k) if k.startswith("[") else v[int(k)] if isinstance(v, list) else v[k]
        except (LookupError, ValueError, TypeError) as e:
            why = e.args[0] if type(e) is LookupError else "no such key"   # _pick says how many records matched
            sys.exit(f"make_readme: {m.group(0)}: {m.group(1)} has no key {k!r} at {'/'.join(keys[:i]) or 'the top'} ({why})")
    if fmt in FORMATS: return FORMATS[fmt](v)
    return format(v, fmt) if fmt else str(v)

def values(text): return VALUE.sub(value, text)

def render(nb):
    parts = []
    for cell in nb["cells"]:
        src = "".join(cell["source"]).rstrip()
        if cell["cell_type"] == "markdown": parts.append(include(values(src)))
        elif cell["cell_type"] == "code" and src and not src.startswith("#| hide"):
            parts.append(f"```python\n{src}\n```")
            outs = [o for o in cell.get("outputs", []) if o.get("output_type") == "stream"]
            text = "".join("".join(o["text"]) for o in outs).rstrip()
            if text: parts.append(f"```\n{text}\n```")
    return "\n\n".join(parts) + "\n"

PAGES = {"README.md": "nbs/index.ipynb", "docs/results.md": "nbs/results.ipynb"}   # page written: its notebook

def main(check=False): # only compare the pages with what they would be
    "Write every page of `PAGES` (or, with `check`, exit 1 naming those that are out of date)."
    stale = []
    for page, nb in PAGES.items():
        text, out = render(json.loads((root / nb).read_text())), root / page
        if check:
            if not out.exists() or out.read_text() != text: stale.append(f"{page} is out of date with {nb}")
        else:
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_text(text)
    if stale: sys.exit("; ".join(stale) + ": run `python tools/make_readme.py` and commit it")

if __name__ == "__main__": main("--check" in sys.argv)
