"""Run the paper notebooks (nbs/paper/[0-9]*.ipynb, or those named) with papermill at one profile, two at a time
where they do not wait on each other (nbs/paper/plan.yaml, run by speco3.schedule; one that times things runs alone), each into
DEST/<name>.ipynb with its log beside it.
Used by bin/reproduce and bin/test; exits 1 when a notebook failed (those waiting for it do not run).
Usage: python tools/run_papers.py --profile P --out-dir D --dest DEST [--jobs N] [--keep DIR] [--summary FILE] [--inline-figures]
                                  [--param NAME=VALUE ...] [--toy] [--processes N] [NOTEBOOK ...]
  --toy runs the profile's code path at toy size (nbs/paper/toy.yaml: sizes only, never a step count): the given --data
  and --coldstart are shrunk into copies of the same form under OUT/data/, and each toy size goes to the notebooks that
  declare it.
  --processes N trains every SFT and GRPO run in N processes (sft_overrides / grpo_overrides processes=N: accelerate
  launch, speco3.launch), one notebook at a time.
  --param passes a papermill parameter to every notebook whose parameters cell declares NAME (`model`, the base model,
  only to the notebooks that train from it: 04_sft, 04a_ablation_runs, 06_ablations); how bin/reproduce hands on an
  author's --data, --coldstart and --model.
  --out-dir is given relative to nbs/paper (where the notebooks run); --jobs defaults to 2 at smoke and cpu on a machine
  with two cores or more (each notebook's model work uses one thread), 1 at gpu and paper (one accelerator; a --toy run
  on a machine without CUDA as at cpu);
  SPECO3_JOBS overrides the default. DEST/cores says how many CPU threads each running notebook may use, so one that
  runs alone trains on every core (speco3.hf.share_cores). After a complete run (every paper notebook, each
  finished) the files under results/<target>/ and figures/ that it did not rewrite are removed (speco3.records.stale_outputs)."""
import argparse, ast, json, os, signal, sys
from pathlib import Path

root = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(root))
from speco3.records import keep_notebook, write_reproduce_summary, stale_outputs
from speco3.schedule import read_plan, plan_for, run_plan

PLAN = root / "nbs" / "paper" / "plan.yaml"  # which paper notebook waits for which, and which run alone

def default_jobs(profile, toy=False):
    if os.environ.get("SPECO3_JOBS"): return int(os.environ["SPECO3_JOBS"])
    return min(2, os.cpu_count() or 1) if profile in ("smoke", "cpu") or (toy and not cuda()) else 1

ONLY = {"model": ("04_sft", "04a_ablation_runs", "06_ablations")}  # a name that means another thing elsewhere (10_general_vlms: a served model)

def declared(notebook):
    "The parameter names a notebook's `parameters` cell assigns."
    cells = json.loads(Path(notebook).read_text())["cells"]
    src = next(("".join(c["source"]) for c in cells if "parameters" in c.get("metadata", {}).get("tags", [])), "")
    return {t.id for node in ast.parse(src).body if isinstance(node, ast.Assign) for t in node.targets if isinstance(t, ast.Name)}

def extra_params(name, notebook, params):
    "papermill -p arguments of `params` ({NAME: VALUE}) that this notebook takes."
    have = declared(notebook)
    return [x for k, v in params.items() if k in have and name in ONLY.get(k, (name,)) for x in ("-p", k, v)]

def toy_sizes(profile, params, out):
    "The toy parameters (nbs/paper/toy.yaml) and `params` with --data/--coldstart replaced by shrunk copies under out/data; --model made when absent."
    import shutil, yaml
    if profile not in ("gpu", "paper"): sys.exit(f"run_papers: --toy is the gpu and paper code path at toy size; {profile} is small already")
    toy = yaml.safe_load((root / "nbs" / "paper" / "toy.yaml").read_text())
    sizes = dict(toy["params"])
    if not cuda():  # the recipes' bf16 needs a GPU: a device fact, not a size
        for k in ("sft_overrides", "grpo_overrides"): sizes[k] = {**sizes[k], "bf16": False}
    params, data = dict(params), out / "data"
    if "data_dir" in params:
        from speco3.bench import export_published
        small = data / f"toy-{Path(params['data_dir']).name}"  # named after the given snapshot: the summaries name it
        shutil.rmtree(small, ignore_errors=True)
        params["data_dir"] = str(export_published(params["data_dir"], small, rows=int(toy["data_rows"])))
    if "coldstart_dir" in params:
        from speco3.coldstart import shrink_coldstart
        shutil.rmtree(data / "toy-coldstart", ignore_errors=True)
        params["coldstart_dir"] = str(shrink_coldstart(params["coldstart_dir"], data / "toy-coldstart", int(toy["coldstart_n"])))
    if "model" not in params:  # no hub here: the tiny Qwen2.5-VL, written as any local model folder
        from speco3.tiny import build_tiny
        if not (data / "toy-model" / "config.json").exists(): build_tiny(data / "toy-model", size="tiny", seed=0)
        params["model"] = str(data / "toy-model")
        print(f"--toy without --model: the tiny Qwen2.5-VL written to {os.path.relpath(data / 'toy-model', root)}", flush=True)
    return sizes, params, dict(toy=True, data_rows=toy["data_rows"], coldstart_n=toy["coldstart_n"], sizes=sizes)

def cuda():
    "Whether torch sees a CUDA device (False without torch)."
    try: import torch
    except ImportError: return False
    return torch.cuda.is_available()

def yaml_params(name, notebook, sizes):
    "papermill -y arguments of the toy sizes this notebook declares."
    import yaml
    have = declared(notebook)
    mine = {k: v for k, v in sizes.items() if k in have}
    return ["-y", yaml.safe_dump(mine, default_flow_style=True).strip()] if mine else []

def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--profile", required=True); p.add_argument("--out-dir", required=True); p.add_argument("--dest", required=True)
    p.add_argument("--jobs", type=int); p.add_argument("--keep"); p.add_argument("--summary"); p.add_argument("--inline-figures", action="store_true")
    p.add_argument("--param", action="append", default=[], metavar="NAME=VALUE")
    p.add_argument("--toy", action="store_true", help="the profile's code path at toy size (nbs/paper/toy.yaml)")
    p.add_argument("--processes", type=int, default=1, help="processes (GPUs) each SFT and GRPO run trains in (speco3.launch)")
    p.add_argument("notebooks", nargs="*")
    a = p.parse_args()
    if bad := [x for x in a.param if "=" not in x]: sys.exit(f"run_papers: --param {bad[0]!r} is not NAME=VALUE")
    params = dict(x.split("=", 1) for x in a.param)
    given = {k: params[v] for k, v in (("data", "data_dir"), ("coldstart", "coldstart_dir"), ("model", "model")) if v in params}
    if given:  # an author's inputs: checked before any notebook starts (a wrong folder costs seconds, not a training run)
        from speco3.paper import check_inputs
        try: print("inputs: " + json.dumps(check_inputs(**given)), flush=True)
        except (OSError, ValueError) as e: sys.exit(f"run_papers: {e}")
    paper = root / "nbs" / "paper"
    sizes, inputs = {}, {k: Path(v).name for k, v in given.items()}
    if a.toy: sizes, params, toy = toy_sizes(a.profile, params, (paper / a.out_dir).resolve()); inputs.update(toy)
    if a.processes < 1: sys.exit(f"run_papers: --processes {a.processes}: give 1 or more")
    if a.processes > 1:  # every SFT and GRPO run launched in N processes; one notebook at a time, so two never share the GPUs
        for k in ("sft_overrides", "grpo_overrides"): sizes[k] = {**sizes.get(k, {}), "processes": a.processes}
        inputs["processes"] = a.processes
    names = [Path(n).stem for n in a.notebooks] or sorted(f.stem for f in paper.glob("[0-9]*.ipynb"))
    if absent := [n for n in names if not (paper / f"{n}.ipynb").exists()]: sys.exit(f"run_papers: no notebook {', '.join(absent)} in nbs/paper")
    try: waits, alone = read_plan(PLAN); plan = plan_for(names, waits, PLAN.relative_to(root).as_posix())
    except (OSError, ValueError) as e: sys.exit(f"run_papers: {e}")
    jobs = a.jobs or (1 if a.processes > 1 else default_jobs(a.profile, a.toy))
    dest = Path(a.dest).resolve(); dest.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ)
    if a.inline_figures: env["MPLBACKEND"] = "module://matplotlib_inline.backend_inline"  # figures kept in the executed notebook
    rel = lambda path: os.path.relpath(path, root)  # the commands run in the repository: no machine path enters the notebooks' metadata
    commands = {n: ["papermill", f"nbs/paper/{n}.ipynb", rel(dest / f"{n}.ipynb"), "-p", "profile", a.profile, "-p", "out_dir", a.out_dir,
                    "-k", "python3", "--cwd", "nbs/paper", "--log-level", "WARNING", "--no-progress-bar",
                    *extra_params(n, paper / f"{n}.ipynb", params), *yaml_params(n, paper / f"{n}.ipynb", sizes)] for n in names}
    print(f"{len(names)} paper notebooks at profile {a.profile}, {jobs} at a time; executed notebooks and logs in {rel(dest)}/", flush=True)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # killed: run_plan stops the notebooks it started, kernels included
    out = run_plan(commands, plan, jobs=jobs, log_dir=dest, env=env, cwd=root, alone=alone, say=lambda s: print(s, flush=True),
                   cores_file=dest / "cores")
    done = {f"{n}.ipynb": out[n]["end"] - out[n]["start"] for n in sorted(out) if out[n]["status"] == "ok"}
    if a.keep:
        for n in (n for n, o in out.items() if o["status"] == "ok"): keep_notebook(dest / f"{n}.ipynb", Path(a.keep) / f"{n}.ipynb", root)
    ran = [o for o in out.values() if o["start"] is not None]
    stale = []
    if not a.notebooks and done and len(done) == len(out):  # a complete run: what it did not rewrite is an older run's (stale_outputs)
        stale = stale_outputs(paper / a.out_dir, since=min(o["start"] for o in ran))
        for f in stale: f.unlink()
        if stale: print(f"removed {len(stale)} file(s) this complete run did not rewrite (an older run's): "
                        + ", ".join(os.path.relpath(f, paper / a.out_dir) for f in stale), flush=True)
    if a.summary and done:
        rec = write_reproduce_summary(a.summary, done, paper / a.out_dir, a.profile, jobs=jobs, removed=stale,
                                      elapsed=max(o["end"] for o in ran) - min(o["start"] for o in ran), inputs=inputs or None)
        print(f"total {rec['total_wall_s']:.0f} s ({rec['notebooks_wall_s']:.0f} s of notebooks, {jobs} at a time); disk (MB): "
              + ", ".join(f"{k} {v / 1e6:.1f}" for k, v in rec["disk_bytes"].items()))
    if bad := [n for n, o in out.items() if o["status"] != "ok"]:
        sys.exit(f"run_papers: {len(bad)} notebook(s) did not finish: " + ", ".join(f"{n} ({out[n]['status']})" for n in bad))

if __name__ == "__main__": main()
