"""The triage report of a run: order, counts, filter and search, images only from the run folder; opened in a real
browser (headless Chromium, Debian's `chromium` package)."""
import json, re
from collections import Counter
from pathlib import Path
from urllib.parse import unquote
import numpy as np
import pytest
from PIL import Image
from speco3.spectrum import Spectrum
from speco3.agent import run, Sample
from speco3.policy import ReplayPolicy
from speco3.view import write_report, read_index, OUTCOMES, PER_PAGE, outcome
from browser import need_chromium as _need_chromium, chromium as _chromium
from view_records import fake_run, record

N = 300


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    d = tmp_path_factory.mktemp("run")
    w = np.linspace(3700, 9000, 3000)
    toy = Spectrum(w, 1 + 3 * np.exp(-0.5 * ((w - 6564.6) / 12) ** 2), meta={"id": "toy"})
    script = ['<think>zoom</think>\n<tool_call>{"name": "spectral_visualization_tool", "arguments": {"wavelength_range": [6480, 6650], "label": "Hα 6563 Å"}}</tool_call>',
              '<think>Broad Hα.</think>\n<answer>\\boxed{YES}</answer>']
    run([Sample(f"cv-{i}", "cv", toy, "YES") for i in range(3)], ReplayPolicy(script), d, progress=False)
    return write_report(d)


@pytest.fixture(scope="module")
def many(tmp_path_factory):
    "A hand-made run of N records of every outcome, plus two hostile ones pointing at a PNG outside the folder."
    top = tmp_path_factory.mktemp("many")
    secret = top / "secret.png"
    Image.new("RGB", (4, 4), "red").save(secret)
    d = top / "run"
    recs = fake_run(d, N)
    bad = [dict(record(N, "YES", "cv"), overview={"path": str(secret)}),
           dict(record(N + 1, "NO", "wd"), overview={"path": "../secret.png"})]
    (d / "images" / "link.png").symlink_to(secret)
    bad[1]["turns"][0]["results"][0]["image"] = {"path": "images/link.png"}
    with open(d / "trajectories.jsonl", "a") as f: f.writelines(json.dumps(r) + "\n" for r in bad)
    return d, recs + bad, write_report(d)


def _links(page):
    "Every src and href of a page, resolved against its folder (fragments and inline script aside)."
    return [(page.parent / unquote(u)).resolve() for u in re.findall(r'(?:src|href)="([^"#][^"]*)"', page.read_text())]


def test_order_counts_and_filters(many):
    d, recs, index = many
    page = index.read_text()
    shown = [r["outcome"] for r in read_index(index)]
    assert len(shown) == len(recs)
    assert shown == sorted(shown, key=OUTCOMES.index) and shown[0] == "YES" and shown[-1] == "failed"
    want = Counter(outcome(r) for r in recs)
    assert Counter(shown) == want and want["cannot judge"] > 0
    total = re.search(r"<tr><th>all</th>(.*?)</tr>", page).group(1)     # the summary's bottom row: one count per outcome
    assert [int(x) for x in re.findall(r">(\d+)<", total)] == [want[o] for o in OUTCOMES] + [len(recs)]
    assert 'id="q" type="search"' in page and '<select id="o"' in page and "S/N 3.1 is below the floor" in page
    assert "http://" not in page and "https://" not in page                # no network assets
    assert len(list((d / "report_files").glob("*.html"))) == len(recs)


def test_only_files_inside_the_run_folder(many):
    d, recs, index = many
    pages = list((d / "report_files").glob("*.html"))
    rows = read_index(index)
    links = [u for p in pages for u in _links(p)] + [(index.parent / unquote(r["page"])).resolve() for r in rows] \
        + [(index.parent / unquote(r["thumb"][0])).resolve() for r in rows if isinstance(r["thumb"], list)]
    assert links and all(u.is_relative_to(d.resolve()) for u in links), [u for u in links if not u.is_relative_to(d.resolve())]
    assert all(u.exists() for u in links)
    said = index.read_text() + "".join(p.read_text() for p in pages)
    assert said.count("lies outside the run folder; not shown") == 3 * 2 - 1  # row + page for each overview, the zoom's page


def test_max_samples_keeps_yes_first(many):
    d, recs, _ = many
    top = write_report(d, out=d / "top.html", max_samples=10)
    assert [r["outcome"] for r in read_index(top)] == ["YES"] * 10
    assert len(list((d / "top_files").glob("*.html"))) == 10
    assert f"Candidates (10 of {len(recs)} listed" in top.read_text()


def _with_script(index, js):
    "A copy of the index running `js` once the page's own script has run (what a person would type)."
    page = index.with_name("try.html")
    page.write_text(index.read_text().replace("</body>", f"<script>{js}</script></body>"))
    return page


def _drawn(dom):
    "The outcomes of the rows the page's script drew (in the DOM before the scripts, whose text holds the row template)."
    return re.findall(r'<tr data-o="([^"]+)" data-t="[^"]*">', dom.split('<script id="rows"')[0])


def test_filter_search_and_pages_in_chromium(many, tmp_path):
    _need_chromium()
    d, recs, index = many
    dom = _chromium(tmp_path, "--dump-dom", index.as_uri()).stdout
    n_pages = -(-len(recs) // PER_PAGE)
    assert _drawn(dom)[:3] == ["YES"] * 3 and len(_drawn(dom)) == PER_PAGE and f"page 1 of {n_pages}" in dom
    js = "o.value='cannot judge';o.dispatchEvent(new Event('input'));"
    dom = _chromium(tmp_path, "--dump-dom", _with_script(index, js).as_uri()).stdout
    n = Counter(map(outcome, recs))["cannot judge"]
    assert set(_drawn(dom)) == {"cannot judge"} and len(_drawn(dom)) == n and f'<span id="shown">{n}</span>' in dom
    js = "q.value='S00042';q.dispatchEvent(new Event('input'));"
    dom = _chromium(tmp_path, "--dump-dom", _with_script(index, js).as_uri()).stdout
    assert '<span id="shown">1</span>' in dom and len(_drawn(dom)) == 1 and ">s00042</a>" in dom
    js = "$('next').click();$('next').click();$('next').click();"
    dom = _chromium(tmp_path, "--dump-dom", _with_script(index, js).as_uri()).stdout
    assert f"page {n_pages} of {n_pages}" in dom and _drawn(dom)[-1] == "failed"
    assert len(_drawn(dom)) == len(recs) - (n_pages - 1) * PER_PAGE


def test_report_dom_in_chromium(report, tmp_path):
    _need_chromium()
    dom = _chromium(tmp_path, "--dump-dom", report.as_uri()).stdout.split('<script id="rows"')[0]
    assert dom.count("<tr data-o=") == 3 and dom.count("<img") == 3, dom[:500]   # a thumbnail per candidate
    assert "accuracy" in dom and "cv-2" in dom
    page = sorted(report.parent.joinpath("report_files").glob("*.html"))[0]
    dom = _chromium(tmp_path, "--dump-dom", page.as_uri()).stdout
    assert dom.count("<img") == 2 and "<figcaption>Hα 6563 Å · λ 6480–6650 Å</figcaption>" in dom


def _blue(tmp_path, page, name):
    "Pixels of the spec-o3 plot line colour (pure blue at 80 %: 51, 51, 255) in a screenshot of `page`."
    shot = tmp_path / name
    _chromium(tmp_path, f"--screenshot={shot}", "--window-size=1200,2400", page.as_uri())
    assert shot.exists(), "chromium wrote no screenshot"
    px = np.asarray(Image.open(shot).convert("RGB")).astype(int)
    return ((px[..., 0] < 130) & (px[..., 1] < 130) & (px[..., 2] > 200)).sum()


def test_report_renders_images_in_chromium(report, tmp_path):
    _need_chromium()
    page = sorted(report.parent.joinpath("report_files").glob("*.html"))[0]
    bare = page.with_name("bare.html")
    bare.write_text(re.sub(r"<img [^>]*>", "", page.read_text()))
    # the plot lines add pixels of that colour only if the linked images were loaded and drawn (nothing else on the page is that blue)
    extra = _blue(tmp_path, page, "shot.png") - _blue(tmp_path, bare, "bare.png")
    assert extra > 300, f"only {extra} plot-line pixels from the images"
