"""Ablation for bench/results/cv_novae: the N variants of tools/transfer_rows.py with the `nova` recipe as it was
before it was widened to the real dev novae (commit 9c35d24: Hα EW 100–2000 Å, FWHM 1000–4000 km/s uniform, Hβ at
0.03–0.2 × Hα, [O III] ≤ 2 × Hβ, He II ≤ 0.3 × Hβ, E(B−V) scale 0.6, cap 1.5). Swaps `KINDS['nova']` in memory only.

    python tools/cv_novae_old_nova.py --tasks cv --variants N20 N40 --seeds 0 1 2 --out bench/results/cv_novae/old_nova
"""
import dataclasses, sys
from pathlib import Path
import numpy as np
from speco3 import simulate as sim

def _r_nova_old(m, d):
    g = vars(sim)
    _emit_ew, _HA, _HB, _HG, _HD, _FE_II, _HE_I, _N_III, _HE_II, _O_I_NIR, _O_III, _NII_5755, _O_I, _O_I_6364 = (g[k] for k in (
        "_emit_ew", "_HA", "_HB", "_HG", "_HD", "_FE_II", "_HE_I", "_N_III", "_HE_II", "_O_I_NIR", "_O_III", "_NII_5755", "_O_I", "_O_I_6364"))
    teff = d.loguniform("teff", 6000, 20000)
    ew, fwhm = d.loguniform("ew_ha", 100, 2000), d.uniform("fwhm", 1000, 4000)
    dec, feii, neb = d.uniform("ratio_hb", 0.03, 0.2), d.bernoulli("fe_ii_type", 0.7), d.uniform("nebular", 0, 1) ** 2
    cont = m.bb_fn(teff)
    f, hb = cont(m.wr), ew * dec
    for lam, e in ((_HA, ew), (_HB, hb), (_HG, hb * 0.5), (_HD, hb * 0.35)): _emit_ew(m, f, cont, lam, e, fwhm)
    for lam, r in _FE_II: _emit_ew(m, f, cont, lam, hb * r * feii * (1 - neb), fwhm)
    for k, r in ((5876, 0.15), (6678, 0.05), (7065, 0.05), (4471, 0.05), (5016, 0.05)): _emit_ew(m, f, cont, _HE_I[k], hb * r * (2 - feii), fwhm)
    _emit_ew(m, f, cont, _N_III, hb * (0.05 + 0.3 * (1 - feii) + 0.2 * neb), fwhm)
    _emit_ew(m, f, cont, _HE_II[4686], hb * 0.3 * neb, fwhm)
    for lam, r in zip(_O_I_NIR, (0.045, 0.075)): _emit_ew(m, f, cont, lam, ew * r, fwhm)
    for lam, r in ((_O_III[1], 2.0), (_O_III[0], 0.67), (_NII_5755, 0.4), (_O_I, 0.3), (_O_I_6364, 0.1)): _emit_ew(m, f, cont, lam, hb * r * neb, fwhm)
    m.subclass = ["nova (Fe II)" if x else "nova (He/N)" for x in feii]
    return f

sim.KINDS["nova"] = dataclasses.replace(sim.KINDS["nova"], recipe=_r_nova_old, ebv=0.6, ebv_max=1.5)
sys.path.insert(0, str(Path(__file__).parent))
import transfer_rows
if __name__ == "__main__":
    transfer_rows.main(sys.argv[1:])
