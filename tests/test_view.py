"""The HTML report of a run opens and renders in a real browser (headless Chromium, Debian's `chromium` package)."""
from pathlib import Path
import numpy as np
import pytest
from PIL import Image
from speco3.spectrum import Spectrum
from speco3.agent import run, Sample
from speco3.policy import ReplayPolicy
from speco3.view import write_report
from browser import need_chromium as _need_chromium, chromium as _chromium

@pytest.fixture(scope="module")
def report(tmp_path_factory):
    d = tmp_path_factory.mktemp("run")
    w = np.linspace(3700, 9000, 3000)
    toy = Spectrum(w, 1 + 3 * np.exp(-0.5 * ((w - 6564.6) / 12) ** 2), meta={"id": "toy"})
    script = ['<think>zoom</think>\n<tool_call>{"name": "spectral_visualization_tool", "arguments": {"wavelength_range": [6480, 6650]}}</tool_call>',
              '<think>Broad Hα.</think>\n<answer>\\boxed{YES}</answer>']
    run([Sample(f"cv-{i}", "cv", toy, "YES") for i in range(3)], ReplayPolicy(script), d, progress=False)
    return write_report(d)

def test_report_dom_in_chromium(report, tmp_path):
    _need_chromium()
    # open every <details> so the browser lays out the images too, then dump the DOM the browser built
    dom = _chromium(tmp_path, "--dump-dom", report.as_uri()).stdout
    assert dom.count("<details") == 3 and dom.count("<img") == 6, dom[:500]
    assert "accuracy" in dom and "cv-2" in dom

def test_report_renders_images_in_chromium(report, tmp_path):
    _need_chromium()
    opened = report.with_name("open.html")
    opened.write_text(report.read_text().replace("<details>", "<details open>"))
    shot = tmp_path / "shot.png"
    _chromium(tmp_path, f"--screenshot={shot}", "--window-size=1200,2400", opened.as_uri())
    assert shot.exists(), "chromium wrote no screenshot"
    px = np.asarray(Image.open(shot).convert("RGB")).astype(int)
    # the spec-o3 plot line colour (#1f4e9c) appears only if the embedded images were decoded and drawn
    blue = (abs(px[..., 0] - 0x1f) < 40) & (abs(px[..., 1] - 0x4e) < 40) & (abs(px[..., 2] - 0x9c) < 40)
    assert blue.sum() > 500, f"only {blue.sum()} plot-line pixels in the screenshot"
