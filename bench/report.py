"""The triage report at survey scale: size of the index and its pages, time to write them, and load and filter time
of the index in headless Chromium, for a hand-made run folder of N records (tiny PNGs; median of several runs).

    .venv/bin/python bench/report.py [--n 10000] [--runs 5]

The records cycle through every outcome (YES, NO, cannot judge, no verdict, unreadable) and the five paper tasks
(`tests/view_records.py`). Chromium times come from the page itself (`performance` marks written into the DOM that
`--dump-dom` prints): `parsed` is when the script after the list ran, `load` the load event (thumbnails load lazily,
so only those in view count), `filter`/`search` one outcome filter and one search over all rows. `wall` is the whole
chromium process (start-up included), with an empty page's for comparison.
"""
import argparse, re, statistics, subprocess, sys, tempfile, time
from pathlib import Path
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from browser import CHROMIUM, FLAGS              # noqa: E402
from view_records import fake_run                # noqa: E402
from speco3.view import write_report             # noqa: E402

PROBE = """<script>
const mark=(k,v)=>document.body.setAttribute('data-'+k,v.toFixed(1));
mark('parsed',performance.now());
let t0=performance.now();o.value='YES';apply();mark('filter',performance.now()-t0);
t0=performance.now();o.value='';q.value='s00424';apply();mark('search',performance.now()-t0);mark('shown',+shown.textContent);
addEventListener('load',()=>mark('load',performance.now()));
</script></body>"""


def chromium(page, profile):
    t0 = time.perf_counter()
    dom = subprocess.run([CHROMIUM, *FLAGS, f"--user-data-dir={profile}", "--dump-dom", page.as_uri()],
                         capture_output=True, text=True, timeout=300).stdout
    return time.perf_counter() - t0, dict(re.findall(r'data-(\w+)="([\d.]+)"', dom[:dom.find(">", dom.find("<body")) + 1]))


def main(n, runs):
    if not CHROMIUM: sys.exit("needs headless Chromium (Debian: apt-get install chromium)")
    with tempfile.TemporaryDirectory() as d:
        run = Path(d, "run")
        t0 = time.perf_counter(); fake_run(run, n); made = time.perf_counter() - t0
        took = []
        for _ in range(runs):
            t0 = time.perf_counter(); index = write_report(run); took.append(time.perf_counter() - t0)
        pages = list((run / "report_files").glob("*.html"))
        print(f"{n} records (run folder made in {made:.1f} s); write_report median {statistics.median(took):.2f} s over {runs} runs")
        print(f"index {index.stat().st_size / 1e6:.2f} MB; {len(pages)} pages, {sum(p.stat().st_size for p in pages) / 1e6:.1f} MB "
              f"in all, largest {max(p.stat().st_size for p in pages) / 1e3:.1f} kB")
        probe = index.with_name("probe.html")
        probe.write_text(index.read_text(encoding="utf-8").replace("</body>", PROBE), encoding="utf-8")
        empty = index.with_name("empty.html"); empty.write_text("<!doctype html><title>empty</title>")
        chromium(probe, Path(d, "profile"))                          # warm the disk cache and the profile
        got = [chromium(probe, Path(d, "profile")) for _ in range(runs)]
        base = statistics.median(chromium(empty, Path(d, "profile"))[0] for _ in range(runs))
        med = lambda k: statistics.median(float(m[k]) for _, m in got)
        assert all(float(m["shown"]) == 1 for _, m in got), got        # the search found its one record
        print(f"chromium (median of {runs}): parsed {med('parsed'):.0f} ms, load {med('load'):.0f} ms, outcome filter "
              f"{med('filter'):.0f} ms, search {med('search'):.0f} ms; process wall {statistics.median(w for w, _ in got):.2f} s "
              f"(empty page {base:.2f} s)")


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=10000); ap.add_argument("--runs", type=int, default=5)
    main(**vars(ap.parse_args()))
