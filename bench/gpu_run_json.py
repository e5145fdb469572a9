"""Write OUT_DIR/run.json for a bench/gpu_all.sh run: the machine, versions, commit, and what each step measured.

    python3 bench/gpu_run_json.py OUT_DIR [--started ISO_TIME] [--tiny]

Reads what bench/gpu_all.sh left in OUT_DIR: status.txt (`name: exit N, S s` per step), commands.txt
(`name<TAB>command`) and each step's <name>.txt, whose figure lines (s/spectrum, step times, peak memory, what fits,
what was skipped) become that step's `measured`. A step whose file is missing or says nothing measurable is recorded
as such, never dropped.
"""
import argparse, datetime, json, os, platform, re, subprocess, sys
from importlib import metadata
from pathlib import Path

FIGURES = re.compile(r"s/spectrum|per model step|tokens per step|step time|optimizer step \d+ done|"
                     r"peak GPU memory|per rollout|micro-batch \d+:|largest micro-batch|does not fit|by arithmetic|"
                     r"skipped|train_runtime|tokens in|trainable:|model:|h on this device")
PACKAGES = ("torch", "transformers", "trl", "peft", "accelerate", "datasets")


def steps(out):
    "{step: {command, exit_status, seconds, measured}} from gpu_all.sh's files in `out`."
    commands = dict(line.split("\t", 1) for line in _lines(out / "commands.txt") if "\t" in line)
    found = {}
    for line in _lines(out / "status.txt"):
        m = re.fullmatch(r"(\S+): exit (\d+), (\d+) s", line.strip())
        if not m: raise ValueError(f"{out / 'status.txt'}: cannot read the line {line!r} (want 'name: exit N, S s')")
        name, code, secs = m[1], int(m[2]), int(m[3])
        text = out / f"{name}.txt"
        measured = [l.strip() for l in _lines(text) if FIGURES.search(l)] if text.exists() else []
        ended = "time limit (exit 124)" if code == 124 else "ok" if code == 0 else f"failed (exit {code})"
        found[name] = dict(command=commands.get(name), exit_status=code, seconds=secs, ended=ended,
                           output=text.name if text.exists() else None, measured=measured or ["nothing measured"])
    return found


def _lines(path):
    return Path(path).read_text(errors="replace").splitlines() if Path(path).exists() else []


def _run(*cmd):
    try: return subprocess.run(cmd, capture_output=True, text=True, timeout=30).stdout.strip() or None
    except (OSError, subprocess.SubprocessError): return None


def machine():
    "The GPUs (nvidia-smi), CPU cores and package versions of this machine."
    gpus = _run("nvidia-smi", "--query-gpu=name,memory.total,driver_version", "--format=csv,noheader")
    versions = {}
    for p in PACKAGES:
        try: versions[p] = metadata.version(p)
        except metadata.PackageNotFoundError: versions[p] = None
    return dict(gpus=gpus.splitlines() if gpus else [], gpu_count=len(gpus.splitlines()) if gpus else 0,
                cpu_cores=os.cpu_count(), python=platform.python_version(), packages=versions)


def run_json(out, started=None, tiny=False):
    "The run.json record of `out` (a dict)."
    root = Path(__file__).resolve().parent.parent
    dirty = _run("git", "-C", str(root), "status", "--porcelain", "--untracked-files=no")
    what = ("bench/gpu_all.sh --tiny: the steps' code paths on CPU with the tiny model (not figures)" if tiny else
            "bench/gpu_all.sh: the GPU shapes no earlier figure covered, each step alone under its time limit")
    model = ("the tiny model on CPU (fp32), every assistant turn forced" if tiny else
             "random bf16 weights of the named architecture built on the GPU; every assistant turn forced (constrained "
             "decoding), so these are costs, not answers")
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    return dict(what=what, started_utc=started, finished_utc=now,
                git_commit=_run("git", "-C", str(root), "rev-parse", "HEAD"),
                uncommitted_changes=dirty.splitlines() if dirty else [],
                machine=machine(), model=model, steps=steps(Path(out)))


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("out", type=Path, help="the folder bench/gpu_all.sh wrote")
    p.add_argument("--started", default=None, help="when the run started (UTC, ISO 8601)")
    p.add_argument("--tiny", action="store_true", help="the run was gpu_all.sh --tiny")
    a = p.parse_args()
    if not (a.out / "status.txt").is_file():
        sys.exit(f"{a.out}: no status.txt here; give the folder bench/gpu_all.sh wrote")
    try: record = run_json(a.out, a.started, a.tiny)
    except ValueError as e: sys.exit(f"bench/gpu_run_json.py: {e}")
    (a.out / "run.json").write_text(json.dumps(record, indent=1) + "\n")
