"""Headless Chromium (Debian's `chromium` package) for the tests that open pages in a real browser."""
import os, shutil, subprocess
import pytest

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--hide-scrollbars"]

def need_chromium():
    "Skip the test without chromium, or fail it when SPECO3_REQUIRE_CHROMIUM is set (as CI sets it)."
    if CHROMIUM: return
    if os.environ.get("SPECO3_REQUIRE_CHROMIUM"): pytest.fail("SPECO3_REQUIRE_CHROMIUM is set but no chromium is installed")
    pytest.skip("headless Chromium not installed (Debian: apt-get install chromium); .ci/run installs it")

def chromium(tmp_path, *args):
    "Run chromium with a profile folder in `tmp_path` (so nothing is left elsewhere); the finished process."
    profile = tmp_path / "profile"
    return subprocess.run([CHROMIUM, *FLAGS, f"--user-data-dir={profile}", *args], capture_output=True, text=True, timeout=120)
