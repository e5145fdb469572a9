"""Rendering speed: median ms per image for each style, against the naive matplotlib reference.

Style spec-o3 is the look of the authors' released tool (tests/conformance/tool holds its images);
`render_reference` draws that look the plain way (a new figure per image, tight_layout, a tight PNG at 80 dpi,
decoded), `render` reuses figures and draws the same pixels. The bar: spec-o3 at least 4x faster than the
reference (median per image) with no pixel different.

    .venv/bin/python bench/render.py [--repeats 8]

A 3909-pixel spectrum on the LAMOST grid, the full view and four zooms. Each repeat uses a new spectrum
(new noise, flux scale from 1e-3 to 1e4) so tick labels, layout and text caches change as they do in real
use; the first call of each style (figure and font set-up) is timed apart and left out of the medians.
Also prints the largest pixel difference between style spec-o3 and `render_reference` over all images.
"""
import argparse, platform, time
import numpy as np
import matplotlib, PIL
from speco3.render import STYLES, render, render_reference
from speco3.spectrum import Spectrum, lamost_wavelength

WINDOWS = [None, (6480, 6650), (4800, 4920), (4400, 4720), (8150, 8230)]   # full, Hα, Hβ, 4400-4720, 8150-8230


def spectrum(seed):
    "Sloped continuum, noise and four Gaussian lines; the flux scale changes with the seed."
    rng = np.random.default_rng(seed)
    w = lamost_wavelength()
    f = 100 + 0.01 * (w - 6000) + rng.normal(0, 2, len(w))
    for c, a in [(6564.6, 60), (4862.7, -30), (4341.7, -20), (5891.6, -15)]:
        f = f + a * np.exp(-0.5 * ((w - c) / 4) ** 2)
    return Spectrum(w, f * 10.0 ** rng.uniform(-3, 4), meta={"source": f"bench-{seed}"})


def timed(fn):
    t0 = time.perf_counter(); out = fn(); return out, 1000 * (time.perf_counter() - t0)


def main(repeats):
    print(f"python {platform.python_version()}, matplotlib {matplotlib.__version__}, pillow {PIL.__version__}; "
          f"styles {STYLES}; {repeats} spectra x {len(WINDOWS)} windows")
    s0 = spectrum(10_000)
    first = {"reference": timed(lambda: render_reference(s0))[1], "spec-o3": timed(lambda: render(s0))[1],
             "fast": timed(lambda: render(s0, style="fast"))[1]}
    ms = {k: [] for k in first}
    maxdiff, ndiff = 0, 0
    for seed in range(repeats):
        s = spectrum(seed)
        for win in WINDOWS:
            ref, t = timed(lambda: render_reference(s, win)); ms["reference"].append(t)
            img, t = timed(lambda: render(s, win)); ms["spec-o3"].append(t)
            _, t = timed(lambda: render(s, win, style="fast")); ms["fast"].append(t)
            if img.size != ref.size: maxdiff, ndiff = 255, ndiff + 1
            else:
                d = int(np.abs(np.asarray(img, np.int16) - np.asarray(ref, np.int16)).max())
                maxdiff, ndiff = max(maxdiff, d), ndiff + (d > 0)
    med = {k: float(np.median(v)) for k, v in ms.items()}
    for k in ms:
        print(f"{k:>10}: median {med[k]:7.1f} ms/image  (min {min(ms[k]):6.1f}, max {max(ms[k]):6.1f}; first call {first[k]:6.1f})")
    print(f"spec-o3 speed-up over reference: {med['reference'] / med['spec-o3']:.1f}x (median/median)")
    print(f"fast speed-up over reference:    {med['reference'] / med['fast']:.0f}x")
    print(f"spec-o3 vs reference: max pixel difference {maxdiff}/255, {ndiff} of {len(ms['spec-o3'])} images differ")


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=8, help="spectra per window (default 8)")
    main(ap.parse_args().repeats)
