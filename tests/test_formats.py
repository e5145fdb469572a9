"""An astronomer's own files (issue 44, item 1): IRAF-style images (linear, log-linear, multispec), CALSPEC- and
Gunn–Stryker-style tables, 6dFGS files, LAMOST coadd tables of several rows, and the specutils fallback — each with
good and bad input. Every fixture is written here with astropy; the notebook nbs/01_io.ipynb shows the API."""
import gzip
import numpy as np
import pytest
from astropy.io import fits
from speco3.io import SpectrumError, read_spectrum, read_spectra

FLUX = 1 + 0.1 * np.sin(np.arange(600) / 25)


def image(path, data, **keys):
    "An image file with header `keys` (DC_FLAG is written DC-FLAG); `.gz` paths are gzipped."
    h = fits.PrimaryHDU(np.asarray(data, "f4"))
    for k, v in keys.items(): h.header["DC-FLAG" if k == "DC_FLAG" else k] = v
    if path.name.endswith(".gz"):
        raw = path.with_suffix("")
        h.writeto(raw, overwrite=True)
        path.write_bytes(gzip.compress(raw.read_bytes()))
    else: h.writeto(path, overwrite=True)
    return path


def error(path, **kw):
    with pytest.raises(SpectrumError) as e: read_spectrum(path, **kw)
    msg = str(e.value)
    assert "\n" not in msg and str(path) in msg, msg
    return msg


# ---------------------------------------------------------------- IRAF-style images

@pytest.mark.parametrize("keys, unit_scale", [
    (dict(CRVAL1=4000.0, CDELT1=1.5, CRPIX1=1.0, CTYPE1="LINEAR"), None),
    (dict(CRVAL1=4000.0, CD1_1=1.5, CRPIX1=1.0, CTYPE1="LINEAR", CUNIT1="Angstroms"), None),
    (dict(CRVAL1=400.0, CD1_1=0.15, CRPIX1=1.0, CUNIT1="nm"), None),
    (dict(CRVAL1=0.4, CDELT1=0.00015, CUNIT1="um"), None),
    (dict(CRVAL1=4000.0 - 1.5 * 9, CDELT1=1.5, CRPIX1=-8.0, WAT1_001="wtype=linear label=Wavelength units=angstroms"), None),
])
def test_iraf_linear(tmp_path, keys, unit_scale):
    s = read_spectrum(image(tmp_path / "lin.fits", FLUX, **keys))
    w = 4000 + 1.5 * np.arange(600)
    if keys.get("CRPIX1") == -8.0: w = 4000 - 1.5 * 9 + 1.5 * (np.arange(600) + 9)
    np.testing.assert_allclose(s.wavelength, w, rtol=1e-9)
    np.testing.assert_allclose(s.flux, FLUX, rtol=1e-6)
    assert s.meta["layout"] == "iraf-image" and s.medium == "air" and not s.meta["redshift_known"]


def test_iraf_loglinear_and_wave_log(tmp_path):
    s = read_spectrum(image(tmp_path / "dc.fits.gz", FLUX, CRVAL1=3.6, CD1_1=1e-4, CRPIX1=1.0, DC_FLAG=1))
    np.testing.assert_allclose(s.wavelength, 10 ** (3.6 + 1e-4 * np.arange(600)), rtol=1e-9)
    assert s.meta["dispersion"].startswith("log-linear")
    s = read_spectrum(image(tmp_path / "wl.fits", FLUX, CRVAL1=4000.0, CDELT1=1.0, CRPIX1=1.0, CTYPE1="WAVE-LOG", CUNIT1="Angstrom"))
    np.testing.assert_allclose(s.wavelength, 4000 * np.exp(np.arange(600) / 4000), rtol=1e-9)
    assert s.medium == "vacuum" and s.meta["medium_source"] == "header CTYPE1"   # WAVE is vacuum, AWAV air
    s = read_spectrum(image(tmp_path / "ls.fits", FLUX, CRVAL1=np.log10(4000), CDELT1=1e-4, CUNIT1="log(Angstrom)"))
    np.testing.assert_allclose(s.wavelength[0], 4000, rtol=1e-9)


def test_iraf_header_facts(tmp_path):
    p = image(tmp_path / "mike.fits", FLUX, CRVAL1=4000.0, CDELT1=1.5, OBJECT="HD 140283", BUNIT="erg/cm2/s/A",
              INSTRUME="MIKE", AIRORVAC="vac", REDSHIFT=0.001)
    s = read_spectrum(p)
    assert (s.meta["id"], s.meta["flux_unit"], s.meta["survey"], s.medium, s.redshift) == \
        ("HD 140283", "erg/cm2/s/A", "MIKE", "vacuum", 0.001)
    assert read_spectrum(p, medium="air").medium == "air"
    assert "medium must be 'vacuum' or 'air'" in error(p, medium="water")
    assert "do not apply to layout 'iraf-image'" in error(p, targetid=3)


def wat(axis, text):
    return {f"WAT{axis}_{k + 1:03d}": text[68 * k: 68 * (k + 1)] for k in range(len(text) // 68 + 1)}


@pytest.mark.parametrize("shape", ["2d", "3d"])
def test_multispec_first_aperture(tmp_path, shape):
    spec = 'wtype=multispec spec1 = "1 1 1 3.6 0.0001 600 0. 10 20" spec2 = "2 2 0 4000. 2. 600 0. 30 40"'
    aps = np.stack([FLUX, 3 * FLUX])
    data = aps if shape == "2d" else np.stack([aps, aps, np.zeros_like(aps), np.full_like(aps, 0.1)])
    bands = {} if shape == "2d" else dict(BANDID1="spectrum", BANDID2="raw", BANDID3="background", BANDID4="sigma - clean")
    s = read_spectrum(image(tmp_path / "ms.fits", data, WAT0_001="system=multispec",
                            WAT1_001="wtype=multispec label=Wavelength units=angstroms", **wat(2, spec), **bands))
    np.testing.assert_allclose(s.wavelength, 10 ** (3.6 + 1e-4 * np.arange(600)), rtol=1e-9)
    np.testing.assert_allclose(s.flux, FLUX, rtol=1e-6)
    assert (s.ivar is None) if shape == "2d" else np.allclose(s.ivar, 100, rtol=1e-4)


def test_multispec_doppler_and_nonlinear(tmp_path):
    spec = 'wtype=multispec spec1 = "1 1 0 4000. 2. 600 0.001 10 20"'
    s = read_spectrum(image(tmp_path / "z.fits", FLUX[None], WAT0_001="system=multispec", **wat(2, spec)))
    np.testing.assert_allclose(s.wavelength[0], 4000 / 1.001)   # IRAF's z field divides the dispersion
    # a Chebyshev dispersion (dtype 2) is left to specutils' IRAF loader
    cheb = 'wtype=multispec spec1 = "1 1 2 4000. 2. 600 0. 10 20 1. 0. 1 3 1. 600. 4600. 600. 1."'
    p = image(tmp_path / "cheb.fits", FLUX[None], WAT0_001="system=multispec", WAT1_001="wtype=multispec label=Wavelength units=angstroms",
              **wat(2, cheb), CTYPE1="MULTISPE", CTYPE2="MULTISPE", CDELT1=1.0, CD1_1=1.0, CD2_2=1.0, WCSDIM=2)
    s = read_spectrum(p)
    assert (s.meta["layout"], s.meta["specutils_format"], s.medium) == ("specutils", "iraf", "air")
    assert abs(s.wavelength[0] - 4000) < 2 and abs(s.wavelength[-1] - 5200) < 2   # 4600 + 600·x, x from -1 to 1


@pytest.mark.parametrize("keys, words", [
    (dict(CRVAL1=4000.0, CDELT1=1.5, DC_FLAG=-1), "not dispersion-corrected"),
    (dict(CRVAL1=4000.0, CDELT1=0.0), "without a wavelength calibration"),
    (dict(CRVAL1=4000.0, CDELT1=1.0, CTYPE1="PIXEL"), "without a wavelength calibration"),
    (dict(CRVAL1=4000.0, CDELT1=1.0, CUNIT1="Jy"), "wavelength unit 'Jy'"),
    (dict(CRVAL1=4000.0, CDELT1=1.0, CUNIT1="furlong-ish"), "wavelength unit 'furlong-ish'"),
    (dict(CRVAL1=4000.0, CDELT1=-1.5), "wavelengths must increase"),
    (dict(CRVAL1=-10.0, CDELT1=1.0), "non-positive"),
    (dict(WAT0_001="system=multispec", WAT2_001='wtype=multispec'), "without a spec1 entry"),
    (dict(WAT0_001="system=multispec", WAT2_001='wtype=multispec spec1 = "1 1 0"'), "spec1 has 3 fields"),
])
def test_iraf_bad_input(tmp_path, keys, words):
    assert words in error(image(tmp_path / "bad.fits", FLUX, **keys))


def test_iraf_without_wcs_names_the_csv_route(tmp_path):
    msg = error(image(tmp_path / "raw.fits", FLUX))
    assert "no wavelength calibration" in msg and "two-column CSV" in msg


# ---------------------------------------------------------------- tables

W = np.linspace(3000, 10000, 700)


def table(path, cols, header=None):
    t = fits.BinTableHDU.from_columns(cols)
    for k, v in (header or {}).items(): t.header[k] = v
    fits.HDUList([fits.PrimaryHDU(), t]).writeto(path, overwrite=True)
    return path


def test_calspec_table(tmp_path):
    p = table(tmp_path / "gd71_stiswfcnic_003.fits", [
        fits.Column("WAVELENGTH", "D", unit="ANGSTROMS", array=W), fits.Column("FLUX", "E", unit="FLAM", array=np.full(W.size, 2e-14)),
        fits.Column("STATERROR", "E", unit="FLAM", array=np.full(W.size, 2e-16)), fits.Column("SYSERROR", "E", unit="FLAM", array=np.full(W.size, 1e-15)),
        fits.Column("FWHM", "E", unit="ANGSTROMS", array=np.full(W.size, 3.0)), fits.Column("DATAQUAL", "I", array=(W > 3100).astype(int))],
        {"TARGETID": "GD71", "AIRORVAC": "vac"})
    s = read_spectrum(p)
    assert (s.meta["layout"], s.meta["id"], s.meta["flux_unit"], s.meta["wave_unit"], s.medium) == \
        ("fits-table", "GD71", "FLAM", "ANGSTROMS", "vacuum")
    assert s.meta["table_columns"]["error"] == "STATERROR"
    np.testing.assert_array_equal(s.mask, W <= 3100)
    np.testing.assert_allclose(s.ivar[~s.mask], 1 / 2e-16 ** 2, rtol=1e-5)


@pytest.mark.parametrize("unit, values", [("nm", W / 10), ("micron", W / 1e4), ("Angstrom", W), (None, W),
                                          ("log(Angstrom)", np.log10(W))])
def test_table_units(tmp_path, unit, values):
    s = read_spectrum(table(tmp_path / "t.fits", [fits.Column("WAVELENGTH", "D", unit=unit, array=values),
                                                  fits.Column("FLUX", "E", unit="FLAM", array=np.ones(W.size))]))
    np.testing.assert_allclose(s.wavelength, W, rtol=1e-9)
    assert s.meta["wave_unit"].startswith(unit or "Angstrom (no unit")


def test_gunn_stryker_descending_loglam(tmp_path):
    s = read_spectrum(table(tmp_path / "gs_45.fits", [fits.Column("WAVELENGTH", "E", unit="ANGSTROMS", array=W[::-1]),
                                                     fits.Column("FLUX", "E", unit="FLAM", array=np.arange(W.size, 0, -1.0))]), medium="air")
    assert (np.diff(s.wavelength) > 0).all() and s.flux[0] == 1 and s.medium == "air"
    s = read_spectrum(table(tmp_path / "ll.fits", [fits.Column("loglam", "D", array=np.log10(W)), fits.Column("flux", "E", array=np.ones(W.size)),
                                                  fits.Column("ivar", "E", array=np.full(W.size, 4.0))]))
    np.testing.assert_allclose(s.wavelength, W, rtol=1e-9)
    assert np.all(s.ivar == 4)


def test_table_bad_input(tmp_path):
    wl, fl = fits.Column("WAVELENGTH", "D", unit="Jy", array=W), fits.Column("FLUX", "E", array=np.ones(W.size))
    assert "column WAVELENGTH: wavelength unit 'Jy'" in error(table(tmp_path / "unit.fits", [wl, fl]))
    empty = [fits.Column("WAVELENGTH", "D", array=[]), fits.Column("FLUX", "E", array=[])]
    assert "has no rows" in error(table(tmp_path / "empty.fits", empty))
    dup = [fits.Column("WAVELENGTH", "D", array=np.r_[W[:10], W[9:]]), fits.Column("FLUX", "E", array=np.ones(W.size + 1))]
    assert "duplicate wavelengths" in error(table(tmp_path / "dup.fits", dup))
    nan = [fits.Column("WAVELENGTH", "D", array=np.full(W.size, np.nan)), fits.Column("FLUX", "E", array=np.ones(W.size))]
    assert "non-finite" in error(table(tmp_path / "nan.fits", nan))
    one = table(tmp_path / "one.fits", [fits.Column("WAVELENGTH", "D", array=W), fits.Column("FLUX", "E", array=np.ones(W.size))])
    assert "holds one spectrum" in error(one, row=1)


def test_table_of_spectra(tmp_path):
    rows = np.arange(4)[:, None] + np.ones((4, 300))
    p = table(tmp_path / "many.fits", [fits.Column("WAVE", "300D", unit="Angstrom", array=np.tile(np.linspace(4000, 7000, 300), (4, 1))),
                                       fits.Column("FLUX", "300E", array=rows)])
    assert [s.flux[0] for s in read_spectra(p)] == [1, 2, 3, 4]
    assert read_spectrum(p, row=3).meta["row"] == 3
    assert "holds 4 spectra; pass row=" in error(p)
    for bad in (4, -1, True, "1"):
        assert "out of range" in error(p, row=bad)


# ---------------------------------------------------------------- LAMOST coadd of several rows

def test_lamost_coadd_rows(tmp_path):
    n = 3909
    wl = np.tile(10 ** (3.5682 + 1e-4 * np.arange(n)), (3, 1))
    cols = [fits.Column("FLUX", f"{n}E", array=np.arange(1, 4)[:, None] * np.ones((3, n))),
            fits.Column("IVAR", f"{n}E", array=np.ones((3, n))), fits.Column("WAVELENGTH", f"{n}E", array=wl),
            fits.Column("ANDMASK", f"{n}E", array=np.zeros((3, n)))]
    prim = fits.PrimaryHDU(); prim.header.update(TELESCOP="LAMOST", FILENAME="spec-60000-TEST_sp01-001.fits", Z=0.0)
    p = tmp_path / "coadd.fits"
    fits.HDUList([prim, fits.BinTableHDU.from_columns(cols, name="COADD")]).writeto(p)
    every = read_spectra(p)
    assert [s.flux[0] for s in every] == [1, 2, 3]
    assert [s.meta["id"] for s in every] == [f"LAMOST:spec-60000-TEST_sp01-001#{i}" for i in range(3)]
    assert read_spectrum(p, row=2).flux[0] == 3
    assert "COADD table holds 3 spectra; pass row=" in error(p)


# ---------------------------------------------------------------- 6dFGS

def sixdf(path, vr=True, quality=4, z=0.02):
    keys = dict(OBSRA=10.0, OBSDEC=-40.0, Z=z, Z_HELIO=z, QUALITY=quality, TARGETNAME="g0040000-400000", CUNIT1="Angstroms")
    hdus = [fits.PrimaryHDU(np.zeros((4, 4), "f4"))] + [fits.ImageHDU(np.zeros((4, 4), "f4")) for _ in range(4)]
    frames = ((3900.0, 1.6, 3), (5600.0, 2.2, 3)) + (((3900.0, 1.6, 4),) if vr else ())
    for lo, step, nrow in frames:
        wl = lo + step * np.arange(900)
        d = np.stack([np.full(900, step), np.where(np.arange(900) % 50 == 0, 0.0, 0.01), np.zeros(900), wl][:nrow]).astype("f4")
        x = fits.ImageHDU(d); x.header.update(CRVAL1=lo, CDELT1=step, CRPIX1=1.0, CTYPE1="LINEAR", **keys); hdus.append(x)
    fits.HDUList(hdus).writeto(path, overwrite=True)
    return path


def test_6dfgs(tmp_path):
    s = read_spectrum(sixdf(tmp_path / "g.fits"))
    assert (s.meta["layout"], s.meta["frame"], s.meta["extension"], s.redshift, s.meta["survey"]) == ("6dfgs", "VR", 7, 0.02, "6dFGS")
    np.testing.assert_allclose(s.wavelength, 3900 + 1.6 * np.arange(900), rtol=1e-6)
    assert s.mask.sum() == 18 and np.allclose(s.ivar[~s.mask], 100, rtol=1e-4)   # variance 0 = no data
    v = read_spectrum(sixdf(tmp_path / "orphan.fits", vr=False))   # no VR: the first frame, grid from the header
    assert v.meta["frame"] == "single" and v.flux[0] == pytest.approx(1.6)
    q = read_spectrum(sixdf(tmp_path / "q.fits", quality=2))
    assert not q.meta["redshift_known"] and "QUALITY = 2" in q.meta["redshift_note"]
    assert "do not apply to layout '6dfgs'" in error(tmp_path / "g.fits", row=0)


# ---------------------------------------------------------------- specutils and the last resort

def test_specutils_fallback(tmp_path):
    nu = np.linspace(330, 750, 300)
    p = table(tmp_path / "freq.fits", [fits.Column("FREQ", "D", unit="THz", array=nu), fits.Column("FLUX", "D", unit="Jy", array=nu)])
    s = read_spectrum(p)
    assert s.meta["layout"] == "specutils" and s.meta["specutils_format"] == "tabular-fits" and s.meta["flux_unit"] == "Jy"
    assert (np.diff(s.wavelength) > 0).all() and s.flux[0] == pytest.approx(750)   # reversed: 750 THz is the bluest


@pytest.mark.parametrize("hdus", [
    lambda: [fits.PrimaryHDU(np.ones((30, 30), "f4"))],
    lambda: [fits.PrimaryHDU(), fits.BinTableHDU.from_columns([fits.Column("RA", "D", array=[1.0])])],
    lambda: [fits.PrimaryHDU()],
])
def test_nothing_reads_it(tmp_path, hdus):
    fits.HDUList(hdus()).writeto(tmp_path / "x.fits")
    msg = error(tmp_path / "x.fits")
    assert "unknown FITS layout" in msg and "specutils could not read it" in msg and "two-column CSV" in msg


def test_unknown_suffix_names_the_csv_route(tmp_path):
    (tmp_path / "spec.xyz").write_text("4000 1\n")
    assert "two-column CSV" in error(tmp_path / "spec.xyz")
