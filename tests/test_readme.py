"""The README's Python snippets run as written, from a folder laid out like a clone (its `data/` beside them)."""
import csv, os, re, subprocess, sys
from pathlib import Path
import pytest

ROOT = Path(__file__).resolve().parents[1]


def snippets() -> list[str]:
    return re.findall(r"```python\n(.*?)```", (ROOT / "README.md").read_text(encoding="utf-8"), flags=re.S)


def test_readme_has_a_first_look():
    assert any("read_spectrum(" in s and "execute(" in s for s in snippets())


def test_readme_snippets_run_as_written(tmp_path):
    (tmp_path / "data").symlink_to(ROOT / "data")   # the repository's data, without writing into the checkout
    for i, code in enumerate(snippets()):
        r = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=120,
                           env={**os.environ, "MPLBACKEND": "Agg"})
        assert r.returncode == 0, f"README snippet {i} failed:\n{code}\n{r.stderr[-2000:]}"
    assert "6480" in r.stdout and (tmp_path / "halpha.png").stat().st_size > 1000


def test_an_included_csv_becomes_a_table(tmp_path, monkeypatch):
    sys.path.insert(0, str(ROOT / "tools"))
    import make_readme
    monkeypatch.setattr(make_readme, "root", tmp_path)
    (tmp_path / "t.csv").write_text('claim,diff\n"a, b",1.5\nc,-2\n')
    (tmp_path / "t.md").write_text("| x |\n")
    got = make_readme.include("before\n<!-- include: t.csv -->\n<!-- include: t.md -->\n<!-- include: gone.csv -->")
    assert got.splitlines()[:5] == ["before", "| claim | diff |", "| --- | --- |", "| a, b | 1.5 |", "| c | -2 |"]
    assert "| x |" in got and "gone.csv has not been generated yet" in got


def test_a_value_is_read_from_its_json(tmp_path, monkeypatch):
    sys.path.insert(0, str(ROOT / "tools"))
    import make_readme
    monkeypatch.setattr(make_readme, "root", tmp_path)
    (tmp_path / "r.json").write_text('{"wall_s": {"04_sft.ipynb": 8060.2}, "f1": [0.3661, 0.4], "git_commit": "9fe57bbbfcb7"}')
    got = make_readme.values("took {{r.json#wall_s/04_sft.ipynb|hm}} ({{ r.json # wall_s/04_sft.ipynb | int }} s), "
                             "F1 {{r.json#f1/0|pct1}}, at {{r.json#git_commit|commit}}, {{r.json#f1/1|.2f}}, {{gone.json#a}}")
    assert got == "took 2 h 14 min (8 060 s), F1 36.6, at 9fe57bb, 0.40, _(gone.json has not been generated yet: run bin/reproduce)_"
    with pytest.raises(SystemExit, match="no key 'f2'"): make_readme.values("{{r.json#f2}}")
    assert make_readme.values("{{ not a value }} {x}") == "{{ not a value }} {x}"
    (tmp_path / "t.json").write_text('{"rows": [{"policy": "a b", "task": "cv", "n": 3}, {"policy": "a b", "task": "wd", "n": 5}]}')
    assert make_readme.values("{{t.json#rows/[policy=a b,task=wd]/n}}") == "5"
    with pytest.raises(SystemExit, match="2 records match"): make_readme.values("{{t.json#rows/[policy=a b]/n}}")
    with pytest.raises(SystemExit, match="0 records match"): make_readme.values("{{t.json#rows/[task=gm]/n}}")


def _block_with(text: str, needle: str, lang: str = "bash") -> str:
    "The first fenced block of `lang` in `text` with a line that starts with `needle`."
    blocks = re.findall(rf"```{lang}\n(.*?)```", text, flags=re.S)
    blocks = [b for b in blocks if re.search(rf"^{re.escape(needle)}", b, re.M)]
    assert blocks, f"no ```{lang} block with a line starting {needle!r}"
    return blocks[0]


def test_first_screen_has_install_commands_vetting_and_task_keys():
    from speco3.tasks import PAPER_TASKS, OOD_TASKS
    head = "\n".join((ROOT / "README.md").read_text(encoding="utf-8").splitlines()[:60])
    assert "pip install -e .  " in head and 'pip install -e ".[train]"' in head
    commands = _block_with(head, "bin/test")
    assert re.search(r"^bin/reproduce\s", commands, re.M) and re.search(r"^bin/test\s", commands, re.M), commands
    assert re.search(r"^speco3 vet \S+.*--task \w+", _block_with(head, "speco3 vet"), re.M)
    missing = [k for k in PAPER_TASKS + OOD_TASKS if f"`{k}`" not in head]
    assert not missing, f"task keys not on the README's first 60 lines: {missing}"


def test_ci_runs_the_readmes_test_command():
    test_line = [l for l in _block_with((ROOT / "README.md").read_text(encoding="utf-8"), "bin/test").splitlines()
                 if l.startswith("bin/test")][0]
    command = test_line.split("#")[0].strip()
    assert f"exec {command}" in (ROOT / ".ci" / "run").read_text().splitlines()[-1]
    assert all(os.access(ROOT / "bin" / n, os.X_OK) for n in ("test", "reproduce"))


def test_the_vet_example_finds_what_the_readme_says(tmp_path):
    "Run the README's `speco3 vet` line as written; its counts and its YES are those the README shows."
    import glob, shlex
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    line = [l for l in _block_with(readme, "speco3 vet").splitlines() if l.startswith("speco3 vet")][0]
    (tmp_path / "data").symlink_to(ROOT / "data")
    args = []
    for a in shlex.split(line.split("#")[0])[2:]:   # the shell's glob, from a folder laid out like a clone
        args += sorted(glob.glob(a, root_dir=tmp_path)) if "*" in a else [a]
    assert len(args) > 4, args
    cli = "import sys; from speco3.cli import main; sys.exit(main())"
    r = subprocess.run([sys.executable, "-c", cli, "vet", *args, "--quiet"], cwd=tmp_path, capture_output=True,
                       text=True, timeout=300, env={**os.environ, "MPLBACKEND": "Agg"})
    assert r.returncode == 0, r.stderr[-2000:]
    shown = re.search(r"^(vetted \d+ of .*)$", readme, re.M).group(1)
    counts = lambda s: re.search(r"vetted (\d+) of (\d+): (\d+) YES, (\d+) NO(?:, (\d+) cannot judge)?", s).groups()
    assert counts(r.stdout) == counts(shown), (r.stdout, shown)
    yes = re.search(r"The YES is `([^`]+)`", readme).group(1)
    out = tmp_path / args[args.index("--out") + 1]
    rows = list(csv.DictReader((out / "predictions.csv").open()))
    assert [x["sample_id"] for x in rows if x["prediction"] == "YES"] == [yes], rows


def test_the_results_page_is_linked_and_keeps_the_runs_and_costs():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    page = (ROOT / "docs" / "results.md").read_text(encoding="utf-8")
    assert "](docs/results.md)" in readme and "](docs/scaling.md)" in readme and "results/notebooks/" in readme
    for moved in ("What a run costs", "On one GPU", "results/reproduce.json", "An author's run"):
        assert moved in page and moved not in readme.replace("An author's run.**", ""), moved
    nb = (ROOT / "nbs" / "results.ipynb").read_text(encoding="utf-8")
    assert all(f"<!-- include: results/gpu_bench/gpu_{k}.txt -->" in nb for k in ("vet", "sft", "grpo"))
