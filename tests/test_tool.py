"""The spectral visualization tool (speco3.tool, from nbs/03_tool.ipynb): every invalid call gives an error result
and never raises, valid calls give the exact text and an image of the expected size, windows are rest-frame."""
import json, math, random
import numpy as np
import pytest
from PIL import Image

import speco3.tool as tool_mod
from speco3.spectrum import Spectrum, SpectrumError, lamost_wavelength
from speco3.tool import (SpectralVisualizationTool, ToolResult, TOOL_SCHEMA, TOOL_NAME, MIN_POINTS, MAX_LABEL,
                         MAX_WAVELENGTH)
from speco3.render import STYLES

Z = 0.3
LINE_REST = 6564.61  # Hα, vacuum Å


def lamost_like(z=Z, gaps=True):
    "A LAMOST-grid spectrum: sloped continuum, one narrow emission line at Hα(1+z), optionally NaN gaps."
    w = lamost_wavelength()
    flux = 1 + 1e-4 * (w - 6000) + 5 * np.exp(-0.5 * ((w - LINE_REST * (1 + z)) / 3.0) ** 2)
    if gaps: flux[1000:1040] = np.nan  # a run of bad pixels, as at a LAMOST arm join
    return w, flux


@pytest.fixture(scope="module")
def tool():
    w, f = lamost_like()
    return SpectralVisualizationTool(w, f, redshift=Z, meta={"source": "synthetic", "id": "syn-1"}, errors="speco3")


@pytest.fixture
def fake_render(monkeypatch):
    "Replace the renderer by a recorder: tests of the validation logic need not wait for matplotlib."
    seen = []
    def fake(spectrum, window=None, style="spec-o3", title=None):
        seen.append(dict(spectrum=spectrum, window=window, style=style, title=title))
        return Image.new("RGB", (10, 10), "white")
    monkeypatch.setattr(tool_mod, "render", fake)
    return seen


# --- the contract ------------------------------------------------------------------------------------------------

def test_schema_shape():
    f = TOOL_SCHEMA["function"]
    assert TOOL_SCHEMA["type"] == "function" and f["name"] == TOOL_NAME == "spectral_visualization_tool"
    p = f["parameters"]
    assert p["required"] == ["wavelength_range"] and set(p["properties"]) == {"wavelength_range", "label"}
    wr = p["properties"]["wavelength_range"]
    assert (wr["type"], wr["items"], wr["minItems"], wr["maxItems"]) == ("array", {"type": "number"}, 2, 2)
    assert p["properties"]["label"]["type"] == "string"
    assert SpectralVisualizationTool.schema is TOOL_SCHEMA and SpectralVisualizationTool.name == TOOL_NAME


def test_style_version_recorded(tool):
    assert tool.style == "spec-o3" and tool.style_version == STYLES["spec-o3"]


def test_unknown_style_raises_at_construction():
    w, f = lamost_like()
    with pytest.raises(SpectrumError, match="style"): SpectralVisualizationTool(w, f, style="comic-sans")


@pytest.mark.parametrize("z", [float("nan"), float("inf"), -1.0, -2.0, "abc"])
def test_bad_redshift_raises_spectrum_error(z):
    w, f = lamost_like()
    with pytest.raises(SpectrumError): SpectralVisualizationTool(w, f, redshift=z)


def test_constructors_agree(tool):
    w, f = lamost_like()
    s = Spectrum(w, f, redshift=Z, meta={"id": "syn-1"})
    a = SpectralVisualizationTool.from_spectrum(s)
    b = SpectralVisualizationTool.from_create_kwargs({"wavelength": w.tolist(), "flux": f.tolist(), "redshift": Z})
    assert a.data_range == b.data_range == tool.data_range
    assert a.spectrum.meta["id"] == "syn-1" and b.spectrum.meta["source"] == "create_kwargs"
    c = SpectralVisualizationTool.from_create_kwargs({"wavelength": w, "flux": f, "redshift": None})
    assert c.spectrum.redshift == 0.0  # a missing redshift means the spectrum is already at rest


@pytest.mark.parametrize("ck", [{"flux": [1, 2, 3]}, {"wavelength": [1, 2, 3]}, {}, None])
def test_create_kwargs_missing_keys_raise(ck):
    with pytest.raises(SpectrumError, match="create_kwargs: missing"): SpectralVisualizationTool.from_create_kwargs(ck)


def test_create_kwargs_accept_the_authors_keys():
    "A published SpecVI-Bench row may carry keys the authors' tool takes (e.g. title): accepted, kept in meta, unused."
    w, f = lamost_like()
    ck = {"wavelength": w.tolist(), "flux": f.tolist(), "redshift": Z}
    a = SpectralVisualizationTool.from_create_kwargs(ck)
    b = SpectralVisualizationTool.from_create_kwargs({**ck, "title": "LAMOST dM1", "z": 0.1})
    assert b.spectrum.meta["create_kwargs"] == {"title": "LAMOST dM1", "z": 0.1} and b.spectrum.redshift == Z
    ra, rb = a.execute([6480, 6650]), b.execute([6480, 6650])
    assert ra.text == rb.text and ra.image.tobytes() == rb.image.tobytes()


# --- valid calls -------------------------------------------------------------------------------------------------

def _nominal_width(inches): return 80 * inches  # render style spec-o3: 80 dpi, tight bounding box


@pytest.mark.parametrize("args,inches", [({}, 10), ({"wavelength_range": [6540, 6580]}, 6 * 0.95),  # < 50 points: 5 % narrower
                                         ({"wavelength_range": [6480, 6650]}, 7), ({"wavelength_range": [6000, 6900]}, 8),
                                         ({"wavelength_range": [4000, 6500]}, 9)])
def test_valid_call_image_size_class(tool, args, inches):
    r = tool.call(args)
    assert r.ok and r.error is None and isinstance(r.image, Image.Image) and r.image.mode == "RGB"
    assert abs(r.image.width - _nominal_width(inches)) <= 0.06 * _nominal_width(inches), r.image.size
    assert r.image.height < r.image.width


def test_exact_text_with_label(tool):
    r = tool.call('{"wavelength_range": [6480, 6650], "label": "H-alpha"}')
    assert r.text == "Generated spectral visualization focused on wavelength range [6480, 6650] Å for H-alpha."
    assert (r.window, r.clipped) == ((6480.0, 6650.0), False)


def test_exact_text_without_label(tool, fake_render):
    r = tool.execute([6562.5, 6600])
    assert r.text == "Generated spectral visualization focused on wavelength range [6562.5, 6600] Å for the requested region."
    assert fake_render[-1]["title"] is None  # the renderer's own default title


def test_full_view(tool, fake_render):
    lo, hi = tool.data_range
    w, f = lamost_like()
    assert math.isclose(lo, w[0] / (1 + Z)) and math.isclose(hi, w[-1] / (1 + Z))
    for r in (tool.execute(), tool.call(None), tool.call(""), tool.call({}), tool.call("{}"),
              tool.call({"wavelength_range": None}), tool.call({"name": TOOL_NAME, "arguments": {}})):
        assert r.ok and r.window == (lo, hi)
        assert r.text == f"Generated spectral visualization focused on wavelength range [{lo:g}, {hi:g}] Å for the full spectrum."
        assert r.n_points == int(np.isfinite(f).sum())
    assert all(c["window"] is None for c in fake_render)  # full view: the renderer draws everything


def test_rest_frame_conversion(tool, fake_render):
    "The line sits at Hα(1+z) observed; asking for Hα in the rest frame must give a window that contains it."
    r = tool.execute([6540, 6590], label="H-alpha")
    assert r.ok
    call = fake_render[-1]
    s, (a, b) = call["spectrum"], call["window"]
    assert (a, b) == (6540.0, 6590.0) and call["title"] is None   # spec-o3 pictures keep the authors' title
    sel = (s.wavelength >= a) & (s.wavelength <= b)
    peak = s.wavelength[sel][np.nanargmax(s.flux[sel])]
    assert abs(peak - LINE_REST) < 1.0  # within one LAMOST pixel (~1.5 Å rest here)
    # the observed-frame position is not in the rest-frame data at all
    r = tool.execute([LINE_REST * (1 + Z) - 25, LINE_REST * (1 + Z) + 25])
    assert not r.ok and r.error == "outside"


def test_rest_frame_image_differs_on_and_off_line(tool):
    "With the real renderer: a window on the line is drawn differently from a line-free window of the same width."
    on, off = tool.execute([6540, 6590]), tool.execute([6240, 6290])
    assert on.ok and off.ok and on.image.size == off.image.size
    assert np.abs(np.asarray(on.image, int) - np.asarray(off.image, int)).sum() > 0


def test_clipping(tool, fake_render):
    lo, hi = tool.data_range
    r = tool.call({"wavelength_range": [2000, 3000], "label": "blue end"})
    assert r.ok and r.clipped and r.window == (lo, 3000.0)
    assert r.text.startswith(f"Generated spectral visualization focused on wavelength range [{lo:g}, 3000] Å for blue end.")
    assert "clipped" in r.text and f"{hi:g}" in r.text
    r = tool.call({"wavelength_range": [6900, 1e5]})
    assert r.ok and r.clipped and r.window == (6900.0, hi)
    r = tool.call({"wavelength_range": [0, 1e6]})  # zero and the largest allowed bound: the whole spectrum, clipped
    assert r.ok and r.window == (lo, hi)


def test_nan_gap_spectrum(tool, fake_render):
    w, f = lamost_like()
    gap = w[1000:1040] / (1 + Z)
    r = tool.execute([gap[5], gap[-5]])  # entirely inside the NaN run
    assert not r.ok and r.error == "few_points" and "0 finite" in r.text
    r = tool.execute([gap[0] - 20, gap[-1] + 20])  # across it: drawn, gap not counted
    assert r.ok and r.n_points == int(np.isfinite(f[(w / (1 + Z) >= gap[0] - 20) & (w / (1 + Z) <= gap[-1] + 20)]).sum())


def test_nan_at_the_ends_sets_the_coverage(fake_render):
    w, f = lamost_like(z=0.0, gaps=False)
    f[:50] = np.nan; f[-70:] = np.inf
    t = SpectralVisualizationTool(w, f, errors="speco3")
    assert t.data_range == (w[50], w[-71])
    r = t.execute([3000, 3800])
    assert r.ok and r.clipped and r.window[0] == w[50]


def test_label_cleaning(tool, fake_render):
    r = tool.execute([6500, 6600], label="  Na I\n doublet\t")
    assert r.ok and r.text.endswith("for Na I doublet.") and fake_render[-1]["title"] is None
    r = tool.execute([6500, 6600], label="x" * 1000)
    assert r.ok and r.text.endswith("for " + "x" * (MAX_LABEL - 1) + "….")
    r = tool.execute([6500, 6600], label="   ")
    assert r.ok and r.text.endswith("for the requested region.")


def test_dollar_label_drawn_literally(tool):
    "A label that matplotlib would parse as broken mathtext still renders (titles are not mathtext)."
    r = tool.execute([6500, 6600], label=r"$\notacommand{ H$alpha")
    assert r.ok and r.image is not None and r.text.endswith(r"for $\notacommand{ H$alpha.")


def test_numpy_inputs(tool, fake_render):
    r = tool.execute(np.array([6500, 6600]), label="np")
    assert r.ok and r.window == (6500.0, 6600.0)
    r = tool.execute((np.float32(6500), np.int64(6600)))
    assert r.ok and r.window == (6500.0, 6600.0)


def test_call_log(fake_render):
    w, f = lamost_like()
    t = SpectralVisualizationTool(w, f, redshift=Z, errors="speco3")
    t.call({"wavelength_range": [6500, 6600]}); t.call("nope"); t.execute()
    assert [c["ok"] for c in t.calls] == [True, False, True]
    assert [c["error"] for c in t.calls] == [None, "json", None]
    assert t.calls[0]["window"] == [6500.0, 6600.0] and t.calls[1]["window"] is None
    assert all(c["ms"] >= 0 for c in t.calls)
    json.dumps(t.calls)  # trajectories store it as JSON
    assert "3 calls" in repr(t)


# --- the invalid-call matrix -------------------------------------------------------------------------------------

INVALID = [  # (arguments as the model might send them, error kind)
    ({"wavelength_range": [6500]}, "arity"),
    ({"wavelength_range": [6500, 6600, 6700]}, "arity"),
    ({"wavelength_range": []}, "arity"),
    ({"wavelength_range": [[6500, 6600]]}, "arity"),
    ({"wavelength_range": {"min": 6500, "max": 6600}}, "arity"),
    ({"wavelength_range": 6500}, "arity"),
    ({"wavelength_range": [[6500], [6600]]}, "type"),
    ({"wavelength_range": ["6500", "6600"]}, "type"),
    ({"wavelength_range": [6500, "abc"]}, "type"),
    ({"wavelength_range": "6500-6600"}, "type"),
    ({"wavelength_range": "[6500, 6600]"}, "type"),
    ({"wavelength_range": [None, 6600]}, "type"),
    ({"wavelength_range": [6500, None]}, "type"),
    ({"wavelength_range": [True, 6600]}, "type"),
    ({"wavelength_range": [6500, False]}, "type"),
    ('{"wavelength_range": [NaN, 6600]}', "nonfinite"),
    ('{"wavelength_range": [6500, Infinity]}', "nonfinite"),
    ({"wavelength_range": [-math.inf, 6600]}, "nonfinite"),
    ({"wavelength_range": [6600, 6500]}, "order"),
    ({"wavelength_range": [6500, 6500]}, "order"),
    ({"wavelength_range": [-100, 6600]}, "negative"),
    ({"wavelength_range": [-6600, -6500]}, "negative"),
    ({"wavelength_range": [100, 200]}, "outside"),  # e.g. nm instead of Å
    ({"wavelength_range": [20000, 30000]}, "outside"),
    ({"wavelength_range": [6500, 6500.4]}, "narrow"),
    ({"wavelength_range": [6562, 6563.5]}, "few_points"),
    ({"wavelength_range": [6500, 1e9]}, "magnitude"),
    ('{"wavelength_range": [1, 1e400]}', "nonfinite"),  # JSON overflows to inf
    ('{"wavelength_range": [1, ' + "9" * 400 + "]}", "magnitude"),  # a huge integer
    ({"wavelength_range": [6500, 6600], "label": 42}, "label"),
    ({"wavelength_range": [6500, 6600], "label": ["H-alpha"]}, "label"),
    ({"wavelength_range": [6500, 6600], "label": {"name": "H-alpha"}}, "label"),
    ({"wavelength_range": [6500, 6600], "color": "red"}, "unknown_argument"),
    ({"range": [6500, 6600]}, "unknown_argument"),
    ({"wavelength": [6500, 6600]}, "unknown_argument"),
    ({1: 2}, "unknown_argument"),
    ('{"wavelength_range": [6500, 6600]', "json"),
    ("{'wavelength_range': [6500, 6600]}", "json"),
    ("wavelength_range=[6500, 6600]", "json"),
    ("[" * 100000, "json"),
    ('[6500, 6600]', "arguments"),
    ('"6500"', "arguments"),
    ([6500, 6600], "arguments"),
    (42, "arguments"),
    ({"name": "other_tool", "arguments": {"wavelength_range": [6500, 6600]}}, "tool_name"),
    ({"name": TOOL_NAME, "arguments": '{"wavelength_range": [6600, 6500]}'}, "order"),
    ({"name": TOOL_NAME, "arguments": {"name": TOOL_NAME, "arguments": {}}}, "unknown_argument"),
]


@pytest.mark.parametrize("args,kind", INVALID, ids=[f"{i}-{k}" for i, (_, k) in enumerate(INVALID)])
def test_invalid_call(tool, args, kind):
    r = tool.call(args)
    assert isinstance(r, ToolResult)
    assert (r.ok, r.image, r.window) == (False, None, None)
    assert r.error == kind, r.text
    assert r.text.startswith("Error: ") and "\n" not in r.text and len(r.text) < 400
    assert "; " in r.text, r.text  # "what is wrong; how to fix it"


def test_outside_error_names_the_coverage(tool):
    lo, hi = tool.data_range
    r = tool.execute([100, 200])
    assert f"{lo:g}-{hi:g} Å" in r.text and "rest frame" in r.text and "z = 0.3" in r.text


def test_few_points_suggests_a_window_that_works(tool):
    r = tool.execute([6562, 6563.5])
    lo, hi = (float(x) for x in r.text.split("e.g. [")[1].rstrip("].").split(", "))
    assert tool.execute([lo, hi]).ok


def test_spectrum_with_too_few_finite_pixels(fake_render):
    w = np.arange(100.0) + 5000; f = np.full(100, np.nan); f[[10, 50, 90]] = 1.0
    t = SpectralVisualizationTool(w, f, errors="speco3")
    for r in (t.execute(), t.execute([5000, 5100])):
        assert not r.ok and r.error == "few_points"


def test_render_failure_is_an_error_result(tool, monkeypatch):
    def broken(*a, **k): raise SpectrumError("spectrum: window holds 1 finite flux point(s)")
    monkeypatch.setattr(tool_mod, "render", broken)
    r = tool.execute([6500, 6600])
    assert (r.ok, r.error, r.image) == (False, "render", None) and r.text.startswith("Error: ")


# --- junk never raises -------------------------------------------------------------------------------------------

def _junk(rng, depth=0):
    "A random JSON-ish value: numbers of any size, strings, None, bools, NaN/inf, lists, dicts."
    pick = rng.randrange(12 if depth < 3 else 8)
    if pick == 0: return rng.uniform(-1e4, 2e4)
    if pick == 1: return rng.choice([0, 1, -1, 10**30, 1e308, float("nan"), float("inf"), -float("inf"), 1e-300])
    if pick == 2: return rng.randrange(-10, 12000)
    if pick == 3: return rng.choice(["", "6500", "abc", "[6500, 6600]", "\x00\n", "$\\frac{", "Hα" * rng.randrange(1, 200)])
    if pick == 4: return None
    if pick == 5: return rng.choice([True, False])
    if pick == 6: lo = rng.uniform(3000, 9000); return [lo, lo + rng.choice([-5, 0, 0.3, 3, 30, 300, 3000])]
    if pick == 7: return rng.choice(["wavelength_range", "label", "name", "arguments"])
    if pick in (8, 9): return [_junk(rng, depth + 1) for _ in range(rng.randrange(0, 4))]
    keys = ["wavelength_range", "label", "name", "arguments", "x"]
    return {rng.choice(keys): _junk(rng, depth + 1) for _ in range(rng.randrange(0, 3))}


def _junk_call(rng):
    args = _junk(rng)
    if rng.random() < 0.5:  # as the model would write it: JSON text, sometimes broken
        try: text = json.dumps(args)
        except (TypeError, ValueError): text = str(args)
        if rng.random() < 0.3 and text: i = rng.randrange(len(text)); text = text[:i] + rng.choice(["", "}", ",", "'"]) + text[i + 1:]
        return text
    return args


def test_junk_never_raises(tool, fake_render):
    rng = random.Random(0)
    results = [tool.call(_junk_call(rng)) for _ in range(3000)]
    for r in results:
        assert isinstance(r, ToolResult) and r.error != "internal", r.text
        assert r.ok == (r.image is not None) == (r.error is None)
        assert r.text.startswith("Generated spectral visualization") if r.ok else r.text.startswith("Error: ")
        assert "\n" not in r.text
    kinds = {r.error for r in results}
    assert sum(r.ok for r in results) > 20 and len(kinds) > 8, kinds  # the generator reaches both sides


def test_junk_with_real_renderer_never_raises(tool):
    "Fewer calls, real matplotlib: labels full of mathtext and control characters must not break drawing."
    rng = random.Random(1)
    n_ok = 0
    for _ in range(40):
        r = tool.call({"wavelength_range": [6400, 6700], "label": _junk(rng) if rng.random() < 0.3 else
                       "".join(rng.choice("$\\{}^_αÅ \n\t\x00abc") for _ in range(rng.randrange(0, 100)))})
        assert r.error in (None, "label"), r.text
        n_ok += r.ok
    assert n_ok > 20


# --- real data (the real-spectra collection, data/real-spectra) ---------------------------------------------------------------------

def test_real_qso_broad_line_in_rest_frame():
    from speco3.io import read_spectrum, real_spectra_dir
    root = real_spectra_dir()
    s = read_spectrum(root / "spectra.parquet", id="SDSS:spec-7339-56772-0777")  # broad-line QSO, z = 0.456: Mg II 2800 in range
    t = SpectralVisualizationTool.from_spectrum(s, errors="speco3")
    assert abs(t.spectrum.redshift - 0.456) < 0.001
    r = t.execute([2700, 2900], label="Mg II")
    assert r.ok and r.n_points > 50 and r.image.width > 500
    r = t.execute([8450, 8700], label="Ca II triplet")  # 12 300-12 700 Å observed: beyond SDSS's red end
    assert not r.ok and r.error == "outside" and "z = 0.45597" in r.text


# --- the authors' wording (the default) ---------------------------------------------------------------------------

def test_default_wording_is_the_authors():
    w, f = lamost_like()
    t = SpectralVisualizationTool(w, f, redshift=Z)
    lo, hi = (w / (1 + Z)).min(), (w / (1 + Z)).max()
    assert t.errors == "spec-o3"
    r = t.execute([6480, 6650], label="H-alpha")
    assert (r.ok, r.reward, r.text) == (True, 0.0, "Generated spectral visualization focused on wavelength range (6480, 6650) Å for H-alpha.")
    assert t.execute([6480.0, 6650.0]).text == "Generated spectral visualization focused on wavelength range (6480.0, 6650.0) Å."
    assert t.execute(label="H-alpha").text == "Generated full spectrum visualization for H-alpha."
    for bad in ([6650, 6480], [6563, 6563], [5000], [1, 2, 3], [100, 200], [20000, 30000]):
        r = t.execute(bad)
        assert (r.ok, r.error, r.reward, r.image) == (False, "invalid", -0.05, None)
        assert r.text == f"Error: The specified wavelength range {bad} is invalid or outside the available data range [{lo:.1f}, {hi:.1f}]."
    r = t.execute([6563.0, 6563.1])
    assert (r.ok, r.error, r.reward) == (False, "processing", -0.05)
    assert r.text == "Error processing spectral visualization: No data points in specified wavelength range (6563.0, 6563.1)"
    assert t.call({"wavelength_range": [6480, 6650], "units": "A"}).ok   # unknown argument names are ignored, as theirs


def test_unknown_wording_raises():
    w, f = lamost_like()
    with pytest.raises(SpectrumError, match="errors: unknown dialect"): SpectralVisualizationTool(w, f, errors="polite")
    with pytest.raises(SpectrumError, match="style: unknown style"): SpectralVisualizationTool(w, f, style=["x"])


def test_dollar_label_reaches_fast_title_as_written(fake_render):
    "No escaping on the way: the renderer draws titles as plain text, so a '$' must arrive as '$', not '\\$'."
    w, f = lamost_like()
    t = SpectralVisualizationTool(w, f, redshift=Z, style="fast")
    assert t.execute([6480, 6650], label="costs $5").ok and fake_render[-1]["title"] == "costs $5"
