"""Fixtures shared by the test modules, and the skip policy: a test may skip only for want of a declared optional extra.

The declared extras are the verl environment and a GPU (`EXTRAS`); such a skip's reason starts with
"optional extra <name>:". Every other skip is a test that ran short: it is listed at the end of the run, and under
`bin/test` (which sets SPECO3_STRICT_SKIPS=1) it fails the run. SPECO3_REQUIRE_EXTRAS (names, comma- or
space-separated) takes extras off the declared list where they must be present: `tools/verl_env.sh` sets it to verl,
so in verl's own environment a skip for want of verl fails the run too."""
import os, re
import pytest

EXTRAS = ("verl", "gpu")   # what a test may lack and still let the suite pass
_SKIPS = []                # (test id, reason) of every skip in this session
LONGEST_FIRST = ("test_profiles.py", "test_bench.py", "test_multiprocess.py")  # the files that set the run's tail under xdist --dist loadfile


def pytest_collection_modifyitems(config, items):
    "Start the longest files first: xdist hands files to workers in collection order, so a long one started last decides the wall time."
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda it: rank.get(it.path.name, len(rank)))   # stable: every other file keeps its order


def optional_extra(name:str, why:str) -> str:
    "The skip reason for a test that needs the declared optional extra `name`."
    assert name in EXTRAS, f"{name!r} is not a declared optional extra ({', '.join(EXTRAS)})"
    return f"optional extra {name}: {why}"


def _reason(report) -> str:
    lr = report.longrepr
    text = lr[2] if isinstance(lr, tuple) and len(lr) == 3 else str(lr)
    return re.sub(r"^Skipped: ", "", text)


def _required() -> set:
    "The extras this run must have (SPECO3_REQUIRE_EXTRAS): a skip for want of one of them is not declared."
    return set(filter(None, re.split(r"[,\s]+", os.environ.get("SPECO3_REQUIRE_EXTRAS", ""))))


def _declared(reason:str) -> bool:
    m = re.match(rf"optional extra ({'|'.join(EXTRAS)}):", reason)
    return m is not None and m.group(1) not in _required()


def pytest_runtest_logreport(report):
    if report.skipped and not hasattr(report, "wasxfail") and report.when in ("setup", "call"):
        _SKIPS.append((report.nodeid, _reason(report)))


def pytest_collectreport(report):
    if report.skipped: _SKIPS.append((report.nodeid, _reason(report)))


def unexpected_skips() -> list:
    "The skips of this session that are not for a declared optional extra."
    return [(n, r) for n, r in _SKIPS if not _declared(r)]


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session, exitstatus):
    if os.environ.get("PYTEST_XDIST_WORKER"): return   # under pytest-xdist the controller sees every report and speaks once
    if os.environ.get("SPECO3_STRICT_SKIPS") and unexpected_skips() and session.exitstatus == 0:
        session.exitstatus = 1
    out = os.environ.get("SPECO3_SKIP_REPORT")   # bin/test prints these lines in its closing summary
    if out:
        with open(out, "a", encoding="utf-8") as f:
            for n, r in _SKIPS: f.write(f"pytest\t{'declared' if _declared(r) else 'UNEXPECTED'}\t{n}\t{r}\n")


def pytest_terminal_summary(terminalreporter):
    if not _SKIPS: return
    declared = {}
    for n, r in _SKIPS:
        if _declared(r): declared[r] = declared.get(r, 0) + 1
    terminalreporter.section("skips")
    for r, k in declared.items(): terminalreporter.write_line(f"{k:4d} skipped, {r}")
    for n, r in unexpected_skips(): terminalreporter.write_line(f"RAN SHORT {n}: {r}")


@pytest.fixture(scope="module")
def one_thread():
    "Tiny matrices: one torch thread is as fast, and many times faster when other jobs share the cores."
    torch = pytest.importorskip("torch")
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)
