"""GPU hours of every paper notebook at the gpu and paper profiles, on 1 and 8 H100s, each figure with its source.

    python tools/gpu_cost.py [--bench results/gpu_bench] [--out results/gpu_cost]

Two inputs, nothing typed by hand that the code can give:
- the workload each notebook runs at a profile: conversations x epochs of SFT, GRPO rollouts, spectra vetted per model
  and how many models, read from speco3.profiles (benchmark sizes, SFT and GRPO recipes, evaluation), the notebooks'
  parameters cells (nbs/paper/*.ipynb: n_small, n_traj, replay, epochs), speco3.generalisation (the real mix's
  questions, the generalisation sets) and, for what only a run can tell (how many cold-start drafts pass the checks,
  which models a notebook vets rather than reuses), the cpu profile's run records in results/*/summary.json: the
  cold-start drafts per task are the same at cpu, gpu and paper (speco3.profiles.COLD_START), so the cpu run's count of
  accepted conversations stands for theirs;
- the per-unit rates measured by bench/gpu_*.py in `--bench` (results/gpu_bench/*.txt; the newer shapes in its
  shapes/ folder when a loan has run bench/gpu_all.sh there): seconds per spectrum vetted, per SFT conversation, per
  GRPO rollout, each of a Qwen2.5-VL-3B-shaped model.

The only GPU run so far was on one NVIDIA H200, so every H100 figure is derived, by assumptions named in ASSUMPTIONS
and written beside the table (results/gpu_cost/README.md). Writes cost.csv (one row per notebook x profile) and
cost_parts.csv (one row per training run or vetting pass, with its formula).
"""
import argparse, json, math, re, sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
GPU_PROFILES = ("gpu", "paper")
H200_TBPS, H100_TBPS = 4.8, 3.35  # HBM bandwidth, TB/s: NVIDIA's H200 (SXM and NVL) and H100 SXM datasheets
H100_GIB = 79.2                   # an H100 80 GB as torch reports it (85.0e9 bytes)
ASSUMPTIONS = {
    "h100": f"the measured H200 rates carry to an H100 SXM by kind of work: vetting and GRPO (whose steps are "
            f"mostly token-by-token generation, bound by memory bandwidth) take {H200_TBPS}/{H100_TBPS} = "
            f"{H200_TBPS / H100_TBPS:.2f} x as long (the ratio of the two datasheets' HBM bandwidths; for GRPO an "
            f"upper bound, as its forward and backward passes are compute-bound); SFT (compute-bound) takes as long "
            f"(both datasheets: 989 dense BF16 TFLOPS for the SXM parts; were the H200 the slower NVL part, H100 SFT "
            f"is faster)",
    "7b": "a Qwen2.5-VL-7B-shaped model takes (its parameters / the 3B's) x as long per token as the 3B one "
          "(decoding reads every weight once per token, training spends ~6 FLOPs per parameter per token); the "
          "parameter counts are those of the two published architectures (bench/gpu_vet.py), counted on the meta "
          "device",
    "8gpu": "8 GPUs split the work with ideal linear scaling (vetting: independent spectra; SFT and GRPO: FSDP "
            "data-parallel batches), so their GPU hours equal one GPU's and the wall time is an eighth: a lower "
            "bound "
            "(bench/gpu_fsdp.py measures the 2-GPU efficiency when a loan has 2 GPUs)",
    "fit": f"training fits a GPU when its weights, gradients and AdamW states (fp32 master weights: 16 bytes per "
           f"trainable parameter, 4 per frozen one, as the profiles' master_fp32 holds them; sharded over the GPUs "
           f"by FSDP) leave room in {H100_GIB} GiB; activations come on top",
    "master": "the benches train bf16 weights; the profiles keep fp32 master weights with bf16 autocast "
              "(master_fp32): the same bf16 matrix products, with casts and a larger optimizer step on top, counted "
              "at the benches' rate",
    "upper": "the 3B vetting and SFT rates were measured while another test shared the machine "
             "(results/gpu_bench/run.json): upper bounds",
}
PLURAL = {"spectrum": "spectra", "conversation": "conversation-epochs", "rollout": "rollouts"}
SECONDARY = "shapes"  # the folder under --bench where bench/gpu_all.sh's newer outputs go


@dataclass
class Rate:
    "Seconds per unit on the H200 for a model of `size`, and where the figure comes from."
    seconds: float
    unit: str
    source: str
    size: str = "3b"


def _figure(path, pattern, what):
    "The numbers `pattern` captures in `path`; a one-line error naming the file and the figure otherwise."
    text = Path(path).read_text() if Path(path).is_file() else None
    if text is None: raise FileNotFoundError(f"{path}: no such bench output (wanted: {what})")
    m = re.search(pattern, text)
    if not m: raise ValueError(f"{path}: no {what} in it (looked for /{pattern}/)")
    return [float(g.replace(",", "")) for g in m.groups()]


def rel(path):
    try: return str(Path(path).resolve().relative_to(ROOT))
    except ValueError: return Path(path).name


def rates(bench):
    "{kind: Rate} for vet, sft, grpo, and the parameter counts, from the bench outputs in `bench`."
    bench, new = Path(bench), Path(bench) / SECONDARY
    out = {}
    vet320 = new / "vet_320.txt"
    if vet320.is_file():
        s, = _figure(vet320, r"([\d.]+) s/spectrum", "s/spectrum")
        out["vet"] = Rate(s, "spectrum", f"measured: {rel(vet320)} ({s:.3f} s/spectrum, 320-token turns)")
    else:
        f = bench / "gpu_vet.txt"
        n, = _figure(f, r"(\d+) spectra, batch", "spectra timed")
        total, tool, rest = _figure(f, r"([\d.]+) s/spectrum .*?tool ([\d.]+) s, rest .*?([\d.]+) s",
                                    "s/spectrum")
        new_tokens, = _figure(f, r"([\d,]+) new tokens", "new tokens per model step")
        encode, generate = _figure(f, r"encode ([\d.]+) s, generate ([\d.]+) s", "encode and generate seconds")
        s = (encode + generate * 320 / new_tokens) / n + tool + rest
        out["vet"] = Rate(s, "spectrum", f"derived: ({encode} s encode + {generate} s generate x "
                          f"320/{new_tokens:.0f} new tokens per turn, the evaluation's max_new_tokens) / {n:.0f} "
                          f"spectra + {tool} s tool + {rest} s rest = {s:.2f} s/spectrum, from {rel(f)} (measured "
                          f"{total} s/spectrum with {new_tokens:.0f}-token turns)")
    f = bench / "gpu_sft.txt"
    wall, = _figure(f, r"wall per step with collation: ([\d.]+) s", "wall per step")
    batch, = _figure(f, r"steps of (\d+) conversations", "conversations per step")
    per_conv, = _figure(f, r"\(([\d,]+) per conversation\)", "tokens per conversation")
    out["sft"] = Rate(wall / batch, "conversation", f"derived: {wall} s wall per step / {batch:.0f} conversations "
                      f"({per_conv:,.0f} tokens each) = {wall / batch:.3f} s/conversation, from {rel(f)}")
    grpo = new / "grpo_gpu_profile.txt"
    f = grpo if grpo.is_file() and "step time" in grpo.read_text() else bench / "gpu_grpo.txt"
    step, n = _figure(f, r"step time \(.*?\): ([\d.]+) s for (\d+) rollouts", "GRPO step time")
    zooms, = _figure(f, r"(\d+) tool calls", "tool calls per rollout")
    out["grpo"] = Rate(step / n, "rollout", f"derived: {step} s per step / {n:.0f} rollouts ({zooms:.0f} zooms "
                       f"each) = {step / n:.3f} s/rollout, from {rel(f)}")
    sft7 = new / "sft_7b.txt"
    if sft7.is_file() and "wall per step with collation" in sft7.read_text():  # the 7B's full fine-tuning fitted
        wall, = _figure(sft7, r"wall per step with collation: ([\d.]+) s", "wall per step")
        batch, = _figure(sft7, r"steps of (\d+) conversations", "conversations per step")
        out["sft_7b"] = Rate(wall / batch, "conversation", f"measured: {rel(sft7)} ({wall} s wall per step / "
                             f"{batch:.0f} conversations = {wall / batch:.3f} s/conversation, 7B)", "7b")
    total, = _figure(bench / "gpu_sft.txt", r"([\d,.]+) M parameters", "parameter count")
    trainable, = _figure(bench / "gpu_sft.txt", r"trainable: ([\d,.]+) M", "trainable parameters")
    out["params_3b"], out["trainable_sft_3b"] = total * 1e6, trainable * 1e6
    return out


def architecture_params(size):
    "(total, vision-tower) parameters of bench/gpu_vet.py's 3b or 7b architecture, counted on the meta device."
    import torch
    from transformers import AutoModelForImageTextToText, Qwen2_5_VLConfig
    sys.path.insert(0, str(ROOT / "bench"))
    from gpu_vet import SIZES
    arch, tied = SIZES[size]
    config = Qwen2_5_VLConfig(text_config=arch["text"], vision_config=arch["vision"], tie_word_embeddings=tied)
    with torch.device("meta"):
        model = AutoModelForImageTextToText.from_config(config)
    count = lambda module: sum(p.numel() for p in module.parameters())
    return count(model), count(model.model.visual)


def parameters(cell_source, name):
    "The value a notebook's parameters cell gives `name` (a literal)."
    import ast
    for node in ast.parse(cell_source).body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == name for t in node.targets):
            return ast.literal_eval(node.value)
    raise KeyError(name)


def notebook_parameter(notebook, name):
    "`name`'s default in nbs/paper/<notebook>.ipynb's parameters cell; a one-line error when it has none."
    path = ROOT / "nbs" / "paper" / f"{notebook}.ipynb"
    for cell in json.loads(path.read_text())["cells"]:
        if "parameters" in cell.get("metadata", {}).get("tags", []):
            try: return parameters("".join(cell["source"]), name)
            except KeyError: break
    raise ValueError(f"{rel(path)}: its parameters cell has no literal {name!r}")


def summary(target, results):
    "The cpu run's results/<target>/summary.json (`speco3.summaries.read_summary`: a key it lacks is one line naming the file) and its name."
    from speco3.summaries import read_summary
    path = Path(results) / target / "summary.json"
    if not path.is_file():
        raise FileNotFoundError(f"{rel(path)}: the cpu run's record is missing (run bin/reproduce cpu first)")
    return read_summary(Path(results).parent, target), rel(path)


@dataclass
class Part:
    "One training run or vetting pass of a notebook at a profile."
    notebook: str
    profile: str
    kind: str   # sft, grpo, vet
    units: float  # conversations x epochs, rollouts, spectra
    what: str
    count_source: str


def counts(profile, results):
    "The workload sizes at `profile`, each with where it comes from: {name: (value, source)}."
    from speco3.profiles import stage_settings
    b = stage_settings("benchmark")[profile]
    per_task = lambda v: sum(v.values()) if isinstance(v, dict) else 5 * v
    c = {"test": (per_task(b["test"]), "speco3.profiles benchmark test rows over the five tasks"),
         "train": (per_task(b["train"]), "speco3.profiles benchmark train rows over the five tasks")}
    sft, _ = summary("sft", results)
    cold = stage_settings("cold start")
    ratio = cold[profile]["n_per_task"] / cold["cpu"]["n_per_task"]
    c["coldstart"] = (round(sft["coldstart"]["n"] * ratio), f"results/sft/summary.json (the cpu run's "
                      f"{sft['coldstart']['n']} accepted conversations x {ratio:g}, the ratio of cold-start drafts "
                      f"per task, speco3.profiles COLD_START)")
    ab, ab_src = summary("ablation_runs", results)
    sp = stage_settings("sft")
    cpu_epochs, cpu_batch = sp["cpu"]["num_train_epochs"], sp["cpu"]["per_device_train_batch_size"]
    steps = ab["runs"]["sft_notool"]["global_step"]
    notool = steps * cpu_batch / cpu_epochs
    c["coldstart_notool"] = (round(notool * ratio), f"{ab_src} (the cpu run's no-tool SFT: {steps} steps x "
                             f"{cpu_batch} / {cpu_epochs} epochs = {notool:.0f} conversations) x {ratio:g}")
    c["sft_epochs"] = (sp[profile]["num_train_epochs"], "speco3.profiles sft num_train_epochs")
    gp = stage_settings("grpo")[profile]
    g = f" x num_generations {gp['num_generations']}"
    if gp["max_steps"] > 0:  # a step count (cpu, smoke): each step trains prompts_per_update questions' rollouts
        c["grpo_rollouts"] = (gp["max_steps"] * gp["prompts_per_update"] * gp["num_generations"], f"speco3.profiles "
                              f"grpo max_steps {gp['max_steps']} x prompts_per_update {gp['prompts_per_update']}" + g)
    else:
        c["grpo_rollouts"] = (c["train"][0] * gp["num_train_epochs"] * gp["num_generations"],
                              f"train rows x speco3.profiles grpo num_train_epochs {gp['num_train_epochs']}" + g)
    n_small = notebook_parameter("04_sft", "n_small")
    c["small"] = (min(n_small, c["coldstart"][0] // 2), f"nbs/paper/04_sft n_small {n_small} (at most half the set)")
    n_traj, replay, epochs = (notebook_parameter("10b_qso_incremental", k) for k in ("n_traj", "replay", "epochs"))
    c["qso_sft"] = (round(n_traj / (1 - replay)) * epochs,
                    f"nbs/paper/10b_qso_incremental n_traj {n_traj} / (1 - replay {replay}) x epochs {epochs}")
    c["qso_test"] = (b["qso"], "speco3.profiles benchmark qso test rows")
    abl, abl_src = summary("ablations", results)
    vetted = sum(1 for s in abl["sources"].values() if s.startswith("evaluated"))
    c["ablation_models"] = (vetted, f"{abl_src} (models the cpu run vetted rather than reused)")
    gen, gen_src = summary("generalisation", results)
    stages = [s for s in gen["learned_stages"] if s["made_by"] != "02_main_results"]  # 02's: a CPU-sized tiny model
    makers = ", ".join(sorted({s["made_by"] for s in stages}))
    c["gen_stages"] = (len(stages), f"{gen_src} (learned stages made by {makers})")
    c["gen_rows"] = (gen_rows(b), "the generalisation sets but LAMOST-like (reused): 5 x cross_survey x 2 surveys + 3 "
                     "x cross_task + qso + cv_lowsnr, speco3.profiles benchmark")
    from speco3.generalisation import real_mix_asks
    from speco3.realmix import load_real
    spectra, tasks = real_mix_asks(load_real(), profile)
    c["real_mix"] = (len(spectra) * len(tasks),
                     f"speco3.generalisation.real_mix_asks: {len(spectra)} real spectra x {len(tasks)} questions")
    return c


def gen_rows(sizes):
    "Rows a learned stage answers in 11_generalisation beyond the LAMOST-like test set (reused from 04/05)."
    return 2 * 5 * sizes["cross_survey"] + 3 * sizes["cross_task"] + sizes["qso"] + sizes["cv_lowsnr"]


def workload(profile, results):
    "[Part] of every paper notebook that runs a model on the GPU at `profile` (the others: NO_GPU)."
    c = counts(profile, results)
    v, s = (lambda k: c[k][0]), (lambda *ks: "; ".join(c[k][1] for k in ks))
    e, test, rollouts, real = v("sft_epochs"), v("test"), v("grpo_rollouts"), v("real_mix")
    P = lambda nb, kind, units, what, *ks: Part(nb, profile, kind, units, what, s(*ks))
    return [
        P("04_sft", "sft", v("coldstart") * e, f"SFT: {v('coldstart')} conversations x {e} epochs",
          "coldstart", "sft_epochs"),
        P("04_sft", "vet", 2 * test, f"vet 2 models (SFT, base) x {test} test spectra", "test"),
        P("04a_ablation_runs", "grpo", 2 * rollouts, f"GRPO twice (RL only from the base; after the no-tool SFT) "
          f"x {rollouts:,} rollouts (no-tool rollouts counted as tool rollouts: an upper bound)",
          "grpo_rollouts", "train"),
        P("04a_ablation_runs", "sft", (v("coldstart_notool") + v("small")) * e,
          f"SFT: no-tool {v('coldstart_notool')} + small-set {v('small')} conversations x {e} epochs",
          "coldstart_notool", "small", "sft_epochs"),
        P("04a_ablation_runs", "vet", test, f"vet the small-set SFT model x {test} test spectra", "test"),
        P("05_grpo", "grpo", rollouts, f"GRPO: {rollouts:,} rollouts", "grpo_rollouts", "train"),
        P("05_grpo", "vet", test, f"vet the GRPO model x {test} test spectra", "test"),
        P("05a_small_grpo", "grpo", rollouts, f"GRPO from the small-set SFT: {rollouts:,} rollouts",
          "grpo_rollouts", "train"),
        P("05b_real_mix_sft", "vet", real, f"vet the SFT model on {real:,} real spectrum-questions", "real_mix"),
        P("06_ablations", "vet", v("ablation_models") * test,
          f"vet {v('ablation_models')} models x {test} test spectra", "ablation_models", "test"),
        P("07_real_mix", "vet", real, f"vet the SFT+GRPO model on {real:,} real spectrum-questions", "real_mix"),
        P("10b_qso_incremental", "sft", v("qso_sft"), f"SFT: {v('qso_sft')} conversation-epochs", "qso_sft"),
        P("10b_qso_incremental", "vet", 2 * v("qso_test") + test, f"vet 2 models x {v('qso_test')} QSO + the new "
          f"model x {test} test spectra", "qso_test", "test"),
        P("11_generalisation", "vet", v("gen_stages") * v("gen_rows"), f"vet {v('gen_stages')} learned stages x "
          f"{v('gen_rows'):,} spectra of the generalisation sets", "gen_stages", "gen_rows"),
    ]


NOT_ESTIMATED = "08_baselines"
NO_GPU = {  # notebook -> why it has no GPU hours at gpu and paper
    "00_tool_gallery": "none: plots only", "01_data": "none: builds the benchmark on CPUs",
    "01b_realism": "none: a CPU classifier on simulated and real spectra",
    "02_main_results": "none: the scripted expert and a 1.2 M-parameter tiny model (CPU-sized)",
    "03_cold_start": "none: scripted drafts and plots on CPUs",
    "03b_perception": "none: skipped at gpu and paper (a real VLM sees)",
    "03c_perception_control": "none: skipped at gpu and paper",
    NOT_ESTIMATED: "not estimated: small 1-D CNN specialists, which no GPU bench measures",
    "09_reasoning_audit": "none: the scripted expert and an LLM judge behind an API (its GPUs are the server's)",
    "10_general_vlms": "none here: the VLM is served behind an API (its GPUs are the server's)"}


def fits(profile, kind, size, n_gpus, p):
    "(fits, GiB per GPU) of the training states by ASSUMPTIONS['fit']; vetting holds bf16 weights only."
    from speco3.profiles import stage_settings
    total, vision = p[size]
    if kind == "vet": return 2 * total / 2**30 < H100_GIB, 2 * total / 2**30
    st = stage_settings(kind)[profile]
    trainable = total - vision if st["freeze_vision"] else total
    wb = 4 if st["master_fp32"] or not st["bf16"] else 2
    gib = (total * wb + trainable * (wb + 2 * wb)) / 2**30 / n_gpus
    return gib < H100_GIB, gib


def model_size(profile, kind):
    from speco3.profiles import stage_settings
    model = stage_settings("grpo" if kind == "grpo" else "sft")[profile]["model"]
    return "7b" if "7B" in model else "3b"


def cost(bench, results, params=None):
    "(rows, parts, rates): cost.csv's rows (one per notebook x profile), cost_parts.csv's, and the rates used."
    r = rates(bench)
    p = params or {s: architecture_params(s) for s in ("3b", "7b")}
    factor = {"vet": H200_TBPS / H100_TBPS, "grpo": H200_TBPS / H100_TBPS, "sft": 1.0}
    parts, rows = [], []
    for profile in GPU_PROFILES:
        by_nb = {}
        for part in workload(profile, results):
            size = model_size(profile, part.kind)
            rate = r["sft_7b"] if size == "7b" and part.kind == "sft" and "sft_7b" in r else r[part.kind]
            scale = p[size][0] / p[rate.size][0]  # a rate measured at the model's own size needs no scaling
            hours = part.units * rate.seconds * scale * factor[part.kind] / 3600
            (ok1, gib1), (ok8, gib8) = fits(profile, part.kind, size, 1, p), fits(profile, part.kind, size, 8, p)
            src = (f"derived: {part.units:,.0f} {PLURAL[rate.unit]} x {rate.seconds:.3f} s"
                   + (f" x {scale:.2f} (7B/3B parameters)" if scale != 1.0 else "")
                   + f" x {factor[part.kind]:.2f} (H100/H200); rate {rate.source}; count {part.count_source}")
            parts.append(dict(notebook=part.notebook, profile=profile, kind=part.kind, model=size.upper(),
                              work=part.what, units=part.units, gpu_hours_1xH100=round(hours, 2) if ok1 else None,
                              gpu_hours_8xH100=round(hours, 2) if ok8 else None, memory_gib_per_gpu_1=round(gib1, 1),
                              memory_gib_per_gpu_8=round(gib8, 1), source=src))
            by_nb.setdefault(part.notebook, []).append(parts[-1])
        rows += [notebook_row(nb, profile, by_nb.get(nb)) for nb in notebooks()]
    return rows, parts, r


def notebook_row(nb, profile, ps):
    "cost.csv's row of notebook `nb` at `profile` from its parts `ps` (None: no GPU work, NO_GPU says why)."
    if not ps:
        h = None if nb == NOT_ESTIMATED else 0.0
        return dict(notebook=nb, profile=profile, work=NO_GPU.get(nb, "none"), gpu_hours_1xH100=h, wall_hours_1xH100=h,
                    gpu_hours_8xH100=h, wall_hours_8xH100=h, source=NO_GPU.get(nb, "none: no model on a GPU"))
    nofit = [f"{x['kind']} needs {x['memory_gib_per_gpu_1']} GiB" for x in ps if x["gpu_hours_1xH100"] is None]
    one = None if nofit else round(sum(x["gpu_hours_1xH100"] for x in ps), 1)
    eight = round(sum(x["gpu_hours_8xH100"] for x in ps), 1)
    why = (f"1 GPU does not fit: {', '.join(nofit)} of states per GPU by arithmetic (> {H100_GIB} GiB); "
           if nofit else "")
    return dict(notebook=nb, profile=profile, work="; ".join(f"{x['work']} ({x['model']})" for x in ps),
                gpu_hours_1xH100=one, wall_hours_1xH100=one, gpu_hours_8xH100=eight,
                wall_hours_8xH100=round(eight / 8, 2),
                source=why + " + ".join(f"[{x['kind']}] {x['source']}" for x in ps))


def notebooks():
    return sorted(p.stem for p in (ROOT / "nbs" / "paper").glob("*.ipynb"))


def _h(x, wall=None):
    if x is None or (isinstance(x, float) and math.isnan(x)): return "—"
    return f"{x:,.1f}" + (f" ({wall:,.1f} h wall)" if wall is not None else "")


def readme(rows, r):
    "results/gpu_cost/README.md: the table, the rates and every assumption, all from this run."
    by = {(x["notebook"], x["profile"]): x for x in rows}
    busy = [nb for nb in notebooks() if any(by[(nb, prof)]["gpu_hours_8xH100"] != 0 for prof in GPU_PROFILES)]
    lines = ["# GPU hours of the paper notebooks (derived, not yet measured end to end)", "",
             "Written by `python tools/gpu_cost.py` from the bench outputs in `results/gpu_bench/` and the workloads "
             "the notebooks run at each profile (simulated data, SpecVI-Sim, throughout). GPU hours on 1 and 8 H100 "
             "80 GB; \"—\": does not fit one GPU (training states by arithmetic) or not estimated. Per-part formulas "
             "and sources: `cost_parts.csv`; per notebook: `cost.csv` (its `source` column).", ""]
    from speco3.summaries import markdown_table
    total, body = {k: 0.0 for k in ("gpu1", "gpu8", "paper1", "paper8")}, []
    for nb in busy:
        g, p = by[(nb, "gpu")], by[(nb, "paper")]
        body.append([nb, *(c for x in (g, p) for c in (_h(x["gpu_hours_1xH100"]), _h(x["gpu_hours_8xH100"], x["wall_hours_8xH100"]))), g["work"]])
        for prof, x in (("gpu", g), ("paper", p)):
            total[prof + "1"] += x["gpu_hours_1xH100"] or 0.0
            total[prof + "8"] += x["gpu_hours_8xH100"] or 0.0
    lines += markdown_table(["notebook", "gpu: 1 x H100", "gpu: 8 x H100", "paper: 1 x H100", "paper: 8 x H100",
                             "what runs (gpu; paper: same counts, 7B)"], body, compact=True).split("\n")
    lines.append(f"| all ({NOT_ESTIMATED} not estimated) | {total['gpu1']:,.1f} | "
                 f"{_h(total['gpu8'], total['gpu8'] / 8)} | {total['paper1']:,.1f} of what fits | "
                 f"{_h(total['paper8'], total['paper8'] / 8)} | |")
    idle = "; ".join(f"{nb} ({NO_GPU.get(nb, 'none')})" for nb in notebooks() if nb not in busy)
    lines += ["", f"No GPU work at gpu or paper: {idle}.", "",
              "## Rates (one NVIDIA H200, Qwen2.5-VL-3B-shaped random-weight model, forced turns)", ""]
    lines += [f"- {k}: {v.source}" for k, v in r.items() if isinstance(v, Rate)]
    lines += ["", "## Assumptions", "",
              "The measured rates are from one H200, the only GPU run so far: every H100 figure is derived.", ""]
    lines += [f"- {k}: {v}" for k, v in ASSUMPTIONS.items()]
    lines += ["", "Counts: the vetting passes assume 320-token turns (the evaluation's max_new_tokens at gpu and "
              "paper) and 3 zooms per spectrum, as the bench; no-tool models are counted at the tool models' rate (an "
              "upper bound). A loan that runs `bench/gpu_all.sh results/gpu_bench/shapes` replaces the derived "
              "320-token vetting rate and the 3-zoom GRPO rate with measured ones (`vet_320.txt`, "
              "`grpo_gpu_profile.txt`), and a 7B full fine-tuning that fits its GPU gives the 7B SFT rate "
              "(`sft_7b.txt`); rerun this tool then.", ""]
    return "\n".join(lines)


def write(rows, parts, r, out):
    import pandas as pd
    out = Path(out); out.mkdir(parents=True, exist_ok=True)
    pd.DataFrame(rows).to_csv(out / "cost.csv", index=False)
    pd.DataFrame(parts).to_csv(out / "cost_parts.csv", index=False)
    (out / "README.md").write_text(readme(rows, r))
    return out / "cost.csv", out / "cost_parts.csv", out / "README.md"


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bench", type=Path, default=ROOT / "results" / "gpu_bench",
                    help="the bench outputs (gpu_*.txt, shapes/)")
    ap.add_argument("--results", type=Path, default=ROOT / "results",
                    help="the cpu profile's run records (results/*/summary.json)")
    ap.add_argument("--out", type=Path, default=ROOT / "results" / "gpu_cost",
                    help="where cost.csv, cost_parts.csv and README.md go")
    a = ap.parse_args()
    try:
        for path in write(*cost(a.bench, a.results), a.out): print(f"wrote {rel(path)}")
    except (FileNotFoundError, ValueError) as e:
        sys.exit(f"tools/gpu_cost.py: {e}")
