"""Bounded cost on huge inputs (`speco3 vet --policy scripted`): a table read in small batches so `--limit` stops
early (bytes read counted), every row of a LAMOST coadd of several rows vetted under its own id (or the one --target
names), a spectrum far finer than any survey binned before vetting with its memory bounded, and ordinary survey files
untouched by any of it (the same records as with the binning switched off)."""
import io, subprocess, sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from speco3 import agent, expert, inputs
from speco3.agent import as_sample, expand_inputs, run, read_trajectories, sample_id
from speco3.cli import main
from speco3.io import MAX_SPECTRUM_PIXELS, _too_fine, coarsen, read_spectrum, real_spectra_dir, write_fits
from speco3.spectrum import Spectrum
from speco3.tasks import PAPER_TASKS

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
from huge_inputs import coadd   # the benchmark's multi-row LAMOST coadd, measured there and tested here

RAW = real_spectra_dir() / "raw"
FAST = ["--policy", "scripted", "--style", "fast", "--quiet"]


# ---------------------------------------------------------------- tables: --limit reads what it needs

class CountingFile(io.FileIO):
    "A file that counts the bytes read from it (class-wide, reset by the test)."
    n = 0
    def read(self, size=-1):
        b = super().read(size); CountingFile.n += len(b or b""); return b
    def readinto(self, buf):
        k = super().readinto(buf); CountingFile.n += k or 0; return k


def table(path, n_rows, n_pix=4000, row_group_size=None):
    "A parquet table of `n_rows` noisy spectra (random flux: incompressible, so bytes on disk follow rows read)."
    rng = np.random.default_rng(0)
    w = np.linspace(3800, 9000, n_pix)
    rows = [{"id": f"r{i:04d}", "wavelength": w, "flux": 1 + 0.1 * rng.normal(size=n_pix)} for i in range(n_rows)]
    pq.write_table(pa.Table.from_pylist(rows), path, row_group_size=row_group_size)
    return path


def bytes_read(monkeypatch, path, limit):
    "Bytes read from `path` to take the first `limit` items of it (None: all) as `speco3 vet` streams them."
    real = pq.ParquetFile
    monkeypatch.setattr(pq, "ParquetFile", lambda src, **kw: real(CountingFile(src), **kw))
    CountingFile.n = 0
    got = [r["id"] for r in inputs.stream_inputs([path], limit=limit)]
    monkeypatch.setattr(pq, "ParquetFile", real)
    return got, CountingFile.n


@pytest.mark.parametrize("row_group_size", [None, 50])   # pyarrow's default (one group of all 1200 rows), and 24 groups
def test_limit_reads_only_the_first_batch(tmp_path, monkeypatch, row_group_size):
    path = table(tmp_path / "t.parquet", 1200, row_group_size=row_group_size)   # 38 MB
    assert pq.ParquetFile(path).num_row_groups == (1 if row_group_size is None else 24)
    monkeypatch.setattr(inputs, "BATCH_BYTES", 2**18)   # batches of a few rows of 64 kB
    every, whole = bytes_read(monkeypatch, path, None)
    first, few = bytes_read(monkeypatch, path, 5)
    assert first == every[:5] == [f"r{i:04d}" for i in range(5)] and len(every) == 1200
    size = path.stat().st_size
    assert whole >= 0.9 * size, (whole, size)           # the count sees a whole read
    assert few < 0.15 * size, (few, size)               # five rows: a batch (and a page of each column), not the table


def test_batches_follow_the_size_of_a_row(tmp_path, monkeypatch):
    small, wide = table(tmp_path / "s.parquet", 20, n_pix=100), table(tmp_path / "w.parquet", 4, n_pix=200_000)
    assert inputs._batch_rows(pq.ParquetFile(small).metadata) == 1024                # 1.6 kB rows: a batch's most
    assert inputs._batch_rows(pq.ParquetFile(wide).metadata) == 1                    # rows of 3-4 MB: one at a time
    monkeypatch.setattr(inputs, "BATCH_BYTES", 2**25)
    assert 5 <= inputs._batch_rows(pq.ParquetFile(wide).metadata) <= 11           # a few to 32 MiB


# ---------------------------------------------------------------- a LAMOST coadd of several rows: every row

def test_every_coadd_row_is_vetted_under_its_own_id(tmp_path, capsys):
    path = coadd(tmp_path / "coadd.fits", 5)
    assert main(["vet", str(path), "--task", "cv", "--out", str(tmp_path / "all"), *FAST]) == 0
    assert capsys.readouterr().out.startswith("vetted 5 of 5: ")
    recs = read_trajectories(tmp_path / "all")
    assert [r["sample_id"] for r in recs] == [f"coadd.fits#{i}" for i in range(5)]
    assert all(r["status"] == "answered" for r in recs)
    fluxes = [as_sample(i, "cv").spectrum.flux[100] for i in expand_inputs([path])]   # each item reads its own row
    assert np.allclose(np.array(fluxes) / fluxes[0], 1 + np.arange(5) / 10)
    assert main(["vet", str(path), "--task", "cv", "--target", "3", "--out", str(tmp_path / "one"), *FAST]) == 0
    assert [r["sample_id"] for r in read_trajectories(tmp_path / "one")] == ["coadd.fits#3"]
    assert main(["vet", str(path), "--task", "cv", "--target", "7", "--out", str(tmp_path / "no"), *FAST]) == 1
    assert "target(s) 7 not in the inputs (their targets: 0, 1, 2, 3, 4)" in capsys.readouterr().err


def test_a_coadd_of_one_row_stays_one_sample(tmp_path):
    one = RAW / "lamost" / "spec-60591-LN042429N340750BM01_sp01-004.fits.gz"
    assert [sample_id(i) for i in inputs.stream_inputs([one])] == [one.name]


# ---------------------------------------------------------------- a spectrum far finer than any survey

def fine_spectrum(n):
    "`n` pixels over 3700-9100 Å (0.54 Å / n·10⁷ a pixel) with an H-alpha emission line."
    w = np.linspace(3700, 9100, n)
    f = 1 + 0.5 * np.exp(-0.5 * ((w - 6564.6) / 3) ** 2) + np.random.default_rng(0).normal(0, 0.02, n)
    return Spectrum(w, f, np.full(n, 2500.0), None, 0.0, {"id": "fine"})


PEAK = """import resource, sys
from speco3.cli import main
code = main(sys.argv[1:])
try: kb = next(int(l.split()[1]) for l in open("/proc/self/status") if l.startswith("VmHWM:"))  # this process's peak
except (OSError, StopIteration): kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss   # may count the parent's
print(code, kb)"""


def test_huge_spectrum_is_binned_and_its_memory_bounded(tmp_path):
    n = 1_000_000    # 1/10 of the 10-million-pixel case: before binning, its measurement step alone took 0.8 GB
    path = write_fits(fine_spectrum(n), tmp_path / "fine.fits")
    s = as_sample(path, "cv").spectrum
    assert s.meta["binned"] == {"pixels": n, "kms": 10.0} and len(s) < MAX_SPECTRUM_PIXELS
    cmd = [sys.executable, "-c", PEAK, "vet", str(path), "--task", "cv", "--out", str(tmp_path / "run"), *FAST]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout.split()
    code, peak_kb = int(out[-2]), int(out[-1])
    assert code == 0 and read_trajectories(tmp_path / "run")[0]["status"] == "answered"
    assert peak_kb < 600 * 1024, f"peak RSS {peak_kb / 1024:.0f} MB"   # about 0.3 GB binned; about 1 GB before


def test_binning_keeps_the_verdicts_of_an_oversampled_survey_spectrum():
    for name, want in (("sdss/sample_spectrum.fits", "wd"), ("lamost/spec-55862-B6212_sp06-005.fits", None)):
        s = read_spectrum(RAW / name)
        k = 16   # 16 pixels for each one (4 km/s), then binned back to 10 km/s
        grid = np.interp(np.arange((len(s) - 1) * k + 1) / k, np.arange(len(s)), np.log(s.wavelength))
        fine = s.resample(np.exp(grid))
        b = coarsen(fine)
        assert b.meta["binned"]["pixels"] == len(fine) and len(s) < len(b) < len(fine)
        before = [expert.decide(t, expert.measurements(s)).verdict for t in PAPER_TASKS]
        assert [expert.decide(t, expert.measurements(b)).verdict for t in PAPER_TASKS] == before, name
        if want: assert before[PAPER_TASKS.index(want)] == "YES"   # the white dwarf stays one


# ---------------------------------------------------------------- ordinary spectra: untouched

def test_no_real_spectrum_is_binned():
    t = pq.read_table(real_spectra_dir() / "spectra.parquet", columns=["id", "wavelength"]).to_pylist()
    assert len(t) == 781
    assert [r["id"] for r in t if _too_fine(np.asarray(r["wavelength"]), 10.0, MAX_SPECTRUM_PIXELS)] == []


def _records(out):
    "The records of a run with what varies from run to run (timings) left out."
    def turn(t): return {k: v for k, v in t.items() if k not in ("model_s", "tool_s")}
    def rec(r): return {**{k: v for k, v in r.items() if k != "timings"}, "turns": [turn(t) for t in r["turns"]]}
    return [rec(r) for r in read_trajectories(out)]


def test_survey_files_give_identical_records(tmp_path, monkeypatch):
    files = sorted((RAW / "lamost").glob("spec-*")) + sorted((RAW / "sdss").glob("spec-*"))
    for f in files: assert coarsen(s := read_spectrum(f)) is s
    pol = expert.ScriptedExpertPolicy()
    run(files, pol, tmp_path / "now", task="wd", progress=False, style="fast")
    monkeypatch.setattr(agent, "coarsen", lambda s: s)   # the path before binning existed
    run(files, pol, tmp_path / "before", task="wd", progress=False, style="fast")
    now = _records(tmp_path / "now")
    assert len(now) == len(files) and all(r["status"] == "answered" for r in now)
    assert now == _records(tmp_path / "before")
