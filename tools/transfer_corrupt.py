"""Do the corruptions of `speco3.corrupt` make GaiaNet-like specialists transfer better to real spectra? (issue 43, item 1)

Train rows: the build's own (`bench._Writer.train_rows` with `train_direct=0.5`: variant C of tools/transfer_rows.py,
half hard negatives, half drawn directly from the archive mix), and the same rows with one corruption applied to half of
the train spectra (positives and negatives, chosen at random; `bench.corrupt_share`, exactly as the build would apply it),
one variant per corruption; then "C+kept": all the corruptions that passed the rule below, together, on half the spectra.

Each variant is trained with the baselines' own trainer (`baselines.train_specialist("gaianet", ...)`, cpu settings of
`profiles.BASELINES`) for every trainer seed, and scored on

* the DEV half of the real-spectra collection only (`realmix.load_real`, `meta['split'] == 'dev'`): YES rate on real
  non-targets (FP), on real targets (recall), and the threshold-free real AUC;
* the build's own hard test split (SpecVI-Sim (simulated), rejection-sampled negatives, 1:10): balanced accuracy.

Keep rule (means over trainer seeds, then over the tasks, each difference against C): a corruption is kept when it
raises real AUC or real recall (mean difference > 0), raises real FP by at most 2 points and costs at most 3 points of
sim hard balanced accuracy.

Usage (from the repository root, speco3 importable):

    python tools/transfer_corrupt.py --quick                       # smoke: tiny sizes, 3 epochs, one seed
    python tools/transfer_corrupt.py --phase singles --tasks wd    # one task's C and single-corruption runs (parts/)
    python tools/transfer_corrupt.py --phase kept                  # decide from parts/, run C+kept, write the tables
    python tools/transfer_corrupt.py                               # both phases, every task, in one process
"""
from __future__ import annotations
import argparse, json, os, pickle, platform, subprocess, sys, tempfile, time
from collections import Counter
from pathlib import Path
import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from transfer_rows import _NoBar, rows_of, real_metrics, sim_metrics, pct, snr_q  # the sibling experiment's own scoring
from speco3.bench import weak_classifier, split_counts, resolve_sizes, _Writer, _split_list, corrupt_share
from speco3.baselines import train_specialist
from speco3.corrupt import CORRUPTIONS
from speco3.profiles import BASELINES
from speco3.realmix import load_real, wilson, TARGETS

SHARE = 0.5  # share of train spectra corrupted in every corruption variant
FP_MAX, SIM_COST_MAX = 2.0, 3.0  # keep rule: points of real FP allowed up, points of sim hard balanced accuracy allowed down


def data(task, sz, build_seed, cache):
    "The build's train rows (train_direct as in sz, no corruption) and its hard test split, cached between phases."
    f = Path(cache) / f"{task}-seed{build_seed}-{sz['train'][task]}-{sz['train_direct']}.pkl"
    if f.is_file(): return pickle.loads(f.read_bytes())
    clf = weak_classifier(task, sz["weak_train"], build_seed)
    (tr_p, tr_n), (te_p, te_n) = split_counts(sz["train"][task], 1), split_counts(sz["test"][task], sz["ratio"])
    w = _Writer(Path(tempfile.gettempdir()), build_seed, False, "fast", _NoBar())
    pos, neg = w.hard_set(task, task, tr_p + te_p, tr_n + te_n, clf, sz)  # exactly bench._build_into's calls
    (p_train, p_test), (n_train, n_test) = _split_list(pos, tr_p), _split_list(neg, tr_n)
    p_train, n_train = w.train_rows(task, p_train, n_train, {**sz, "train_corrupt": 0.0, "train_corruptions": []})
    d = dict(p_train=p_train, n_train=n_train, p_test=p_test, n_test=n_test, train=w.train[task])
    f.parent.mkdir(parents=True, exist_ok=True)
    f.write_bytes(pickle.dumps(d))
    return d


def variant_rows(task, d, kinds, build_seed):
    "Train positives and negatives with `kinds` on SHARE of them (bench.corrupt_share with the build's tag)."
    P, N = d["p_train"], d["n_train"]
    both, idx = corrupt_share(P + N, kinds, SHARE if kinds else 0.0, build_seed, f"{task}/train")
    return both[:len(P)], both[len(P):], len(idx)


def run_variant(task, name, kinds, d, dev, Xh, yh, seeds, fit_kw, build_seed):
    pos, neg, n_cor = variant_rows(task, d, kinds, build_seed)
    rows, X = rows_of(task, pos, neg)
    runs = []
    for seed in seeds:
        sp = train_specialist("gaianet", task, rows, seed=seed, X=X, **fit_kw)
        r = dict(seed=seed, info=sp.info, real=real_metrics(sp, dev), sim_hard=sim_metrics(sp, Xh, yh))
        runs.append(r)
        print(f"  {task} {name} seed {seed}: real FP {pct(r['real']['fp']['rate'])} recall {pct(r['real']['recall']['rate'])} "
              f"AUC {r['real']['auc']:.3f} sim hard bal {pct(r['sim_hard']['bal_acc'])} ({sp.info['epochs']} ep, {sp.info['wall_s']} s)", flush=True)
    return dict(kinds=list(kinds), corrupted=n_cor, n_train=len(pos) + len(neg), snr_all=snr_q(pos + neg), runs=runs)


def part_from_log(path, task):
    "A part rebuilt from the per-seed lines a singles run printed (rates as printed, counts from the real dev half's sizes)."
    import re
    dev = [s for s in load_real() if s.meta["split"] == "dev"]
    n_t = sum(s.meta["label"] in TARGETS[task] for s in dev)
    n = dict(fp=len(dev) - n_t, recall=n_t)
    pat = re.compile(rf"^  {task} (\S+) seed (\d+): real FP ([\d.]+) recall ([\d.]+) AUC ([\d.]+) sim hard bal ([\d.]+) \((\d+) ep, ([\d.]+) s\)")
    part = dict(task=task, train=None, variants={}, run=dict(command=f"(per-seed lines of {path.name})", wall_s=float("nan")))
    for line in path.read_text().splitlines():
        m = pat.match(line)
        if not m: continue
        name, seed, fp, rc, auc, bal, ep, _ = m.groups()
        name = "C" if name == "C" else name.removeprefix("C+")
        r = dict(seed=int(seed), info=dict(epochs=int(ep), best_epoch="?"), sim_hard=dict(bal_acc=float(bal) / 100), real=dict(auc=float(auc)))
        for key, v in (("fp", fp), ("recall", rc)):
            r["real"][key] = dict(rate=float(v) / 100, k=int(round(float(v) / 100 * n[key])), n=n[key])
        part["variants"].setdefault(name, dict(kinds=[] if name == "C" else [name], runs=[], source="log"))["runs"].append(r)
    return part


def means(v):
    "Mean over seeds of real FP, recall, AUC and sim hard balanced accuracy (FP, recall and bal. acc. in points)."
    R = v["runs"]
    return dict(fp=100 * np.mean([r["real"]["fp"]["rate"] for r in R]), recall=100 * np.mean([r["real"]["recall"]["rate"] for r in R]),
                auc=float(np.mean([r["real"]["auc"] for r in R])), sim_bal=100 * np.mean([r["sim_hard"]["bal_acc"] for r in R]))


def decide(parts):
    "{corruption: {deltas (mean over tasks of variant - C), keep, why}} by the keep rule."
    out = {}
    for k in CORRUPTIONS:
        if not all(k in p["variants"] for p in parts.values()): continue
        ds = {t: {m: means(p["variants"][k])[m] - means(p["variants"]["C"])[m] for m in ("fp", "recall", "auc", "sim_bal")} for t, p in parts.items()}
        mean = {m: float(np.mean([ds[t][m] for t in ds])) for m in ("fp", "recall", "auc", "sim_bal")}
        better = mean["auc"] > 0 or mean["recall"] > 0
        keep = bool(better and mean["fp"] <= FP_MAX and mean["sim_bal"] >= -SIM_COST_MAX)
        why = ("kept" if keep else "dropped") + ": " + ", ".join([
            f"AUC {mean['auc']:+.3f}", f"recall {mean['recall']:+.1f}", f"FP {mean['fp']:+.1f}", f"sim bal. acc. {mean['sim_bal']:+.1f}"])
        out[k] = dict(per_task=ds, mean=mean, keep=keep, why=why)
    return out


def write_table(parts, dec, kept, run, out):
    L = ["# Corrupted train rows vs real-spectra transfer of GaiaNet-like specialists (issue 43, item 1)", "",
         f"Train rows: SpecVI-Sim (simulated), the build's own (`train_direct=0.5`: half hard, half direct archive negatives "
         f"= variant C of bench/results/transfer_rows/), {run['train_rows']} rows per task; `C+k`: corruption k "
         f"(`speco3.corrupt`) on {SHARE:.0%} of the train spectra, chosen at random (`bench.corrupt_share`, as the build applies it). "
         f"Trainer seeds {run['seeds']}, build seed {run['build_seed']}.", "",
         "Real = DEV half of the real-spectra collection (never the test half). FP = YES rate on real non-targets; recall = YES "
         "rate on real targets (brackets: 95 % Wilson interval of the counts pooled over seeds); real AUC = P(a real target "
         "scores above a real non-target). Sim hard = the build's own test split (SpecVI-Sim (simulated), rejection-sampled "
         "negatives, 1:10), balanced accuracy. Numbers in % (AUC as a fraction), means over seeds.", "",
         "| task | variant | real FP | real recall | real AUC | sim hard bal. acc. |", "|---|---|---|---|---|---|"]
    for t, p in parts.items():
        for name, v in p["variants"].items():
            R = v["runs"]
            fk, fn = sum(r["real"]["fp"]["k"] for r in R), sum(r["real"]["fp"]["n"] for r in R)
            rk, rn = sum(r["real"]["recall"]["k"] for r in R), sum(r["real"]["recall"]["n"] for r in R)
            (flo, fhi), (rlo, rhi), m = wilson(fk, fn), wilson(rk, rn), means(v)
            L.append(f"| {t} | {name} | {m['fp']:.1f} [{pct(flo)}–{pct(fhi)}] | {m['recall']:.1f} [{pct(rlo)}–{pct(rhi)}] | {m['auc']:.3f} | {m['sim_bal']:.1f} |")
    L += ["", f"## Keep rule and decision", "",
          f"Differences against C, mean over seeds and then over the tasks {list(parts)}: a corruption is kept when real AUC or real "
          f"recall goes up (> 0), real FP goes up by at most {FP_MAX:g} points and sim hard balanced accuracy goes down by at "
          f"most {SIM_COST_MAX:g} points.", "",
          "| corruption | Δ real FP | Δ real recall | Δ real AUC | Δ sim hard bal. acc. | decision |", "|---|---|---|---|---|---|"]
    for k, d in dec.items():
        m = d["mean"]
        L.append(f"| {k} | {m['fp']:+.1f} | {m['recall']:+.1f} | {m['auc']:+.3f} | {m['sim_bal']:+.1f} | {'**kept**' if d['keep'] else 'dropped'} |")
    L += ["", f"Kept: {', '.join(kept) if kept else 'none'}.", "",
          "## Per task differences against C", "", "| task | corruption | Δ FP | Δ recall | Δ AUC | Δ sim bal. acc. |", "|---|---|---|---|---|---|"]
    for k, d in dec.items():
        for t, x in d["per_task"].items():
            L.append(f"| {t} | {k} | {x['fp']:+.1f} | {x['recall']:+.1f} | {x['auc']:+.3f} | {x['sim_bal']:+.1f} |")
    L += ["", "## Per seed", "", "| task | variant | seed | real FP | real recall | real AUC | sim hard bal. acc. | epochs (best) |", "|---|---|---|---|---|---|---|---|"]
    for t, p in parts.items():
        for name, v in p["variants"].items():
            for r in v["runs"]:
                f, c = r["real"]["fp"], r["real"]["recall"]
                L.append(f"| {t} | {name} | {r['seed']} | {pct(f['rate'])} ({f['k']}/{f['n']}) | {pct(c['rate'])} ({c['k']}/{c['n']}) | "
                         f"{r['real']['auc']:.3f} | {pct(r['sim_hard']['bal_acc'])} | {r['info']['epochs']} ({r['info']['best_epoch']}) |")
    L += ["", f"Commands: {'; '.join(f'`{c}`' for c in run['commands'])}. Wall time of each part (s): "
          + ", ".join(f"{k} {v:.0f}" for k, v in run["wall_s"].items()) + "."]
    (out / "table.md").write_text("\n".join(L) + "\n")


def meta(args, argv, t0):
    try: commit = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    except Exception: commit = None
    return dict(command="python " + " ".join([sys.argv[0]] + (argv if argv is not None else sys.argv[1:])), git_commit=commit,
                nproc=os.cpu_count(), python=platform.python_version(), torch=torch.__version__, torch_threads=torch.get_num_threads(),
                wall_s=round(time.time() - t0, 1), seeds=args.seeds, build_seed=args.build_seed,
                finished_utc=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                data_label="SpecVI-Sim (simulated) train and sim test rows; real = dev half of data/real-spectra")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    ap.add_argument("--quick", action="store_true", help="smoke: smoke-profile sizes, 3 epochs, seed 0")
    ap.add_argument("--phase", choices=["singles", "kept", "all"], default="all")
    ap.add_argument("--tasks", nargs="+", default=["wd", "gm", "cv"])
    ap.add_argument("--corruptions", nargs="+", default=list(CORRUPTIONS))
    ap.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    ap.add_argument("--build-seed", type=int, default=0)
    ap.add_argument("--out", default="bench/results/transfer_corrupt")
    ap.add_argument("--from-logs", default=None, help="folder of <task>.log (stdout of a singles run) for tasks without parts/<task>.json")
    ap.add_argument("--cache", default=str(Path(tempfile.gettempdir()) / "speco3-transfer-corrupt"), help="cached train/test spectra")
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    t0 = time.time()
    sz = resolve_sizes("smoke" if args.quick else "cpu", {"train_direct": 0.5})
    st = dict(BASELINES["smoke" if args.quick else "cpu"])
    if args.quick: args.seeds = args.seeds[:1]
    fit_kw = dict(max_epochs=st["max_epochs"], patience=st["patience"], batch_size=st["batch_size"], device="cpu")
    bad = [t for t in args.tasks if not TARGETS.get(t)] + [k for k in args.corruptions if k not in CORRUPTIONS]
    if bad: raise SystemExit(f"unknown or target-less: {bad}")
    out = Path(args.out); (out / "parts").mkdir(parents=True, exist_ok=True)
    dev = [s for s in load_real() if s.meta["split"] == "dev"]

    def prepared(t):
        d = data(t, sz, args.build_seed, args.cache)
        _, Xh = rows_of(t, d["p_test"], d["n_test"])
        return d, Xh, np.r_[np.ones(len(d["p_test"]), bool), np.zeros(len(d["n_test"]), bool)]

    if args.phase in ("singles", "all"):
        for t in args.tasks:
            tt = time.time()
            d, Xh, yh = prepared(t)
            print(f"[{t}] data ready in {time.time() - tt:.0f} s; train rows {d['train']}", flush=True)
            part = dict(task=t, train=d["train"], variants={})
            for name, kinds in [("C", [])] + [(k, [k]) for k in args.corruptions]:  # the part is written after each variant
                part["variants"][name] = run_variant(t, "C" if not kinds else f"C+{name}", kinds, d, dev, Xh, yh, args.seeds, fit_kw, args.build_seed)
                part["run"] = meta(args, argv, tt)
                (out / "parts" / f"{t}.json").write_text(json.dumps(part, indent=1, default=float) + "\n")
    if args.phase in ("kept", "all"):
        parts = {t: (json.loads((out / "parts" / f"{t}.json").read_text()) if (out / "parts" / f"{t}.json").is_file()
                     else part_from_log(Path(args.from_logs) / f"{t}.log", t)) for t in args.tasks}
        dec = decide(parts)
        kept = [k for k in CORRUPTIONS if k in dec and dec[k]["keep"]]
        print("decision:", {k: d["why"] for k, d in dec.items()}, flush=True)
        if len(kept) > 1:  # a single kept one is its own C+k row already
            for t in args.tasks:
                tt = time.time()
                d, Xh, yh = prepared(t)
                parts[t]["variants"]["kept"] = run_variant(t, "C+kept", kept, d, dev, Xh, yh, args.seeds, fit_kw, args.build_seed)
                parts[t]["variants"]["kept"]["run"] = meta(args, argv, tt)
                (out / "parts" / f"{t}.json").write_text(json.dumps(parts[t], indent=1, default=float) + "\n")
        run = dict(seeds=args.seeds, build_seed=args.build_seed, train_rows=sz["train"][args.tasks[0]],
                   commands=sorted({p["run"]["command"] for p in parts.values()} | {meta(args, argv, t0)["command"]}),
                   wall_s={**{f"singles {t}": p["run"]["wall_s"] for t, p in parts.items()},
                           **{f"kept {t}": p["variants"]["kept"]["run"]["wall_s"] for t, p in parts.items() if "kept" in p["variants"]},
                           "this command": round(time.time() - t0, 1)})
        summary = dict(share=SHARE, rule=dict(fp_max_points=FP_MAX, sim_cost_max_points=SIM_COST_MAX), decision=dec, kept=kept,
                       means={t: {v: means(x) for v, x in p["variants"].items()} for t, p in parts.items()},
                       run={**meta(args, argv, t0), **run}, real_dev=len(dev), real_dev_labels=dict(Counter(s.meta["label"] for s in dev)))
        (out / "summary.json").write_text(json.dumps(summary, indent=1, default=float) + "\n")
        write_table(parts, dec, kept, run, out)
        print(f"wrote {out}/table.md, summary.json; kept {kept}", flush=True)


if __name__ == "__main__":
    main()
