"""Tests for speco3.render: golden pixels of each style version, the production spec-o3 renderer equal to the
reference pixel for pixel, corner choice, tick ladder, gaps, errors and threads. The notebook
nbs/02_render.ipynb shows the API; these are the exhaustive checks.

Golden images: tests/golden/render_golden.json holds, per style version and case, the image size and the
sha256 of its raw RGB bytes (PNGs beside it are for humans). After an intentional change of a look, bump
the style's version in STYLES and run `python tests/golden/regen_render.py`."""
import hashlib, json
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
import numpy as np
import pytest
import matplotlib, PIL
from PIL import features
from speco3.render import (_FAST_BOX, CORNERS, FAST_SIZE, STYLES, MAX_TICKS, least_crowded_corner, render, render_reference,
                           tick_steps, figure_size, o3_tick_steps, o3_figure_size, quadrant_corner, x_ticks)
from speco3.spectrum import Spectrum, SpectrumError, lamost_wavelength

GOLDEN = Path(__file__).parent / "golden"
GOLDEN_JSON = GOLDEN / "render_golden.json"
GOLDEN_WINDOWS = {"full": None, "halpha": (6480, 6650), "narrow": (6560, 6564.5)}


def synthetic(seed=0, wave=None, scale=1.0):
    "The golden spectrum: LAMOST grid, sloped continuum, Gaussian noise (seeded) and four lines."
    rng = np.random.default_rng(seed)
    w = lamost_wavelength() if wave is None else wave
    f = 100 + 0.01 * (w - 6000) + rng.normal(0, 2, len(w))
    for c, a in [(6564.6, 60), (4862.7, -30), (4341.7, -20), (5891.6, -15)]:
        f = f + a * np.exp(-0.5 * ((w - c) / 4) ** 2)
    return Spectrum(w, f * scale, meta={"source": "golden"})


def rendering_stack():
    "Versions whose change may legitimately change pixels; the golden file records them."
    return {"matplotlib": matplotlib.__version__, "pillow": PIL.__version__, "freetype": features.version("freetype2")}


def golden_images():
    "{(style version, case): image} for every golden case."
    s = synthetic()
    return {(STYLES[style], case): render(s, win, style=style)
            for style in STYLES for case, win in GOLDEN_WINDOWS.items()}


def digest(im): return hashlib.sha256(im.tobytes()).hexdigest()


def same(a, b): return a.size == b.size and a.tobytes() == b.tobytes()


# ---------------------------------------------------------------- golden pixels
@pytest.fixture(scope="module")
def golden():
    if not GOLDEN_JSON.exists(): pytest.fail(f"{GOLDEN_JSON} is missing: run `python tests/golden/regen_render.py`")
    g = json.loads(GOLDEN_JSON.read_text())
    if g["stack"] != rendering_stack():
        pytest.skip(f"golden images were made with {g['stack']}, this is {rendering_stack()}: text rasterisation may "
                    "differ; check the images by eye and run `python tests/golden/regen_render.py`")
    return g


@pytest.mark.parametrize("style", list(STYLES))
@pytest.mark.parametrize("case", list(GOLDEN_WINDOWS))
def test_golden(golden, style, case, tmp_path):
    version = STYLES[style]
    assert version in golden["images"], (f"no golden images for {version}: after a deliberate change of the look, "
                                         "run `python tests/golden/regen_render.py`")
    want = golden["images"][version][case]
    im = render(synthetic(), GOLDEN_WINDOWS[case], style=style)
    if list(im.size) != want["size"] or digest(im) != want["sha256"]:
        out = tmp_path / f"{version.replace('/', '-')}_{case}.png"  # kept after a failure (pyproject: tmp_path_retention_policy)
        im.save(out)
        pytest.fail(f"{version} {case}: pixels changed (new image: {out}; golden PNG in {GOLDEN}). If the change is "
                    f"intended, bump the version in STYLES and run `python tests/golden/regen_render.py`.")


def test_golden_covers_every_style():
    g = json.loads(GOLDEN_JSON.read_text())
    assert set(g["images"]) == set(STYLES.values())
    assert all(set(v) == set(GOLDEN_WINDOWS) for v in g["images"].values())


# ---------------------------------------------------------------- spec-o3 production == reference
RNG_WINDOWS = [(lo, lo + w) for lo, w in zip(np.random.default_rng(7).uniform(3800, 8000, 6), [3, 12, 40, 150, 700, 2500])]


@pytest.mark.parametrize("window", [None, (6480, 6650), (4800, 4920), (4400, 4720), (8150, 8230), (6561, 6565),
                                    (3690, 9200), *RNG_WINDOWS], ids=str)
def test_production_equals_reference(window):
    s = synthetic(3)
    assert same(render(s, window), render_reference(s, window))


@pytest.mark.parametrize("scale", [1e-17, 3e-3, 1e5])
def test_production_equals_reference_any_flux_scale(scale):
    s = synthetic(4, scale=scale)   # offset/exponent texts on the y axis, wide tick labels
    for window in [None, (6480, 6650)]:
        assert same(render(s, window), render_reference(s, window))


def test_point_count_and_figure_size():
    "The authors' rule: fewer than 50 points drawn -> a figure 5 % narrower; many points change nothing."
    dense = synthetic(5, wave=np.linspace(3700, 9100, 12_000))
    big, ref = render(dense), render_reference(dense)
    assert same(big, ref) and big.size[1] == render(synthetic(5)).size[1]
    s = synthetic(5)
    few, many = render(s, (6530, 6600)), render(s, (6480, 6650))      # ~45 and ~110 points, both 7 x 4.5 in
    assert same(few, render_reference(s, (6530, 6600))) and few.size[1] == many.size[1]
    assert few.size[0] < many.size[0] - 20


def test_one_point_window_many_ticks():
    "One point: matplotlib widens the view by 5 % each side and the 1 Å steps give hundreds of ticks, as the authors' plots have."
    s = synthetic(3)
    i = np.searchsorted(s.wavelength, 6563); one = (s.wavelength[i] - 0.1, s.wavelength[i] + 0.1)
    assert same(render(s, one), render_reference(s, one))
    assert 300 < len(x_ticks(s, one)[0]) <= MAX_TICKS


def test_rcparams_do_not_leak():
    s = synthetic()
    with matplotlib.rc_context({"lines.linewidth": 4, "axes.facecolor": "black", "font.size": 22, "axes.grid": False,
                                "figure.subplot.left": 0.3}):
        a, b = render(s, (4800, 4920)), render_reference(s, (4800, 4920))
        assert matplotlib.rcParams["lines.linewidth"] == 4
    assert same(a, b) and same(a, render(s, (4800, 4920)))


def test_threads():
    s = synthetic()
    wins = [None, (6480, 6650), (4800, 4920), (8150, 8230)] * 3
    with ThreadPoolExecutor(4) as ex:
        got = list(ex.map(lambda w: (render(s, w), render(s, w, style="fast")), wins))
    for (a, f), w in zip(got, wins):
        assert same(a, render(s, w)) and same(f, render(s, w, style="fast"))


# ---------------------------------------------------------------- look decisions
def test_spec_o3_tick_ladder():
    "The authors' steps, by the span of the points drawn (tests/conformance/tool holds the images they come from)."
    want = {7500: (1000, 200), 5048.6: (1000, 200), 3999.5: (200, 50), 1000: (200, 50), 997.9: (100, 20), 502.6: (100, 20),
            400: (100, 25), 300.3: (100, 25), 196.8: (50, 25), 160: (50, 25), 120: (25, 5), 100: (25, 5), 99.6: (10, 2),
            60: (10, 2), 15: (2, 0.5), 9.8: (2, 0.5), 0: (1, 0.2)}
    for span, steps in want.items(): assert o3_tick_steps(span) == steps, span
    majors = [o3_tick_steps(w)[0] for w in np.geomspace(0.1, 100_000, 300)]
    assert majors == sorted(majors)


def test_spec_o3_figure_sizes():
    assert o3_figure_size(3945, 2819, full=True) == (10, 6)
    assert [o3_figure_size(w, 100) for w in (49, 50, 199, 200, 999, 1000)] == [(6, 4), (7, 4.5), (7, 4.5), (8, 5), (8, 5), (9, 5.5)]
    assert o3_figure_size(170, 49) == (7 * 0.95, 4.5) and o3_figure_size(170, 50) == (7, 4.5)


def test_quadrant_corner():
    x = np.linspace(0, 10, 51)
    assert quadrant_corner(x, x) == "upper left" and quadrant_corner(x, -x) == "upper right"
    assert quadrant_corner(x, np.sqrt(x)) == "lower right" and quadrant_corner(x, -np.sqrt(x)) == "upper right"
    assert quadrant_corner(np.array([1.0]), np.array([1.0])) == "upper left"


@pytest.mark.parametrize("span", [1e5, 1e7, 1e12])
def test_ticks_are_bounded_for_any_span(span):
    "A nonsense span must not mean millions of ticks (1e7 Å once took 36 s and 4.6 GB; 1e12 was killed)."
    s = Spectrum(np.linspace(3700, span, 1000), np.ones(1000))
    major, minor = x_ticks(s)
    assert len(major) + len(minor) <= 2 * MAX_TICKS
    if span / 200 > MAX_TICKS: assert len(major) <= 20 and len(minor) <= 100   # the authors' steps would be too many: matplotlib's own
    major, minor = tick_steps(span)
    assert span / minor <= MAX_TICKS and span / major <= MAX_TICKS
    assert render(s, style="fast").size == FAST_SIZE


def test_huge_span_renders_the_same_both_ways():
    s = Spectrum(np.linspace(3700, 1e12, 1000), np.ones(1000))
    assert same(render(s), render_reference(s))


def test_tick_ladder():
    want = {6000: (1000, 200), 5000: (1000, 200), 4999: (500, 100), 2000: (500, 100), 1999: (200, 50),
            1000: (200, 50), 700: (100, 20), 300: (50, 10), 170: (20, 5), 80: (10, 2), 30: (5, 1), 10: (2, 0.5),
            5: (2, 0.5), 4.9: (1, 0.2), 0.5: (1, 0.2)}
    for width, steps in want.items(): assert tick_steps(width) == steps, width
    majors = [tick_steps(w)[0] for w in np.geomspace(1, 10_000, 200)]
    assert majors == sorted(majors)                                  # never coarser for a narrower window
    assert all(2 <= w / tick_steps(w)[0] <= 10 for w in np.geomspace(5, 10_000, 200))   # 2..10 labelled ticks


def test_figure_sizes():
    assert figure_size(5400, 3909, full=True) == (10, 6)
    assert [figure_size(w, 100) for w in (49, 50, 199, 200, 999, 1000)] == [(6, 4), (7, 4.5), (7, 4.5), (8, 5), (8, 5), (9, 5.5)]
    s = synthetic()
    # image sizes follow the figure sizes (80 dpi, tight box a little smaller than the figure)
    for window, (w, h) in [(None, (10, 6)), ((6540, 6580), (6, 4)), ((6480, 6650), (7, 4.5)), ((6200, 6900), (8, 5)),
                           ((4000, 8000), (9, 5.5))]:
        W, H = render(s, window).size
        assert 0.9 * w * 80 <= W <= w * 80 + 2 and 0.9 * h * 80 <= H <= h * 80 + 2, (window, W, H)


def _box_quadrant(im):
    "Quadrant (upper/lower, left/right) holding the fast style's grey info-box outline."
    a = np.asarray(im).astype(int)
    ys, xs = np.nonzero((np.abs(a - 128).sum(-1) == 0))
    return ("upper" if ys.mean() < im.height / 2 else "lower") + " " + ("left" if xs.mean() < im.width / 2 else "right")


@pytest.mark.parametrize("slope,corner", [(1, "upper left"), (-1, "upper right")])
def test_corner_choice(slope, corner):
    w = lamost_wavelength()
    f = 100 + slope * 0.05 * (w - 6000)
    s = Spectrum(w, f)
    x, y = w, f
    assert least_crowded_corner(x, y, (w[0], w[-1]), (y.min() - 5, y.max() + 5)) == corner
    assert _box_quadrant(render(s, style="fast")) == corner


def test_corner_sparse_window_counts_the_line():
    # two points at the bottom-left and top-right: the line between them crosses nothing else
    x, y = np.array([0.0, 10.0]), np.array([0.0, 10.0])
    assert least_crowded_corner(x, y, (0, 10), (-1, 11)) in ("upper left", "lower right")
    # a flat line along the top: the lower corners are free, right first
    assert least_crowded_corner(np.linspace(0, 10, 50), np.full(50, 10.0), (0, 10), (0, 10.5)) == "lower right"
    assert CORNERS[0] == "upper right"   # the tie-breaker order


# ---------------------------------------------------------------- gaps and errors
def test_nonfinite_flux_is_a_gap():
    s = synthetic()
    gap = (s.wavelength > 6540) & (s.wavelength < 6590)
    for bad in (np.nan, np.inf, -np.inf):
        g = s.replace(flux=np.where(gap, bad, s.flux))
        a = render(g, (6480, 6650))
        assert same(a, render_reference(g, (6480, 6650))) and not same(a, render(s, (6480, 6650)))
        # fast style: no line pixel strictly inside the gap
        fim = np.asarray(render(g, (6480, 6650), style="fast")).astype(int)
        L, _, R, _ = _FAST_BOX
        x0, x1 = L + (6545 - 6480) / 170 * (R - L), L + (6585 - 6480) / 170 * (R - L)
        line = (np.abs(fim - [31, 78, 156]).sum(-1) < 30)
        assert line[:, int(x0):int(x1)].sum() == 0 and line.sum() > 100


@pytest.mark.parametrize("style", list(STYLES))
@pytest.mark.parametrize("window", [None, (6480, 6650)])
def test_masked_pixels_are_gaps(style, window):
    "A masked pixel is drawn exactly as a NaN one (a break in the line), whatever its flux; an empty mask changes nothing."
    s = synthetic()
    bad = (s.wavelength > 6540) & (s.wavelength < 6590)
    masked = s.replace(flux=np.where(bad, 0.0, s.flux), mask=bad)
    holed = s.replace(flux=np.where(bad, np.nan, s.flux))
    assert same(render(masked, window, style=style), render(holed, window, style=style))
    assert not same(render(masked, window, style=style), render(s, window, style=style))
    assert same(render(s.replace(mask=np.zeros(len(s), bool)), window, style=style), render(s, window, style=style))


@pytest.mark.parametrize("window,match", [((6650, 6480), "lo < hi"), ((6500, 6500), "lo < hi"),
                                          (("a", 1), "two numbers"), ((1, 2, 3), "two numbers"), (5, "two numbers"),
                                          ((np.nan, 6000), "finite"), ((-np.inf, 6000), "finite")])
@pytest.mark.parametrize("style", list(STYLES))
def test_bad_windows(window, match, style):
    with pytest.raises(SpectrumError, match=match): render(synthetic(), window, style=style)


def test_empty_windows():
    with pytest.raises(SpectrumError, match="no data point with finite flux in the window"): render(synthetic(), (9500, 9900))
    with pytest.raises(SpectrumError, match="0 finite"): render(synthetic(), (9500, 9900), style="fast")
    with pytest.raises(SpectrumError, match="need at least 2"): render(synthetic(), (6562, 6563), style="fast")


@pytest.mark.parametrize("style", ["paper", ["x"], None, 3])
def test_unknown_style(style):
    with pytest.raises(ValueError, match="render: unknown style"): render(synthetic(), style=style)


@pytest.mark.parametrize("spectrum", [None, [1, 2, 3], "spectrum"])
def test_not_a_spectrum(spectrum):
    with pytest.raises(TypeError, match="render: spectrum must be a Spectrum"): render(spectrum)


def test_fast_style():
    s = synthetic()
    im = render(s, style="fast")
    assert im.size == FAST_SIZE and im.mode == "RGB"
    assert same(im, render(s, style="fast"))
    assert not same(render(s, (6480, 6650), style="fast"), render(s, (6480, 6660), style="fast"))
    assert not same(render(s, style="fast", title="X"), im)


def _title_width(im):
    "Width in pixels of the dark glyphs in the title band (top 30 rows)."
    cols = np.flatnonzero((np.asarray(im.convert("L"))[:30] < 128).any(0)); return cols[-1] - cols[0]


def test_titles_are_plain_one_line_text():
    s = synthetic()
    t = r"$H\alpha$ costs $5"                  # would be mathtext (or a parse error) if passed through
    assert same(render(s, (4800, 4920), title=t), render_reference(s, (4800, 4920), title=t))
    assert not same(render(s, (4800, 4920), title=t), render(s, (4800, 4920), title="H alpha"))
    # a "$" is drawn as one dollar glyph: no mathtext, no "\$"
    assert abs(_title_width(render(s, title="$")) - _title_width(render(s, title="S"))) <= 2
    assert _title_width(render(s, title="\\$")) > _title_width(render(s, title="$")) + 3
    for style in STYLES:
        long = "Balmer series and the region around the Ca II H and K lines " * 3
        assert render(s, (6540, 6580), style=style, title=long).size == render(s, (6540, 6580), style=style).size
        assert same(render(s, style=style, title="a\nb"), render(s, style=style, title="a b"))
