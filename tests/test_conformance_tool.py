"""The Spec-o3 tool path answers like the authors' released tool, case by case.

tests/conformance/tool/ holds input -> output facts recorded from the authors' code (see
tests/conformance/meta.json for the commit and the plotting stack that drew the PNGs): a spectrum, the call's
parameters, and the text, success, step reward and image their `spectral_visualization_tool` returned.
Every case is run through `SpectralVisualizationTool` built from create_kwargs {wavelength, flux, redshift},
as verl builds it, with the defaults (style "spec-o3", errors "spec-o3").

Images: same size always; pixel for pixel when matplotlib, Pillow, FreeType and numpy are the versions of
meta.json, else at least 95 % of pixels equal (other versions move anti-aliasing and glyph hinting).
"""
import json
from functools import lru_cache
from pathlib import Path

import matplotlib
import numpy as np
import PIL
import pytest
from matplotlib import ft2font
from PIL import Image

from speco3.tool import SpectralVisualizationTool, ERROR_REWARD

HERE = Path(__file__).resolve().parent / "conformance"
CASES = [json.loads(line) for line in (HERE / "tool" / "cases.jsonl").read_text().splitlines() if line.strip()]
META = json.loads((HERE / "meta.json").read_text())
SAME_STACK = (matplotlib.__version__, PIL.__version__, ft2font.__freetype_version__, np.__version__) == \
             (META["matplotlib"], META["pillow"], META["freetype"], META["numpy"])
MIN_EQUAL = 0.95  # share of equal pixels required on another plotting stack


@lru_cache(maxsize=None)
def spectra():
    return json.loads((HERE / "tool" / "spectra.json").read_text())


@lru_cache(maxsize=None)
def tool(spectrum_id):
    "One tool per spectrum, as verl creates it from a row's create_kwargs."
    s = spectra()[spectrum_id]
    return SpectralVisualizationTool.from_create_kwargs(
        {"wavelength": s["wavelength"], "flux": s["flux"], "redshift": s["redshift"]})


def equal_share(a, b):
    "Share of pixels of two same-size RGB images that are equal."
    return float(np.all(np.asarray(a) == np.asarray(b), axis=-1).mean())


def test_the_cases_are_all_here():
    assert len(CASES) == META["tool_cases"]["shared"]
    assert all((HERE / "tool" / "png" / c["png"]).exists() for c in CASES if c["success"])


@pytest.mark.parametrize("case", CASES, ids=[c["case"] for c in CASES])
def test_case(case):
    res = tool(case["spectrum"]).execute(**case["parameters"])
    assert res.ok == case["success"]
    assert res.text == case["text"]
    assert res.reward == case["tool_reward"]
    if not case["success"]:
        assert res.image is None
        return
    want = Image.open(HERE / "tool" / "png" / case["png"]).convert("RGB")
    assert list(res.image.size) == case["size"] == list(want.size)
    if SAME_STACK: assert res.image.tobytes() == want.tobytes()
    else: assert equal_share(res.image, want) >= MIN_EQUAL


def test_rewards_are_the_authors():
    assert {c["tool_reward"] for c in CASES if not c["success"]} == {ERROR_REWARD}
    assert {c["tool_reward"] for c in CASES if c["success"]} == {0.0}
