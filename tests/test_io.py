"""Integration and bad-input tests for speco3.io: every raw survey file and every row of the real-spectra
table (data/real-spectra), the writers' round trips, and broken files of every kind. The notebook nbs/01_io.ipynb shows the API;
these tests are the exhaustive part that would be too long there."""
import csv, gzip, json, warnings
from pathlib import Path
import numpy as np
import pytest
from astropy.io import fits
from speco3.io import (SpectrumError, read_spectrum, read_spectra, real_spectra_dir, to_specvi_row, write_fits,
                       write_parquet)
from speco3.spectrum import Spectrum, lamost_wavelength

RS = real_spectra_dir()   # the collection the repository carries: these tests never skip for want of it
RAW = RS / "raw"
MANIFEST = list(csv.DictReader(open(RAW / "raw_manifest.csv")))
SURVEY_FILES = [m for m in MANIFEST if m["table_id"]]
DESI_FILES = [m for m in MANIFEST if m["survey"] == "desi"]

# layouts by content, written out by hand from the headers (DATA_V / EXTEN0 / HDU list) of each file
EXPECTED_LAYOUT = {
    "spec-55862-B6212_sp06-005.fits": "lamost-dr1-image", "spec-55862-B6212_sp08-147.fits": "lamost-dr1-image",
    "spec-55862-B6212_sp16-230.fits": "lamost-dr1-image", "spec-55859-F5902_sp01-001_dr7.fits.gz": "lamost-image",
    "spec-55863-M31_011N40_B1_sp05-242.fits.gz": "lamost-image", "spec-55863-M31_011N40_B1_sp07-211.fits.gz": "lamost-image",
    "spec-58397-EG014118N254444M01_sp03-031.fits": "lamost-image", "spec-58575-HD103621N361936B01_sp03-008.fits": "lamost-image",
    "spec-58575-HD103621N361936B01_sp03-030.fits": "lamost-image", "spec-58575-HD103621N361936B01_sp03-063.fits": "lamost-image",
    "spec-55859-F5902_sp01-013_dr8.fits.gz": "lamost-coadd", "spec-60591-LN042429N340750BM01_sp01-004.fits.gz": "lamost-coadd",
    "spec-60591-LN042429N340750BM01_sp01-005.fits.gz": "lamost-coadd",
}


@pytest.fixture(scope="module")
def table():
    import pandas as pd
    return pd.read_parquet(RS / "spectra.parquet").set_index("id", drop=False)


def sane(s: Spectrum, lo=3000, hi=11000):
    w = s.wavelength
    assert len(s) > 100
    assert np.isfinite(w).all() and (np.diff(w) > 0).all()
    assert lo <= w[0] and w[-1] <= hi, (w[0], w[-1])
    assert s.mask.shape == w.shape and s.good.any()
    for k in ("source", "id", "survey", "class", "subclass", "snr", "ra", "dec", "medium", "flux_unit", "layout"):
        assert k in s.meta, k


# --------------------------------------------------------------------------- every raw file

def test_manifest_lists_every_raw_file():
    on_disk = {str(p.relative_to(RS)) for p in RAW.rglob("*") if p.is_file() and p.suffix != ".csv"}
    assert on_disk == {m["file"] for m in MANIFEST}
    assert set(EXPECTED_LAYOUT) == {Path(m["file"]).name for m in MANIFEST if m["survey"] == "lamost"}


@pytest.mark.parametrize("m", SURVEY_FILES, ids=lambda m: Path(m["file"]).name)
def test_raw_survey_file(m, table):
    path = RS / m["file"]
    s = read_spectrum(path)
    sane(s)
    row = table.loc[m["table_id"]]
    assert s.meta["id"] == m["table_id"]
    assert s.meta["source"] == str(path)
    assert s.meta["medium"] == "vacuum"
    expected = EXPECTED_LAYOUT.get(path.name, "sdss-coadd")
    assert s.meta["layout"] == expected
    assert s.redshift == pytest.approx(row.redshift, abs=1e-9)
    cls, _, sub = row.subclass.partition("/")
    assert (s.meta["class"], s.meta["subclass"]) == (cls, sub or None)
    band = "g" if m["survey"] == "lamost" else "all"
    assert s.meta["snr"][band] == pytest.approx(row.snr, rel=1e-6)
    # the parquet came from this very file: same pixels, flux and ivar bit for bit (both float32 in origin)
    np.testing.assert_array_equal(s.flux, np.asarray(row.flux, dtype=np.float64))
    np.testing.assert_array_equal(np.where(s.good, s.ivar, 0), np.where(s.good, np.asarray(row.ivar, float), 0))
    # the parquet stores float32 wavelengths recomputed from the log-linear grid; the files' own rows agree to 5 mÅ
    np.testing.assert_allclose(s.wavelength, np.asarray(row.wavelength, float), rtol=0, atol=5e-3)
    assert s.meta["ra"] is not None and s.meta["dec"] is not None


@pytest.mark.parametrize("m", [m for m in MANIFEST if m["survey"] == "lamost"], ids=lambda m: Path(m["file"]).name)
def test_lamost_pixels_match_file(m):
    "No pixel is dropped or changed; andmask != 0 pixels are masked with their flux kept; snr for all five bands."
    path = RS / m["file"]
    s = read_spectrum(path)
    with fits.open(path) as h:
        if "COADD" in h:
            d = h["COADD"].data
            flux, ivar, andmask, wave = d["FLUX"][0], d["IVAR"][0], d["ANDMASK"][0], d["WAVELENGTH"][0]
        else:
            img = h[0].data
            flux, ivar, andmask = img[0], img[1], img[3]
            wave = img[2] if s.meta["layout"] == "lamost-image" else lamost_wavelength()[: img.shape[1]]
    np.testing.assert_array_equal(s.flux, flux.astype(float))
    np.testing.assert_array_equal(s.wavelength, np.asarray(wave, float))
    assert s.mask[andmask != 0].all()
    assert (s.mask == ((andmask != 0) | (ivar <= 0) | ~np.isfinite(flux))).all()
    assert sorted(s.meta["snr"]) == sorted("ugriz")
    assert s.meta["data_release"] is None if s.meta["layout"] == "lamost-dr1-image" else s.meta["data_release"].startswith("LAMOST DR")


@pytest.mark.parametrize("m", [m for m in MANIFEST if m["survey"] == "sdss"], ids=lambda m: Path(m["file"]).name)
def test_sdss_pixels_match_file(m):
    "All pixels kept; per-pixel and_mask bits (16-31) and ivar = 0 mask a pixel, fibre-level bits (0-15) go to meta."
    path = RS / m["file"]
    s = read_spectrum(path)
    with fits.open(path) as h:
        d = h["COADD"].data
        am = d["and_mask"].astype(np.int64)
        np.testing.assert_array_equal(s.flux, d["flux"].astype(float))
        np.testing.assert_array_equal(s.wavelength, 10.0 ** d["loglam"].astype(float))
        assert (s.mask == (((am & 0xFFFF0000) != 0) | (d["ivar"] <= 0))).all()
        assert len(s.meta["fibre_flags"]) == len({b for b in range(16) if ((am >> b) & 1).any()})


def test_lamost_dr1_grid_is_the_header_grid():
    for name, layout in EXPECTED_LAYOUT.items():
        if layout != "lamost-dr1-image": continue
        s = read_spectrum(RAW / "lamost" / name)
        np.testing.assert_allclose(s.wavelength, lamost_wavelength()[: len(s)], rtol=1e-12)


@pytest.mark.parametrize("m", DESI_FILES, ids=lambda m: Path(m["file"]).name)
def test_raw_desi_file(m):
    path = RS / m["file"]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        spectra = read_spectra(path)
    with fits.open(path) as h:
        fm = h["FIBERMAP"].data
        science = [i for i in range(len(fm)) if fm["TARGETID"][i] > 0 and fm["OBJTYPE"][i].strip() == "TGT"]
        arms = {a: (h[f"{a}_WAVELENGTH"].data, h[f"{a}_FLUX"].data, h[f"{a}_IVAR"].data, h[f"{a}_MASK"].data) for a in "BRZ"}
        usable = [i for i in science if any((arms[a][2][i] > 0).any() for a in "BRZ")]
    assert [s.meta["fibre_index"] for s in spectra] == usable
    assert len(caught) == len(science) - len(usable)  # empty science fibres are skipped loudly, not silently
    assert all(s.meta["objtype"] == "TGT" for s in spectra)
    for s in spectra:
        sane(s)
        i = s.meta["fibre_index"]
        assert s.meta["id"] == f"DESI:{s.meta['targetid']}" and s.meta["redshift_known"] is False and s.redshift == 0
        assert len(s) == 2751 + 2326 + 2881 - 51 - 126 and len(np.unique(s.wavelength)) == len(s)
        # outside the overlaps the merged spectrum is each arm untouched; inside, the ivar-weighted mean
        for a in "BRZ":
            w, f, iv, mk = arms[a][0], arms[a][1][i], arms[a][2][i], arms[a][3][i]
            others = [arms[b][0] for b in "BRZ" if b != a]
            alone = ~np.any([(w >= o[0] - 1e-6) & (w <= o[-1] + 1e-6) for o in others], axis=0)
            k = np.searchsorted(s.wavelength, w[alone] - 1e-6)
            np.testing.assert_allclose(s.wavelength[k], w[alone], atol=1e-6)
            np.testing.assert_array_equal(s.flux[k], f[alone].astype(float))
        for a, b in ("BR", "RZ"):
            wa, wb = arms[a][0], arms[b][0]
            lo, hi = wb[0], wa[-1]
            ka, kb = np.flatnonzero(wa >= lo - 1e-6), np.flatnonzero(wb <= hi + 1e-6)
            fa, ia = arms[a][1][i][ka].astype(float), arms[a][2][i][ka].astype(float)
            fb, ib = arms[b][1][i][kb].astype(float), arms[b][2][i][kb].astype(float)
            ia, ib = np.where(arms[a][3][i][ka] == 0, ia, 0), np.where(arms[b][3][i][kb] == 0, ib, 0)
            k = np.searchsorted(s.wavelength, wa[ka] - 1e-6)
            tot = ia + ib
            ok = tot > 0
            np.testing.assert_allclose(s.flux[k][ok], ((ia * fa + ib * fb) / np.where(ok, tot, 1))[ok], rtol=1e-10)
            np.testing.assert_allclose(s.ivar[k], tot, rtol=1e-6)


def test_desi_fibre_choice():
    path = RAW / "desi/coadd-sv3-dark-26065.fits"
    a = read_spectrum(path, index=2)
    b = read_spectrum(path, targetid=a.meta["targetid"])
    np.testing.assert_array_equal(a.flux, b.flux)
    assert read_spectrum(RAW / "desi/coadd-5-169-thru20210419.fits").meta["targetid"] == 39633300968442591
    for kw, msg in [(dict(), "2 science targets"), (dict(index=5), "out of range"), (dict(index=-1), "out of range"),
                    (dict(index=True), "out of range"), (dict(targetid=-5), "not in this file"),
                    (dict(targetid="39627866878511337"), "not in this file"), (dict(index=0), "no usable pixel"),
                    (dict(index=2, targetid=39627866878514741), "different fibres"), (dict(row=1), "row=")]:
        with pytest.raises(SpectrumError, match=msg) as e:
            read_spectrum(path, **kw)
        assert str(path) in str(e.value) and "\n" not in str(e.value)


def test_sdss_exposures():
    path = RAW / "sdss/sample_spectrum.fits"
    coadd = read_spectrum(path)
    exposures = [read_spectrum(path, exposure=i) for i in range(12)]
    assert all(e.meta["layout"] == "sdss-exposure" and e.meta["id"] == coadd.meta["id"] for e in exposures)
    assert len({e.meta["exposure"] for e in exposures}) == 12
    with pytest.raises(SpectrumError, match="out of range"): read_spectrum(path, exposure=12)
    with pytest.raises(SpectrumError, match="no exposure HDU named"): read_spectrum(path, exposure="X9")


# --------------------------------------------------------------------------- every row of the shared table

def test_every_parquet_row(table):
    spectra = read_spectra(RS / "spectra.parquet")
    assert len(spectra) == len(table) == 781

    for s, (_, row) in zip(spectra, table.iterrows()):
        survey_data = row.survey in ("LAMOST_LRS", "SDSS", "DESI")
        sane(s, *((3000, 11000) if survey_data else (0, 1e6)))
        assert s.meta["id"] == row.id and s.meta["layout"] == "real-spectra-row"
        assert s.meta["label"] == row.label and s.meta["survey"] == row.survey
        np.testing.assert_array_equal(s.flux, np.asarray(row.flux, float))
        np.testing.assert_array_equal(s.wavelength, np.asarray(row.wavelength, float))
        assert (s.ivar is None) == (len(row.ivar) == 0)
        assert s.meta["redshift_known"] == bool(np.isfinite(row.redshift))
        assert s.redshift == (row.redshift if np.isfinite(row.redshift) else 0.0)
        assert s.meta["medium"] == ("air" if "air" in row.wave_medium else "vacuum")
        assert s.meta["wave_medium"] == row.wave_medium
        assert not s.mask[np.isfinite(row.flux) & (np.asarray(row.ivar) > 0 if len(row.ivar) else True)].any()


def test_parquet_row_access(table):
    path = RS / "spectra.parquet"
    for i in (0, 300, 780):
        by_row = read_spectrum(path, row=i)
        by_id = read_spectrum(path, id=table.id.iloc[i])
        by_series = read_spectrum(table.iloc[i])
        by_dict = read_spectrum(table.iloc[i].to_dict())
        for s in (by_id, by_series, by_dict): np.testing.assert_array_equal(s.flux, by_row.flux)
        assert by_row.meta["source"] == f"{path} row {i}"
    for bad, msg in [(781, "out of range"), (-1, "out of range"), (True, "out of range"), ("3", "out of range")]:
        with pytest.raises(SpectrumError, match=msg): read_spectrum(path, row=bad)
    with pytest.raises(SpectrumError, match="no row with id"): read_spectrum(path, id="LAMOST:nope")
    with pytest.raises(SpectrumError, match="different rows"): read_spectrum(path, row=1, id=table.id.iloc[0])


# --------------------------------------------------------------------------- writers

@pytest.mark.parametrize("m", MANIFEST, ids=lambda m: Path(m["file"]).name)
def test_write_fits_round_trip(m, tmp_path):
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="skipped")  # the empty DESI fibre, tested above
        spectra = read_spectra(RS / m["file"])
    for s in spectra:
        back = read_spectrum(write_fits(s, tmp_path / "x.fits.gz"))
        for name in ("wavelength", "flux", "ivar", "mask"):
            np.testing.assert_array_equal(getattr(back, name), getattr(s, name))
        assert back.redshift == s.redshift
        assert {k: v for k, v in back.meta.items() if k not in ("source", "layout", "origin_source", "origin_layout")} == \
               {k: v for k, v in s.meta.items() if k not in ("source", "layout")}
        assert (back.meta["layout"], back.meta["origin_layout"]) == ("speco3-fits", s.meta["layout"])


def test_write_fits_odd_meta(tmp_path):
    s = Spectrum(np.linspace(4000, 5000, 200), np.r_[np.nan, np.ones(199)], np.ones(200), redshift=1.2345678901234567e-06,
                 meta={"source": "made up", "id": "o'brien & co/Å", "snr": {"g": float("nan")}, "flux_unit": "erg/s/cm²/Å",
                       "note": "x" * 500, "tuple": (1, 2), "np": np.float32(1.5)})
    back = read_spectrum(write_fits(s, tmp_path / "odd.fits"))
    assert back.meta["id"] == "o'brien & co/Å" and back.meta["note"] == "x" * 500 and back.meta["tuple"] == [1, 2]
    assert back.meta["np"] == 1.5 and np.isnan(back.meta["snr"]["g"]) and back.redshift == s.redshift
    np.testing.assert_array_equal(back.flux, s.flux)
    assert back.mask[0] and back.ivar[0] == 0
    with fits.open(tmp_path / "odd.fits") as h:
        assert h[0].header["OBJNAME"].startswith("o'brien") and h[0].header["Z"] == pytest.approx(s.redshift)


def test_write_parquet_round_trip(tmp_path):
    spectra = [read_spectrum(RS / m["file"]) for m in SURVEY_FILES] + read_spectra(RAW / "desi/coadd-sv3-dark-26065.fits")
    path = write_parquet(spectra, tmp_path / "mine.parquet")
    back = read_spectra(path)
    assert len(back) == len(spectra)
    for a, b in zip(back, spectra):
        for name in ("wavelength", "flux", "ivar", "mask"): np.testing.assert_array_equal(getattr(a, name), getattr(b, name))
        assert a.redshift == b.redshift
        assert {k: v for k, v in a.meta.items() if k not in ("source", "layout", "origin_source", "origin_layout")} == \
               {k: v for k, v in b.meta.items() if k not in ("source", "layout")}
    # a single spectrum, and the schema readable without our meta column
    import pyarrow.parquet as pq
    write_parquet(spectra[0], tmp_path / "one.parquet")
    assert read_spectrum(tmp_path / "one.parquet").meta["id"] == spectra[0].meta["id"]
    plain = pq.read_table(path).drop(["meta", "mask"]).slice(0, 1).to_pylist()[0]
    s = read_spectrum(plain)
    assert (s.meta["class"], s.meta["subclass"], s.meta["id"]) == (spectra[0].meta["class"], spectra[0].meta["subclass"], spectra[0].meta["id"])
    with pytest.raises(SpectrumError, match="nothing to write"): write_parquet([], tmp_path / "none.parquet")


def test_specvi_rows_round_trip(tmp_path):
    import pandas as pd
    from PIL import Image
    spectra = [read_spectrum(RS / m["file"]) for m in SURVEY_FILES[:4]]
    img = Image.new("RGB", (8, 6), "white")
    rows = [to_specvi_row(s, "cv", i % 2 == 0, index=i, prompt=[{"role": "user", "content": "<image> CV?"}], image=img)
            for i, s in enumerate(spectra)]
    assert rows[0]["images"][0]["bytes"][:4] == b"\x89PNG" and rows[1]["reward_model"] == {"ground_truth": "NO", "type": "rule"}
    assert json.dumps(rows[0]["extra_info"])  # plain JSON types all the way down
    pd.DataFrame(rows).to_parquet(tmp_path / "test_cv.parquet")
    back = read_spectra(tmp_path / "test_cv.parquet")
    for i, (a, s) in enumerate(zip(back, spectra)):
        np.testing.assert_array_equal(a.wavelength, s.wavelength)
        np.testing.assert_array_equal(a.flux, s.flux)
        assert a.redshift == s.redshift and a.ivar is None
        assert (a.meta["layout"], a.meta["id"], a.meta["index"], a.meta["data_source"]) == ("specvi-row", s.meta["id"], i, "cv")
        assert a.meta["ground_truth"] == ("YES" if i % 2 == 0 else "NO") and a.meta["survey"] == s.meta["survey"]
    one = read_spectrum(tmp_path / "test_cv.parquet", id=spectra[2].meta["id"])
    np.testing.assert_array_equal(one.flux, spectra[2].flux)
    for bad in ("maybe", "", None):
        with pytest.raises(SpectrumError, match="ground_truth"): to_specvi_row(spectra[0], "cv", bad)
    with pytest.raises(SpectrumError, match="data_source"): to_specvi_row(spectra[0], "", "YES")


# --------------------------------------------------------------------------- bad input

def one_line_error(fn, *names):
    with pytest.raises(SpectrumError) as e:
        fn()
    msg = str(e.value)
    assert "\n" not in msg and all(str(n) in msg for n in names), msg
    return msg


def test_missing_and_unknown_files(tmp_path):
    assert "no such file" in one_line_error(lambda: read_spectrum(tmp_path / "nope.fits"), tmp_path / "nope.fits")
    assert "not a file" in one_line_error(lambda: read_spectrum(tmp_path), tmp_path)
    (tmp_path / "x.xyz").write_text("4000 1\n")
    assert "unknown file type" in one_line_error(lambda: read_spectrum(tmp_path / "x.xyz"), "x.xyz")
    assert "expected a path" in one_line_error(lambda: read_spectrum(42))
    (tmp_path / "empty.fits").write_bytes(b"")
    assert "not a FITS file" in one_line_error(lambda: read_spectrum(tmp_path / "empty.fits"), "empty.fits")
    (tmp_path / "junk.fits.gz").write_bytes(gzip.compress(b"junk" * 100))
    assert "not a FITS file" in one_line_error(lambda: read_spectrum(tmp_path / "junk.fits.gz"), "junk.fits.gz")
    (tmp_path / "bad.parquet").write_bytes(b"PAR1 nonsense")
    assert "cannot read parquet" in one_line_error(lambda: read_spectrum(tmp_path / "bad.parquet", row=0), "bad.parquet")
    (tmp_path / "bin.txt").write_bytes(bytes(range(256)))
    one_line_error(lambda: read_spectrum(tmp_path / "bin.txt"), "bin.txt")


def test_unknown_fits_layouts(tmp_path):
    rng = np.random.default_rng(1)
    fits.PrimaryHDU(rng.normal(size=(50, 50))).writeto(tmp_path / "img.fits")
    fits.PrimaryHDU(rng.normal(size=(5, 4000)).astype("f4")).writeto(tmp_path / "five_rows.fits")  # LAMOST-shaped, no LAMOST header
    fits.HDUList([fits.PrimaryHDU(), fits.BinTableHDU.from_columns([fits.Column("ra", "D", array=[1.0])], name="CAT")]).writeto(tmp_path / "tab.fits")
    fits.HDUList([fits.PrimaryHDU(), fits.BinTableHDU.from_columns([fits.Column("x", "E", array=[1.0])], name="COADD")]).writeto(tmp_path / "coadd.fits")
    fits.PrimaryHDU().writeto(tmp_path / "empty_primary.fits")
    for name in ("img.fits", "five_rows.fits", "tab.fits", "coadd.fits", "empty_primary.fits"):
        assert "unknown FITS layout" in one_line_error(lambda: read_spectrum(tmp_path / name), name)


@pytest.mark.parametrize("name", ["lamost/spec-55862-B6212_sp08-147.fits", "lamost/spec-60591-LN042429N340750BM01_sp01-005.fits.gz",
                                  "sdss/sample_spectrum.fits", "desi/coadd-sv3-dark-26065.fits"])
def test_truncated_files(name, tmp_path):
    "Cut anywhere (block and HDU boundaries, inside gzip streams): always one SpectrumError, never astropy's."
    data = (RAW / name).read_bytes()
    raw = gzip.decompress(data) if name.endswith(".gz") else data
    with fits.open(RAW / name) as h:
        hdu_starts = [h.fileinfo(k)["hdrLoc"] for k in range(1, len(h))]
    cuts = sorted({100, 2880, 2 * 2880, len(raw) // 2, len(raw) - 2880, len(raw) - 1, *hdu_starts,
                   *np.random.default_rng(0).integers(1, len(raw), 6).tolist()})
    kw = dict(index=4) if "desi" in name else {}
    full = read_spectrum(RAW / name, **kw)
    for cut in cuts:
        for body, suffix in ((raw[:cut], ".fits"), (gzip.compress(raw[:cut], compresslevel=1), ".fits.gz"))[: 1 if cut in hdu_starts else 2]:
            p = tmp_path / f"cut{suffix}"
            p.write_bytes(body)
            try:
                s = read_spectrum(p, **kw)
            except SpectrumError as e:
                msg = str(e)
                assert str(p) in msg and "\n" not in msg
                assert any(w in msg for w in ("truncated", "not a FITS file", "corrupt", "unknown FITS layout")), msg
            else:  # a cut between HDUs that leaves every HDU the spectrum needs is a valid, smaller FITS file
                assert cut in hdu_starts and cut > hdu_starts[0], cut
                np.testing.assert_array_equal(s.flux, full.flux)
    p = tmp_path / "cutgz.fits.gz"
    p.write_bytes(data[: len(data) // 2]) if name.endswith(".gz") else p.write_bytes(gzip.compress(raw)[:-100])
    assert "gzip" in one_line_error(lambda: read_spectrum(p), p)


def test_corrupted_bytes_never_escape(tmp_path):
    "Random byte damage inside a real file either still reads or raises SpectrumError; nothing else escapes."
    rng = np.random.default_rng(2)
    warnings.simplefilter("ignore")  # astropy/numpy complain about the damaged cards and values, rightly
    for name in ("lamost/spec-55862-B6212_sp08-147.fits", "sdss/spec-0266-51602-0013.fits", "lamost/spec-58575-HD103621N361936B01_sp03-008.fits"):
        raw = bytearray((RAW / name).read_bytes())
        for trial in range(15):
            bad = bytearray(raw)
            pos = rng.integers(0, len(bad), 40)
            bad[pos[0]:pos[0] + 40] = rng.integers(0, 256, 40).astype(np.uint8).tobytes()[: len(bad[pos[0]:pos[0] + 40])]
            p = tmp_path / "damaged.fits"
            p.write_bytes(bytes(bad))
            try: read_spectrum(p)
            except SpectrumError as e: assert str(p) in str(e) and "\n" not in str(e)


def write(tmp_path, name, text):
    p = tmp_path / name
    p.write_text(text)
    return p


def test_text_inputs(tmp_path):
    s = read_spectrum(write(tmp_path, "a.txt", "# comment\n4000 1\n4001 2\n\n4002 3  # trailing\n"))
    assert s.ivar is None and list(s.flux) == [1, 2, 3] and s.meta["layout"] == "text" and s.meta["id"] == "a"
    s = read_spectrum(write(tmp_path, "b.csv", '"Wavelength (A)","Flux","Flux_Err"\n4000,1,0.5\n4001,2,-1\n4002,3,inf\n'))
    assert list(s.ivar) == [4, 0, 0] and list(s.mask) == [False, True, True] and list(s.flux) == [1, 2, 3]
    s = read_spectrum(write(tmp_path, "c.dat", "lambda flux ivar extra\n4000 1 2 9\n4001 2 2 9\n"), medium="air")
    assert list(s.ivar) == [2, 2] and s.meta["medium"] == "air"
    s = read_spectrum(write(tmp_path, "d.txt", "4000 1 0.5\n4001 2 0.5\n"))
    assert list(s.ivar) == [4, 4] and s.meta["text_columns"]["error"] == "error"
    s = read_spectrum(write(tmp_path, "e.txt", "4000 nan\n4001 inf\n4002 1\n"))
    assert list(s.mask) == [True, True, False] and np.isnan(s.flux[0]) and s.meta["n_nonfinite"] == 2
    assert read_spectrum(tmp_path / "d.txt", redshift=0.5).redshift == 0.5
    cases = {"unsorted.txt": ("4001 1\n4000 1\n4002 1\n", "unsorted"), "dup.txt": ("4000 1\n4000 1\n4001 1\n", "duplicate"),
             "empty.txt": ("# nothing\n", "no data rows"), "nanwave.txt": ("4000 1\nnan 1\n4002 1\n", "non-finite"),
             "words.txt": ("4000 1\n4001 one\n", "line 2"), "ragged.csv": ("4000,1\n4001,1,2\n", "line 2"),
             "one.txt": ("4000\n4001\n", "at least two columns"), "names.txt": ("x y\n1 2\n3 4\n", "cannot find wavelength"),
             "zero.txt": ("wavelength flux ivar\n4000 1 0\n4001 1 0\n", "no usable pixel"),
             "negwave.txt": ("-1 1\n4000 1\n", "non-positive")}
    for name, (text, msg) in cases.items():
        assert msg in one_line_error(lambda: read_spectrum(write(tmp_path, name, text)), name)
    assert "medium" in one_line_error(lambda: read_spectrum(tmp_path / "a.txt", medium="water"), "a.txt")
    assert "column names" in one_line_error(lambda: read_spectrum(tmp_path / "a.txt", columns=["wave", "flux", "err"]), "a.txt")


def test_row_inputs():
    base = {"id": "X:1", "survey": "LAMOST_LRS", "subclass": "STAR/G2", "wavelength": [4000.0, 4001, 4002],
            "flux": [1.0, 2, 3], "ivar": [], "redshift": float("nan"), "snr": 3.0, "wave_medium": "air (assumed)"}
    s = read_spectrum(base)
    assert (s.ivar, s.redshift, s.meta["redshift_known"], s.meta["medium"], s.meta["class"], s.meta["subclass"],
            s.meta["snr"]) == (None, 0.0, False, "air", "STAR", "G2", {"g": 3.0})
    for change, msg in [({"flux": [1.0, 2]}, "length mismatch"), ({"wavelength": [], "flux": []}, "empty"),
                        ({"wavelength": [4000, 3999, 4002]}, "unsorted"), ({"ivar": [0, 0, 0]}, "no usable pixel"),
                        ({"wavelength": [4000, np.inf, 4002]}, "non-finite"), ({"ivar": [1, 1]}, "length mismatch"),
                        ({"wavelength": None, "flux": None}, "not a spectrum row"), ({"redshift": -2}, "redshift")]:
        assert msg in one_line_error(lambda: read_spectrum({**base, **change}), "X:1")
    specvi = {"data_source": "cv", "extra_info": {"name": "n", "index": 0, "tools_kwargs": {}}}
    assert "create_kwargs" in one_line_error(lambda: read_spectrum(specvi))
    with pytest.raises(SpectrumError, match="do not apply"): read_spectrum(base, row=1)


def test_header_redshift_sentinel(tmp_path):
    with fits.open(RAW / "lamost/spec-58575-HD103621N361936B01_sp03-030.fits") as h:
        h[0].header["Z"] = -9999.0
        h.writeto(tmp_path / "noz.fits")
    s = read_spectrum(tmp_path / "noz.fits")
    assert (s.redshift, s.meta["redshift_known"]) == (0.0, False) and "-9999" in s.meta["redshift_note"]


def test_options_rejected_for_other_layouts():
    for kw in (dict(index=0), dict(targetid=1), dict(exposure=0), dict(row=0), dict(columns=["a"]), dict(medium="air")):
        with pytest.raises(SpectrumError, match="do not apply"):
            read_spectrum(RAW / "lamost/spec-55862-B6212_sp08-147.fits", **kw)


def test_real_spectra_dir_env(tmp_path, monkeypatch):
    (tmp_path / "spectra.parquet").write_bytes(b"")
    monkeypatch.setenv("SPECO3_REAL_SPECTRA", str(tmp_path))
    assert real_spectra_dir() == tmp_path
    monkeypatch.setenv("SPECO3_REAL_SPECTRA", str(tmp_path / "missing"))
    with pytest.raises(FileNotFoundError, match="no spectra.parquet"):
        real_spectra_dir()


def test_real_spectra_dir_is_the_bundled_copy(monkeypatch, tmp_path):
    monkeypatch.delenv("SPECO3_REAL_SPECTRA", raising=False)
    monkeypatch.chdir(tmp_path)   # found beside the package, wherever the caller stands
    root = real_spectra_dir()
    assert root == Path(__file__).resolve().parents[1] / "data" / "real-spectra"
    assert (root / "README.md").is_file() and (root / "manifest.csv").is_file()
