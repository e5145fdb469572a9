"""tools/build_book makes a browsable book: an index, one page per notebook, and pages that render in a real browser
(headless Chromium) with every image loaded and nothing on the console."""
import base64, html, io, json, re, subprocess, sys
from pathlib import Path
import nbformat
import pytest
from PIL import Image
from browser import need_chromium, chromium

ROOT = Path(__file__).resolve().parent.parent
PROBE = """<script>
window.__errors = [];
addEventListener("error", e => __errors.push(e.target && e.target !== window ? "failed to load " + (e.target.src || e.target.href) : String(e.message)), true);
addEventListener("load", () => {
  const imgs = [...document.images], p = document.createElement("pre");
  p.id = "probe";
  p.textContent = JSON.stringify({images: imgs.length, unloaded: imgs.filter(i => !(i.complete && i.naturalWidth > 0)).map(i => i.src.slice(0, 60)),
                                  errors: __errors, title: document.title, chars: document.body.innerText.length});
  document.body.appendChild(p);
});
</script>"""

def _png(color):
    buf = io.BytesIO(); Image.new("RGB", (40, 30), color).save(buf, format="PNG")
    return buf.getvalue()

def _toy_chapter(d):
    "A chapter with what a run leaves in a notebook: a figure output, a table, a Markdown image beside it."
    (d / "diagram.png").write_bytes(_png("red"))
    nb = nbformat.v4.new_notebook(metadata={"kernelspec": {"display_name": "python3", "language": "python", "name": "python3"}})
    nb.cells = [nbformat.v4.new_markdown_cell("# A toy chapter\n> With a figure.\n\n![diagram](diagram.png)"),
                nbformat.v4.new_code_cell("plt.plot([1, 2])", outputs=[nbformat.v4.new_output(
                    "display_data", data={"image/png": base64.b64encode(_png("blue")).decode(), "text/plain": "<Figure>"})]),
                nbformat.v4.new_code_cell("df", outputs=[nbformat.v4.new_output(
                    "execute_result", data={"text/html": "<table><tr><td>1</td></tr></table>", "text/plain": "1"}, execution_count=1)])]
    path = d / "05_toy.ipynb"
    nbformat.write(nb, path)
    return path

@pytest.fixture(scope="module")
def book(tmp_path_factory):
    src, out = tmp_path_factory.mktemp("nbs"), tmp_path_factory.mktemp("book")
    only = [_toy_chapter(src), ROOT / "nbs" / "00_spectrum.ipynb", ROOT / "nbs" / "paper" / "02_main_results.ipynb"]
    subprocess.run([sys.executable, str(ROOT / "tools" / "build_book"), str(out), "--only", *map(str, only)], check=True, timeout=120)
    return out

def test_index_lists_the_notebooks_by_title(book):
    index = (book / "index.html").read_text()
    links = re.findall(r'<a href="([^"]+)">([^<]+)</a>', index)
    assert [h for h, _ in links] == ["05_toy.html", "00_spectrum.html", "paper_02_main_results.html"], links
    assert links[0][1] == "A toy chapter" and "Spectrum" in links[1][1], links
    assert "<h2>Paper</h2>" in index
    assert all((book / h).exists() for h, _ in links)

def test_pages_need_no_network(book):
    for page in book.glob("*.html"):
        assert not re.search(r'(src|href)="(https?:)?//', page.read_text()), f"{page.name} fetches something from the network"

def _probe(page, tmp_path):
    "Open a copy of `page` with a probe script in headless Chromium; (what the probe saw, the console lines)."
    probed = page.with_name("probe-" + page.name)
    probed.write_text(page.read_text().replace("<head>", "<head>" + PROBE, 1))
    res = chromium(tmp_path, "--enable-logging=stderr", "--v=0", "--virtual-time-budget=5000", "--dump-dom", probed.as_uri())
    probed.unlink()
    m = re.search(r'<pre id="probe">(.*?)</pre>', res.stdout, re.S)
    assert m, f"{page.name}: the page did not finish loading in chromium\n{res.stderr[-2000:]}"
    return json.loads(html.unescape(m.group(1))), [l for l in res.stderr.splitlines() if ":CONSOLE" in l]

def test_pages_render_in_chromium(book, tmp_path):
    need_chromium()
    for page in sorted(book.glob("*.html")):
        seen, console = _probe(page, tmp_path)
        assert seen["chars"] > 50 and not seen["unloaded"] and not seen["errors"], (page.name, seen)
        assert not console, (page.name, console)
        if page.name == "05_toy.html": assert seen["images"] == 2 and seen["title"] == "A toy chapter", seen

def _build_book_module():
    import importlib.machinery, importlib.util
    loader = importlib.machinery.SourceFileLoader("build_book", str(ROOT / "tools" / "build_book"))
    mod = importlib.util.module_from_spec(importlib.util.spec_from_loader("build_book", loader))
    loader.exec_module(mod)
    return mod

def test_a_page_shows_tables_as_tables_and_leaves_stderr_out():
    bb = _build_book_module()
    new = nbformat.v4
    printed = "A title\n| a | b |\n| --- | --- |\n| 1 | 2 |\nafter\n"
    outputs = [new.new_output("stream", name="stderr", text="Loading weights: 100%|███| 56/56\n"),
               new.new_output("stream", name="stdout", text=printed),
               new.new_output("stream", name="stdout", text="x | y is not a table\n")]
    nb = new.new_notebook(cells=[new.new_markdown_cell("Main table:\n<!-- include: results/main/main_table.md -->"),
                                 new.new_code_cell("run()", outputs=outputs)])
    cell_md, cell = bb.prepare(nb).cells
    assert "include:" not in cell_md.source and "| Scripted expert |" in cell_md.source
    kinds = [(o.output_type, o.get("name"), o.get("text") or o.data["text/markdown"]) for o in cell.outputs]
    assert kinds == [("stream", "stdout", "A title\n"), ("display_data", None, "| a | b |\n| --- | --- |\n| 1 | 2 |\n"),
                     ("stream", "stdout", "after\n"), ("stream", "stdout", "x | y is not a table\n")], kinds

def test_the_readme_and_results_pages_are_in_the_book(tmp_path):
    bb = _build_book_module()
    assert [p.name for _, p in bb.default_notebooks()[:2]] == ["index.ipynb", "results.ipynb"]
    pages = bb.build(tmp_path, [("Chapters", ROOT / "nbs" / n) for n in ("index.ipynb", "results.ipynb")])
    assert [p.name for p in pages] == ["index.html", "readme.html", "results.html"]
    readme, results = (tmp_path / "readme.html").read_text(), (tmp_path / "results.html").read_text()
    assert 'href="results.html"' in readme and 'href="readme.html"' in results and "Contents" in readme
    assert readme.count("<table") >= 2 and results.count("<table") >= 10 and "include:" not in results
