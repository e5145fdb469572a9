"""Do the SpecVI-Sim (simulated) CV positives and `nova` spectra look like the real CVs (classical novae)? (issue 43, item 1)

Measures, with one crude recipe applied alike to real and simulated spectra (vacuum Å; real air wavelengths converted):

* Hα, Hβ equivalent width (emission positive, Å) against a pseudo-continuum (a low percentile of side bands),
* Hα FWHM (km/s) of the continuum-subtracted profile (blends with [N II] and He I included),
* Hα/Hβ line-flux ratio (the Balmer decrement as observed, reddening included),
* Fe II 5169 (5150–5190 Å), He II 4686 (4670–4705 Å) and [O III] 5007 (4995–5020 Å) emission, each as a flux relative to Hβ,
* continuum slope: α of F_λ ∝ λ^α between the 10th-percentile flux of 4400–4550 Å and of 6000–6250 Å.

Only the DEV half of the real collection is used (`meta['split'] == 'dev'`). Writes lines.md, lines.json and
spectra.png under --out (default bench/results/cv_novae/).

    python tools/cv_novae_lines.py --n-sim 60
"""
from __future__ import annotations
import argparse, json, time
from pathlib import Path
import numpy as np

from speco3.realmix import load_real
from speco3.simulate import simulate, C_KMS
from speco3.spectrum import air_to_vacuum

SIM_KINDS = ("nova", "cv_dn", "cv_nl", "cv_polar")
HA, HB, HE2, O3, FE2 = 6564.61, 4862.68, 4687.02, 5008.24, 5170.47  # vacuum Å


def _wf(s):
    w = np.asarray(s.wavelength, float)
    if s.medium == "air": w = air_to_vacuum(w)
    f = np.asarray(s.flux, float)
    ok = np.isfinite(f) & (np.ones_like(f, bool) if s.mask is None else ~np.asarray(s.mask, bool))
    return w[ok], f[ok]


def _cont(w, f, bands, q=20):
    "Linear pseudo-continuum through the q-th percentile flux of each side band; None if a band has too few pixels."
    xs, ys = [], []
    for lo, hi in bands:
        m = (w >= lo) & (w <= hi)
        if m.sum() < 3: return None
        xs.append((lo + hi) / 2); ys.append(np.percentile(f[m], q))
    return np.polyval(np.polyfit(xs, ys, 1), w)


def _line(w, f, lo, hi, bands):
    "(EW in Å, line flux, FWHM in km/s) of emission between lo and hi above the side-band continuum."
    c = _cont(w, f, bands)
    m = (w >= lo) & (w <= hi)
    if c is None or m.sum() < 3: return np.nan, np.nan, np.nan
    ww, ex, cc = w[m], f[m] - c[m], c[m]
    flux = np.trapezoid(ex, ww)
    ew = np.trapezoid(ex / np.where(cc > 0, cc, np.nan), ww) if np.all(cc > 0) else np.nan
    k = np.argmax(ex)
    if ex[k] <= 0: return ew, flux, np.nan
    above = ex >= ex[k] / 2
    i0, i1 = k, k
    while i0 > 0 and above[i0 - 1]: i0 -= 1
    while i1 < len(ex) - 1 and above[i1 + 1]: i1 += 1
    fwhm = (ww[i1] - ww[i0]) / ww[k] * C_KMS
    return ew, flux, fwhm


def measure(s):
    w, f = _wf(s)
    ha = _line(w, f, HA - 120, HA + 120, [(6380, 6420), (6720, 6780)])
    hb = _line(w, f, HB - 70, HB + 70, [(4740, 4780), (5080, 5120)])
    fe = _line(w, f, 5150, 5190, [(5080, 5120), (5230, 5260)])
    he2 = _line(w, f, 4670, 4705, [(4540, 4580), (4740, 4780)])
    o3 = _line(w, f, 4995, 5020, [(4740, 4780), (5080, 5120)])
    b1, b2 = (w >= 4400) & (w <= 4550), (w >= 6000) & (w <= 6250)
    alpha = (np.log(np.percentile(f[b2], 10) / np.percentile(f[b1], 10)) / np.log(6125 / 4475)
             if b1.sum() > 3 and b2.sum() > 3 and np.percentile(f[b1], 10) > 0 and np.percentile(f[b2], 10) > 0 else np.nan)
    rel = lambda x: x[1] / hb[1] if np.isfinite(hb[1]) and hb[1] > 0 else np.nan
    return dict(ew_ha=ha[0], fwhm_ha=ha[2], ew_hb=hb[0], fwhm_hb=hb[2], ha_hb=rel(ha), fe2_hb=rel(fe), he2_hb=rel(he2),
                o3_hb=rel(o3), alpha=alpha)


KEYS = [("ew_ha", "EW Hα (Å)"), ("fwhm_ha", "FWHM Hα (km/s)"), ("ew_hb", "EW Hβ (Å)"), ("ha_hb", "F(Hα)/F(Hβ)"),
        ("fe2_hb", "Fe II 5169 / Hβ"), ("he2_hb", "He II 4686 / Hβ"), ("o3_hb", "[O III] 5007 / Hβ"),
        ("alpha", "slope α (F_λ ∝ λ^α)")]


def q(xs):
    xs = np.asarray([x for x in xs if np.isfinite(x)], float)
    return np.percentile(xs, [10, 50, 90]).tolist() + [int(xs.size)] if xs.size else [np.nan] * 3 + [0]


def fmt(v, key):
    d = 0 if key.startswith(("ew", "fwhm")) else 2
    return "–" if not np.isfinite(v) else f"{v:.{d}f}"


def plot(real, sims, path):
    import matplotlib; matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    groups = [("real CV (dev half; classical nova)", real[:6])] + [(f"SpecVI-Sim (simulated) {k}", sims[k][:3]) for k in SIM_KINDS]
    fig, axes = plt.subplots(len(groups), 1, figsize=(11, 2.6 * len(groups)), sharex=True)
    for ax, (title, ss) in zip(axes, groups):
        for i, s in enumerate(ss):
            w, f = _wf(s)
            m = (w > 3700) & (w < 9000)
            if m.sum() < 10: continue
            med = np.nanmedian(f[m])
            ax.plot(w[m], f[m] / med + 0 * i, lw=0.6, label=s.meta.get("object") or s.meta.get("subclass"))
        for lam, name in ((HA, "Hα"), (HB, "Hβ"), (HE2, "He II"), (O3, "[O III]"), (FE2, "Fe II")):
            ax.axvline(lam, color="0.7", lw=0.5, ls=":"); ax.text(lam, 1.0, name, fontsize=6, transform=ax.get_xaxis_transform(), va="top")
        ax.set_yscale("log"); ax.set_title(title, fontsize=9); ax.legend(fontsize=6, ncol=3, loc="upper left")
        ax.set_ylabel("flux / median")
    axes[-1].set_xlabel("vacuum wavelength (Å)")
    fig.tight_layout(); fig.savefig(path, dpi=110); plt.close(fig)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n-sim", type=int, default=60, help="simulated spectra per kind")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default="bench/results/cv_novae")
    args = ap.parse_args(argv)
    t0 = time.time()
    out = Path(args.out); out.mkdir(parents=True, exist_ok=True)
    real = [s for s in load_real(labels=["CV"]) if s.meta["split"] == "dev"]
    sims = {k: simulate(k, args.n_sim, "lamost", seed=args.seed) for k in SIM_KINDS}
    rows = {"real CV (dev)": [measure(s) for s in real]} | {f"sim {k}": [measure(s) for s in sims[k]] for k in SIM_KINDS}
    per_real = {s.meta["id"]: measure(s) for s in real}
    stats = {g: {k: q([r[k] for r in rs]) for k, _ in KEYS} for g, rs in rows.items()}
    plot(real, sims, out / "spectra.png")
    L = ["# Line strengths: real CVs (dev half) vs SpecVI-Sim (simulated) nova and CV positives", "",
         f"Median [10th–90th percentile] (n measured). Real: {len(real)} dev-half spectra labelled CV (all classical novae "
         f"of CTIO_NOVA_ATLAS). Sim: {args.n_sim} LAMOST-like spectra per kind, simulate seed {args.seed}, default SNR draw. "
         "Crude, identical recipe for both (tools/cv_novae_lines.py); Fe II, He II and [O III] are fluxes relative to Hβ "
         "in fixed windows (blends included).", "",
         "| quantity | " + " | ".join(rows) + " |", "|---|" + "---|" * len(rows)]
    for k, name in KEYS:
        L.append(f"| {name} | " + " | ".join(f"{fmt(stats[g][k][1], k)} [{fmt(stats[g][k][0], k)}–{fmt(stats[g][k][2], k)}] ({stats[g][k][3]})" for g in rows) + " |")
    L += ["", "## Each real dev spectrum", "", "| id | " + " | ".join(n for _, n in KEYS) + " |", "|---|" + "---|" * len(KEYS)]
    for i, r in per_real.items(): L.append(f"| {i} | " + " | ".join(fmt(r[k], k) for k, _ in KEYS) + " |")
    L += ["", f"Command: `python tools/cv_novae_lines.py {' '.join(argv or [])}`".rstrip() + f"; wall time {time.time() - t0:.0f} s."]
    (out / "lines.md").write_text("\n".join(L) + "\n")
    (out / "lines.json").write_text(json.dumps(dict(stats=stats, per_real=per_real, n_sim=args.n_sim, seed=args.seed), indent=1, default=float) + "\n")
    print("\n".join(L))


if __name__ == "__main__":
    import sys
    main(sys.argv[1:])
