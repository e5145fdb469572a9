"""Which train rows make a GaiaNet-like specialist say YES to real non-targets? (issue 43, item 1)

For the tasks with real targets (wd, gm, cv: `speco3.realmix.TARGETS`) this builds training sets of the size of the
cpu build's train split (`BENCHMARK['cpu']['train']` rows per task, balanced by `bench.split_counts` as the build does)
in several variants, trains the GaiaNet-like specialist on each with the baselines' own trainer
(`baselines.train_specialist`, cpu settings of `profiles.BASELINES`), and measures

* on the DEV half of the real-spectra collection only (`realmix.load_real`, `meta['split'] == 'dev'`): the YES rate on
  real non-targets (overall, per real label and per survey) and the recall on real targets, with Wilson intervals;
* on SpecVI-Sim (simulated) test sets: a directly drawn one (positives from `kinds_for(task)`, negatives from
  `archive_mix(task)`, no rejection) and the build's own hard test split (rejection-sampled negatives).

Variants (the positives are the build's train positives in every variant; only the negatives change):

  A  as the build makes them: `bench._Writer.hard_set` (the build's own method: rejection-sampled hard negatives from
     `rejection_sample`, plus `REAL_CONTAMINANTS` for wd), split with `_split_list` as `bench._build_into` does
  B  negatives drawn directly from the task's archive mix (`bench.sample(archive_mix(task))`), no rejection
  C  half of A's hard negatives, half of B's direct archive negatives
  D  negatives drawn directly from the task's confusers (`kinds_for(task, 'confuser')`): the earlier side experiment
  E  like C, but every train spectrum (positives too) observed by an instrument drawn at random among lamost/sdss/desi
     (`bench.reobserve`): tests whether the single-instrument (LAMOST) rows are what fails to transfer
  N20, N40  C's negatives; positives with a share 0.2 / 0.4 of classical novae (`bench.train_positives` with
     train_nova_share, the build's own function: cv only, the last share of the train positives replaced by `nova`;
     other tasks' positives unchanged)

Data are fixed by --build-seed (0: the cpu build's seed, so variant A is the cpu build's train rows); the trainer's seed
(weights, validation split, batch order) runs over --seeds.

Usage (from the repository root, speco3 importable):

    python tools/transfer_rows.py --quick                    # smoke: tiny sizes, 3 epochs, one seed (a few minutes)
    python tools/transfer_rows.py --seeds 0 1 2 3 4          # the real run -> bench/results/transfer_rows/
    python tools/transfer_rows.py --variants A B --tasks wd --max-epochs 30 --out my_run
    python tools/transfer_rows.py --tasks cv --variants C N20 N40 --seeds 0 1 2 --out bench/results/cv_novae
"""
from __future__ import annotations
import argparse, json, platform, subprocess, sys, tempfile, time, os
from collections import Counter, defaultdict
from pathlib import Path
import numpy as np
import torch

from speco3 import bench
from speco3.bench import (archive_mix, sample, weak_classifier, split_counts, resolve_sizes, reobserve, specvi_row,
                          _Writer, _split_list, _seed, train_positives)
from speco3.baselines import prepare, train_specialist, vet_real, _channels
from speco3.profiles import BENCHMARK, BASELINES
from speco3.realmix import load_real, wilson, TARGETS
from speco3.simulate import kinds_for

VARIANTS = {"A": "build: positives + rejection-sampled hard negatives (bench's own hard_set)",
            "B": "positives + negatives drawn directly from archive_mix(task)",
            "C": "positives + half hard negatives, half direct archive negatives",
            "D": "positives + negatives drawn directly from kinds_for(task, 'confuser')",
            "E": "as C, each train spectrum re-observed by a random instrument (lamost/sdss/desi)",
            "N20": "as C, with 20 % of the cv train positives classical novae (bench.train_positives, train_nova_share 0.2)",
            "N40": "as C, with 40 % of the cv train positives classical novae (bench.train_positives, train_nova_share 0.4)"}
NOVA_SHARES = {"N20": 0.2, "N40": 0.4}
INSTRUMENTS = ("lamost", "sdss", "desi")


class _NoBar:
    "Stands in for the build's tqdm bar."
    def set_description(self, *a, **k): pass
    def set_postfix_str(self, *a, **k): pass
    def update(self, *a, **k): pass


def snr_q(spectra):
    snr = np.array([s.meta["snr"]["g"] for s in spectra], float)
    return np.nanpercentile(snr, [10, 50, 90]).round(2).tolist()


def build_rows(task, sz, build_seed):
    "The build's train positives and negatives and its test split for `task` (bench's own functions, same seed and tags)."
    clf = weak_classifier(task, sz["weak_train"], build_seed)
    (tr_p, tr_n), (te_p, te_n) = split_counts(sz["train"][task], 1), split_counts(sz["test"][task], sz["ratio"])
    w = _Writer(Path(tempfile.gettempdir()), build_seed, False, "fast", _NoBar())
    pos, neg = w.hard_set(task, task, tr_p + te_p, tr_n + te_n, clf, sz)
    (p_train, p_test), (n_train, n_test) = _split_list(pos, tr_p), _split_list(neg, tr_n)
    p_raw, p_train = p_train, train_positives(task, p_train, build_seed, sz)  # as the build (its train_nova_share)
    return dict(p_train=p_train, p_raw=p_raw, n_train=n_train, p_test=p_test, n_test=n_test, acceptance=w.acceptance[task])


def variant_sets(task, built, build_seed):
    "{variant: (positives, negatives)} of train spectra."
    P, H = built["p_train"], built["n_train"]
    n = len(H)
    direct = sample(archive_mix(task), n, build_seed, f"transfer_rows/{task}/direct")
    conf = sample(kinds_for(task, "confuser"), n, build_seed, f"transfer_rows/{task}/confusers")
    half = n // 2
    C = H[:half] + direct[:n - half]
    out = {"A": (P, H), "B": (P, direct), "C": (P, C), "D": (P, conf)}
    for v, share in NOVA_SHARES.items():  # the build's own swap, at this share, of the pre-swap train positives
        out[v] = (train_positives(task, built["p_raw"], build_seed, {"train_nova_share": share}), C)
    # E: C's spectra, each object re-observed by a random instrument (a fresh instrument chain for every spectrum)
    rng = np.random.default_rng(_seed(build_seed, "transfer_rows", task, "instrument"))
    allx = P + C
    inst = rng.choice(INSTRUMENTS, len(allx))
    E = [None] * len(allx)
    for i_name in INSTRUMENTS:
        idx = [i for i in range(len(allx)) if inst[i] == i_name]
        if not idx: continue
        views = reobserve([allx[i] for i in idx], i_name, build_seed, f"transfer_rows/{task}/E")
        for i, v in zip(idx, views): E[i] = v
    out["E"] = (E[:len(P)], E[len(P):])
    return out


def rows_of(task, pos, neg):
    "SpecVI-Bench rows (no images) as the build writes them, and their prepared arrays (as train_baselines prepares them)."
    rows = [specvi_row(s, task, True, i) for i, s in enumerate(pos)] + [specvi_row(s, task, False, len(pos) + i) for i, s in enumerate(neg)]
    return rows, prepare(rows, derivative=True)


def rate(k, n):
    lo, hi = wilson(k, n)
    return dict(k=int(k), n=int(n), rate=(k / n if n else float("nan")), lo=lo, hi=hi)


def auc(pos, neg):
    "P(score of a random target > score of a random non-target), ties half: threshold-free ranking of real spectra."
    pos, neg = np.asarray(pos, float)[:, None], np.asarray(neg, float)[None, :]
    return float(((pos > neg).mean() + 0.5 * (pos == neg).mean())) if pos.size and neg.size else float("nan")


def real_metrics(sp, dev):
    recs, unscored = vet_real([sp], dev)
    by_id = {s.meta["id"]: s for s in dev}
    tgt = [r for r in recs if r["truth"] == "YES"]
    non = [r for r in recs if r["truth"] == "NO"]
    yes = lambda rs: sum(r["prediction"] == "YES" for r in rs)
    out = dict(recall=rate(yes(tgt), len(tgt)), fp=rate(yes(non), len(non)), unscored=len(unscored), by_label={}, by_survey={},
               auc=auc([r["confidence"] for r in tgt], [r["confidence"] for r in non]))
    for key, field in (("by_label", "label"), ("by_survey", "survey")):
        groups = defaultdict(list)
        for r in non: groups[by_id[r["sample_id"]].meta.get(field)].append(r)
        out[key] = {g: rate(yes(rs), len(rs)) for g, rs in sorted(groups.items())}
    out["target_by_survey"] = {}
    groups = defaultdict(list)
    for r in tgt: groups[by_id[r["sample_id"]].meta.get("survey")].append(r)
    out["target_by_survey"] = {g: rate(yes(rs), len(rs)) for g, rs in sorted(groups.items())}
    out["targets"] = {r["sample_id"]: dict(yes=r["prediction"] == "YES", confidence=float(r["confidence"])) for r in tgt}
    return out


def sim_metrics(sp, X, y):
    p = sp.proba(_channels(sp.model, X))
    yes = p >= sp.threshold
    tpr, fpr = yes[y].mean(), yes[~y].mean()
    return dict(acc=float((yes == y).mean()), tpr=float(tpr), fpr=float(fpr), bal_acc=float((tpr + 1 - fpr) / 2),
                n_pos=int(y.sum()), n_neg=int((~y).sum()))


def pct(x): return f"{100 * x:.1f}"


def write_table(res, args, out):
    L = [f"# Transfer of GaiaNet-like specialists by train-row variant (issue 43, item 1)", "",
         "Train rows: SpecVI-Sim (simulated), LAMOST-like unless variant E; positives are the cpu build's train positives "
         f"in every variant (variants N: with a share of them swapped for classical novae, train_nova_share). Sizes: {res['sizes']['train_rows']} train rows per task (balanced; 20 % held out for early "
         f"stopping by `train_specialist`). Trainer seeds: {args.seeds}; data fixed by build seed {args.build_seed}.", "",
         "Real = DEV half of the real-spectra collection (never the test half). FP = YES rate on real non-targets; "
         "recall = YES rate on real targets; real AUC = P(a real target scores above a real non-target), threshold-free; brackets: 95 % Wilson interval of the pooled counts over seeds "
         "(the same spectra each seed, so the interval reflects the spectra, not the seeds). "
         "Sim direct = SpecVI-Sim (simulated) test drawn directly (positives from kinds_for(task), negatives from "
         "archive_mix(task)); sim hard = the build's own test split (SpecVI-Sim (simulated), rejection-sampled "
         "negatives, 1:10). Numbers in %.", ""]
    for k, v in VARIANTS.items():
        if k in args.variants: L.append(f"* **{k}**: {v}")
    L += ["", "## Mean over seeds", "",
          "| task | variant | real FP (non-targets) | real recall (targets) | real AUC | sim direct acc | sim direct TPR / FPR | sim hard TPR / FPR | sim hard bal. acc |",
          "|---|---|---|---|---|---|---|---|---|"]
    for t in res['runs']:
        for v in args.variants:
            runs = res["runs"][t][v]
            fk = sum(r["real"]["fp"]["k"] for r in runs); fn = sum(r["real"]["fp"]["n"] for r in runs)
            rk = sum(r["real"]["recall"]["k"] for r in runs); rn = sum(r["real"]["recall"]["n"] for r in runs)
            f_lo, f_hi = wilson(fk, fn); r_lo, r_hi = wilson(rk, rn)
            m = lambda a, b: np.mean([r[a][b] for r in runs])
            L.append(f"| {t} | {v} | {pct(fk / fn)} [{pct(f_lo)}–{pct(f_hi)}] | {pct(rk / rn)} [{pct(r_lo)}–{pct(r_hi)}] | "
                     f"{m('real', 'auc'):.3f} | {pct(m('sim_direct', 'acc'))} | {pct(m('sim_direct', 'tpr'))} / {pct(m('sim_direct', 'fpr'))} | "
                     f"{pct(m('sim_hard', 'tpr'))} / {pct(m('sim_hard', 'fpr'))} | {pct(m('sim_hard', 'bal_acc'))} |")
    labels = sorted({l for t in res['runs'] for v in args.variants for r in res["runs"][t][v] for l in r["real"]["by_label"]})
    L += ["", "## Real non-target YES rate by real label (mean over seeds; n = dev spectra of that label)", "",
          "| task | variant | " + " | ".join(labels) + " |", "|---|---|" + "---|" * len(labels)]
    for t in res['runs']:
        for v in args.variants:
            runs, cells = res["runs"][t][v], []
            for l in labels:
                xs = [r["real"]["by_label"][l] for r in runs if l in r["real"]["by_label"]]
                cells.append("–" if not xs else f"{pct(np.mean([x['rate'] for x in xs]))} (n={xs[0]['n']})")
            L.append(f"| {t} | {v} | " + " | ".join(cells) + " |")
    surveys = sorted({s for t in res['runs'] for v in args.variants for r in res["runs"][t][v] for s in r["real"]["by_survey"]})
    L += ["", "## Real non-target YES rate by survey of the real spectrum (mean over seeds)", "",
          "| task | variant | " + " | ".join(surveys) + " |", "|---|---|" + "---|" * len(surveys)]
    for t in res['runs']:
        for v in args.variants:
            runs, cells = res["runs"][t][v], []
            for s in surveys:
                xs = [r["real"]["by_survey"][s] for r in runs if s in r["real"]["by_survey"]]
                cells.append("–" if not xs else f"{pct(np.mean([x['rate'] for x in xs]))} (n={xs[0]['n']})")
            L.append(f"| {t} | {v} | " + " | ".join(cells) + " |")
    tids = sorted({i for t in res['runs'] for v in args.variants for r in res["runs"][t][v] for i in r["real"].get("targets", {})})
    if tids:
        L += ["", "## Each real target (dev half): YES in how many seeds, mean score", "", "| task | variant | " + " | ".join(tids) + " |",
              "|---|---|" + "---|" * len(tids)]
        for t in res['runs']:
            for v in args.variants:
                runs, cells = res["runs"][t][v], []
                for i in tids:
                    xs = [r["real"]["targets"][i] for r in runs if i in r["real"].get("targets", {})]
                    cells.append("–" if not xs else f"{sum(x['yes'] for x in xs)}/{len(xs)} ({np.mean([x['confidence'] for x in xs]):.2f})")
                L.append(f"| {t} | {v} | " + " | ".join(cells) + " |")
    L += ["", "## Per seed", "", "| task | variant | seed | real FP | real recall | real AUC | sim direct acc | sim hard bal. acc | epochs (best) |",
          "|---|---|---|---|---|---|---|---|---|"]
    for t in res['runs']:
        for v in args.variants:
            for r in res["runs"][t][v]:
                f, c = r["real"]["fp"], r["real"]["recall"]
                L.append(f"| {t} | {v} | {r['seed']} | {pct(f['rate'])} ({f['k']}/{f['n']}) | {pct(c['rate'])} ({c['k']}/{c['n']}) | {r['real']['auc']:.3f} | "
                         f"{pct(r['sim_direct']['acc'])} | {pct(r['sim_hard']['bal_acc'])} | {r['info']['epochs']} ({r['info']['best_epoch']}) |")
    L += ["", "## Train negatives per variant (SpecVI-Sim (simulated) kinds, g-band SNR p10/p50/p90)", "",
          "| task | variant | SNR p10/p50/p90 (pos) | SNR p10/p50/p90 (neg) | positive kinds | negative kinds |", "|---|---|---|---|---|---|"]
    for t in res['runs']:
        for v in args.variants:
            d = res["train_sets"][t][v]
            L.append(f"| {t} | {v} | {d['snr_pos']} | {d['snr_neg']} | {', '.join(f'{k} {n}' for k, n in d.get('pos_kinds', {}).items())} | {', '.join(f'{k} {n}' for k, n in d['neg_kinds'].items())} |")
    L += ["", f"Command: `{res['run']['command']}`; wall time {res['run']['wall_s']:.0f} s on {res['run']['nproc']} cores "
          f"(shared with a CI run, nice 19, torch 1 thread); commit {res['run']['git_commit']}"
          + ("." if res['run']['complete'] else f"; PARTIAL: tasks done {res['run']['tasks_done']}.")]
    (out / "table.md").write_text("\n".join(L) + "\n")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    ap.add_argument("--quick", action="store_true", help="smoke: smoke-profile build sizes, 3 epochs, seed 0, 20-row sim test")
    ap.add_argument("--tasks", nargs="+", default=["wd", "gm", "cv"])
    ap.add_argument("--variants", nargs="+", default=list(VARIANTS))
    ap.add_argument("--seeds", nargs="+", type=int, default=[0, 1])
    ap.add_argument("--build-seed", type=int, default=0, help="seed of the SpecVI-Sim draws (0: the cpu build's)")
    ap.add_argument("--max-epochs", type=int, default=None, help="default: BASELINES['cpu']['max_epochs']")
    ap.add_argument("--n-sim-test", type=int, default=200, help="rows of the directly drawn simulated test set (balanced)")
    ap.add_argument("--out", default="bench/results/transfer_rows")
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    t0 = time.time()
    profile = "smoke" if args.quick else "cpu"
    sz = resolve_sizes(profile)
    st = dict(BASELINES["cpu"] if not args.quick else BASELINES["smoke"])
    if args.max_epochs: st["max_epochs"] = args.max_epochs
    if args.quick: args.seeds, args.n_sim_test = args.seeds[:1], 20
    fit_kw = dict(max_epochs=st["max_epochs"], patience=st["patience"], batch_size=st["batch_size"], device="cpu")
    bad = [t for t in args.tasks if not TARGETS.get(t)] + [v for v in args.variants if v not in VARIANTS]
    if bad: raise SystemExit(f"unknown or target-less: {bad}")
    out = Path(args.out); out.mkdir(parents=True, exist_ok=True)
    dev = [s for s in load_real() if s.meta["split"] == "dev"]
    res = dict(runs={}, train_sets={}, acceptance={}, sizes=dict(train_rows={t: sz["train"][t] for t in args.tasks},
               build_test_rows={t: sz["test"][t] for t in args.tasks}, sim_direct_test=args.n_sim_test, real_dev=len(dev),
               real_dev_labels=dict(Counter(s.meta["label"] for s in dev))), fit=fit_kw, profile_sizes=profile)
    for t in args.tasks:
        tt = time.time()
        built = build_rows(t, sz, args.build_seed)
        res["acceptance"][t] = built["acceptance"]
        sets = variant_sets(t, built, args.build_seed)
        k_pos = args.n_sim_test // 2
        sim_pos = sample(kinds_for(t), k_pos, args.build_seed, f"transfer_rows/{t}/simtest/pos")
        sim_neg = sample(archive_mix(t), args.n_sim_test - k_pos, args.build_seed, f"transfer_rows/{t}/simtest/neg")
        _, Xd = rows_of(t, sim_pos, sim_neg); yd = np.r_[np.ones(len(sim_pos), bool), np.zeros(len(sim_neg), bool)]
        _, Xh = rows_of(t, built["p_test"], built["n_test"]); yh = np.r_[np.ones(len(built["p_test"]), bool), np.zeros(len(built["n_test"]), bool)]
        res["runs"][t], res["train_sets"][t] = {}, {}
        print(f"[{t}] data ready in {time.time() - tt:.0f} s (rejection acceptance {built['acceptance']['acceptance']})", flush=True)
        for v in args.variants:
            pos, neg = sets[v]
            rows, X = rows_of(t, pos, neg)
            res["train_sets"][t][v] = dict(n_pos=len(pos), n_neg=len(neg), snr_pos=snr_q(pos), snr_neg=snr_q(neg), snr_all=snr_q(pos + neg),
                                           neg_kinds=dict(Counter(s.meta["kind"] for s in neg).most_common()),
                                           pos_kinds=dict(Counter(s.meta["kind"] for s in pos).most_common()),
                                           instruments=dict(Counter(s.meta["survey"] for s in pos + neg)))
            res["runs"][t][v] = []
            for seed in args.seeds:
                sp = train_specialist("gaianet", t, rows, seed=seed, X=X, **fit_kw)
                r = dict(seed=seed, info=sp.info, real=real_metrics(sp, dev), sim_direct=sim_metrics(sp, Xd, yd),
                         sim_hard=sim_metrics(sp, Xh, yh))
                res["runs"][t][v].append(r)
                print(f"  {t} {v} seed {seed}: real FP {pct(r['real']['fp']['rate'])} recall {pct(r['real']['recall']['rate'])} "
                      f"sim direct acc {pct(r['sim_direct']['acc'])} sim hard bal {pct(r['sim_hard']['bal_acc'])} "
                      f"({sp.info['epochs']} ep, {sp.info['wall_s']} s)", flush=True)
        finish(res, args, argv, t0, out, done=(t == args.tasks[-1]))


def finish(res, args, argv, t0, out, done):
    try: commit = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    except Exception: commit = None
    dirty = subprocess.run(["git", "status", "--porcelain", "--", "speco3"], capture_output=True, text=True).stdout.strip()
    res["run"] = dict(command="python " + " ".join([sys.argv[0]] + (argv if argv is not None else sys.argv[1:])),
                      git_commit=commit, speco3_dirty=bool(dirty), nproc=os.cpu_count(),
                      nproc_cmd=subprocess.run(["nproc"], capture_output=True, text=True).stdout.strip(),
                      python=platform.python_version(), torch=torch.__version__, numpy=np.__version__,
                      torch_threads=torch.get_num_threads(), wall_s=round(time.time() - t0, 1), seeds=args.seeds,
                      build_seed=args.build_seed, tasks=args.tasks, variants={v: VARIANTS[v] for v in args.variants},
                      quick=args.quick, data_label="SpecVI-Sim (simulated) train and sim test rows; real = dev half of data/real-spectra",
                      finished_utc=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), complete=done,
                      tasks_done=list(res["runs"]))
    (out / "summary.json").write_text(json.dumps(res, indent=1, default=float) + "\n")
    write_table(res, args, out)
    print(f"wrote {out}/table.md, summary.json in {res['run']['wall_s']} s ({'complete' if done else 'partial'})", flush=True)


if __name__ == "__main__":
    main()
