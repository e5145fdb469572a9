"""The README's Python snippets run as written, from a folder laid out like a clone (its `data/` beside them)."""
import os, re, subprocess, sys
from pathlib import Path

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
