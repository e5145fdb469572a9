"""Move the drafted README and results-page sections of `docs/student_loop.md` into their notebooks, once a complete
`bin/reproduce cpu` has written the files they read.

    .venv/bin/python tools/place_drafts.py [--check]

The draft holds three parts: two README sections ("Triage on real spectra", "Models that ship, and the student
loop"), placed in `nbs/index.ipynb` just before "## Read on" (the end of "Results in brief"), and one results-page
section (the line after `<!-- For nbs/results.ipynb ... -->` to the end), placed in `nbs/results.ipynb` right after
the `<!-- include: results/real_mix/real_mix.md -->` line. Its `{{PATH#KEYS}}` values name the scripted expert by
its version; the draft's name is replaced by `speco3.expert.VERSION`'s. It refuses, changing nothing, while a file
the sections read is missing or comes from another commit than `results/reproduce.json`'s, or when a section is
already in place. Afterwards: delete `docs/student_loop.md` and this script, `nbdev_clean`, `python
tools/make_readme.py`, and read the README for a value that did not fill.
"""
import argparse, json, re, sys
from pathlib import Path
import nbformat

ROOT = Path(__file__).resolve().parents[1]
DRAFT = ROOT / "docs" / "student_loop.md"
NEEDS = ["models/README.md", "models/gaianet-like/card.json", "models/miniature-sft-grpo/card.json",
         "results/real_mix/summary.json", "results/real_mix/test_half.md", "results/real_mix/triage.md",
         "results/grpo/summary.json"]
RESULTS_MARK = "<!-- For nbs/results.ipynb"
INCLUDE = "<!-- include: results/real_mix/real_mix.md -->"


def fail(msg): sys.exit(f"place_drafts: {msg}; nothing changed")


def parts():
    "(README sections, results-page section) of the draft, the expert's name made current."
    from speco3.expert import VERSION
    text = DRAFT.read_text()
    text = re.sub(r"Scripted expert v\d+", f"Scripted expert v{VERSION}", text)
    body = text.split("\n", 1)[1].strip("\n") if text.startswith("<!--") else text   # the first line says what the file is
    if RESULTS_MARK not in body: fail(f"{DRAFT.name} has no '{RESULTS_MARK} ...' line")
    readme, results = body.split(RESULTS_MARK, 1)
    return readme.strip("\n"), results.split("\n", 1)[1].strip("\n")


def check_run():
    "Every file the sections read exists; the results' run records name the commit of results/reproduce.json."
    missing = [p for p in NEEDS if not (ROOT / p).exists()]
    if missing: fail(f"missing {', '.join(missing)} (run bin/reproduce cpu first)")
    commit = json.loads((ROOT / "results/reproduce.json").read_text()).get("git_commit")
    for target in ("real_mix", "grpo", "baselines"):
        got = json.loads((ROOT / "results" / target / "run.json").read_text()).get("git_commit")
        if got != commit: fail(f"results/{target}/run.json is from {got}, results/reproduce.json from {commit}")


def place(check=False):
    readme, results = parts()
    check_run()
    index, page = ROOT / "nbs/index.ipynb", ROOT / "nbs/results.ipynb"
    nb, rp = nbformat.read(index, 4), nbformat.read(page, 4)
    head = readme.splitlines()[0]
    if any(head in c.source for c in nb.cells): fail(f"'{head}' is already in {index.name}")
    brief = [c for c in nb.cells if "## Results in brief" in c.source and "## Read on" in c.source]
    if len(brief) != 1: fail(f"{index.name}: no single cell holding '## Results in brief' and '## Read on'")
    src = brief[0].source
    at = src.index("## Read on")
    inc = [c for c in rp.cells if INCLUDE in c.source]
    if len(inc) != 1: fail(f"{page.name}: no single cell holding '{INCLUDE}'")
    if results.splitlines()[0] in inc[0].source: fail(f"the results-page section is already in {page.name}")
    if check: print("place_drafts: ready (nothing changed: --check)"); return
    brief[0].source = src[:at] + readme + "\n\n" + src[at:]
    inc[0].source = inc[0].source.replace(INCLUDE, INCLUDE + "\n\n" + results, 1)
    nbformat.write(nb, index); nbformat.write(rp, page)
    print(f"place_drafts: {len(readme.splitlines())} lines into {index.name}, {len(results.splitlines())} into {page.name}")


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--check", action="store_true", help="only say whether the sections can be placed")
    place(p.parse_args().check)
