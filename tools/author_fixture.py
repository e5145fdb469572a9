"""An author's inputs in their published layouts, made from the real spectra this repository carries (data/real-spectra):
a SpecVI-Bench snapshot (benchmark/data/{train,test}_{cc,cv,gm,ss,wd}.parquet, index ids such as wd_test_3) and a
cold-start set in the authors' LLaMA-Factory ShareGPT form (data_info.json, from/value turns, tool replies as human
turns), drafted by the scripted expert on the snapshot's train rows. CI runs `bin/reproduce gpu|paper --toy` on it.

What the fixture is, said plainly (also in its README.md):
- Real, observed spectra of the collection, labelled by its catalogues: positives and negatives per question from the
  labels below. The collection has no S-type star and two carbon stars, so the `ss` files' positives, and the carbon
  positives beyond the two real ones, are SpecVI-Sim spectra (simulated, ids starting SIM); everything else is real. It is not SpecVI-Bench, not LAMOST's rare-object samples, and far too small
  for any number it gives to mean anything: it exercises the code path of an author's run, nothing more.
- The project uses these same spectra elsewhere (realism, the real-mix table, reader tests); none is held out.
Usage: python tools/author_fixture.py OUT [--per-class N] [--seed S] [--spectra FOLDER]
  (writes OUT/SpecVI-Bench and OUT/ColdStartSFT). --spectra takes another collection in the same schema (a folder
  holding spectra.parquet, e.g. the hold-out spectra the project never saw): the fixture is then made from it."""
import argparse, hashlib, shutil, sys, tempfile
from pathlib import Path

root = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(root))

LABELS = {  # task -> (real labels that are a YES, real labels used as NO): the collection's classes per question
    "carbon": (("CARBON",), ("M_GIANT", "K_GIANT")),
    "cv": (("CV",), ("WD", "A", "B")),
    "gm": (("M_GIANT",), ("M_DWARF", "K_GIANT")),
    "ss": ((), ("M_GIANT", "K_GIANT")),      # no S star in the collection: simulated positives (see the docstring)
    "wd": (("WD",), ("A", "B", "O"))}


def order(spectra, seed, tag):
    "A fixed shuffle: by a hash of (seed, tag, id)."
    return sorted(spectra, key=lambda s: hashlib.sha256(f"{seed}/{tag}/{s.meta['id']}".encode()).hexdigest())


def split_objects(spectra, n, seed, tag):
    "(train, test): up to n spectra each, no physical object on both sides."
    train, test, seen = [], [], {}
    for s in order(spectra, seed, tag):
        g = s.meta.get("object_group") or s.meta["id"]
        side = seen.setdefault(g, "train" if len(train) <= len(test) else "test")
        pick = train if side == "train" else test
        if len(pick) < n: pick.append(s)
    return train, test


def simulated(task, n, seed):
    "n simulated positives of `task` (SpecVI-Sim), for the positives the collection lacks; ids start SIM."
    from speco3.bench import sample
    from speco3.simulate import kinds_for
    out = sample(kinds_for(task), n, seed=seed, tag=f"fixture-{task}")
    for i, s in enumerate(out): s.meta.update(id=f"SIM-{task}-{i}", object_group=f"SIM-{task}-{i}", label=f"{task} positive (simulated)")
    return out


def positives(real, task, n, seed):
    "(train, test) positives: the collection's, topped up with simulated ones where it has fewer than n a side."
    train, test = split_objects(real, n, seed, f"{task}/yes")
    extra = simulated(task, 2 * n - len(train) - len(test), seed) if len(train) + len(test) < 2 * n else []
    k = n - len(train)
    return train + extra[:k], test + extra[k:]


def write_rows(folder, task, split, yes, no):
    "One file of rows (the project's row builder) in a scratch folder that export_published then converts."
    import pyarrow as pa, pyarrow.parquet as pq
    from speco3.bench import messages, overview, file_stem
    from speco3.io import to_specvi_row
    rows = [to_specvi_row(s, task, truth, name=s.meta["id"], index=i, prompt=messages(task), image=overview(s, "spec-o3"))
            for i, (s, truth) in enumerate([(s, "YES") for s in yes] + [(s, "NO") for s in no])]
    pq.write_table(pa.Table.from_pylist(rows), folder / f"{file_stem(split, task)}.parquet")
    return len(rows)


def collection(folder):
    "The folder of a real collection (holding spectra.parquet in data/real-spectra's schema); a clear exit if it is not one."
    folder = Path(folder)
    if folder.suffix == ".parquet": folder = folder.parent
    if not (folder / "spectra.parquet").is_file():
        sys.exit(f"author_fixture: {folder} holds no spectra.parquet (the schema of data/real-spectra/README.md)")
    return folder


def build(out, per_class=2, seed=0, spectra=None):
    from speco3.realmix import load_real
    from speco3.bench import export_published, check_benchmark, benchmark_files
    from speco3.agent import load_samples
    from speco3.coldstart import draft, qc, heldout_keys, export_authors_sharegpt
    from speco3.summaries import markdown_table
    out = Path(out)
    if out.exists() and any(out.iterdir()): sys.exit(f"author_fixture: {out} is not empty")
    source = collection(root / "data" / "real-spectra" if spectra is None else spectra)
    real = [s for s in load_real(source) if len(s.wavelength) > 100]
    by_label = lambda labels: [s for s in real if s.meta.get("label") in labels]
    lines, made = [], []
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        for task, (yes_labels, no_labels) in LABELS.items():
            yes = positives(by_label(yes_labels), task, per_class, seed)
            no = split_objects(by_label(no_labels), per_class, seed, f"{task}/no")
            made += yes[0] + yes[1] + no[0] + no[1]
            for k, split in enumerate(("train", "test")):
                n = write_rows(tmp, task, split, yes[k], no[k])
                lines.append([f"{split}_{task}", n, len(yes[k]), ", ".join(sorted({s.meta["label"] for s in yes[k] + no[k]}))])
        snapshot = export_published(tmp, out / "SpecVI-Bench")
    n_sim = sum(s.meta["id"].startswith("SIM-") for s in made)
    files = check_benchmark(snapshot)
    card = (snapshot / "README.md").read_text()
    (snapshot / "README.md").write_text(
        "# A test fixture in the published SpecVI-Bench layout (not SpecVI-Bench)\n\n"
        f"Made by `tools/author_fixture.py` from the real spectra of `{'data/real-spectra' if spectra is None else source.name}` "
        "(labels from their catalogues). "
        "Positives the collection lacks (it may hold no S-type star and few carbon stars) are SpecVI-Sim spectra "
        f"(simulated; ids start SIM): {n_sim} of the rows. "
        "Too small for any number to mean anything; it exercises an author's run.\n\n"
        + markdown_table(["file", "rows", "YES", "labels"], lines, compact=True) + "\n\n" + card)
    train = [r for t in LABELS for r in load_samples(snapshot, task=t, split="train")]
    with tempfile.TemporaryDirectory() as tmp:
        records = draft(train, Path(tmp) / "drafts", style="spec-o3", min_snr=None)  # atlas spectra carry no noise estimate
        kept, _ = qc(records, test_ids=heldout_keys(benchmark_files(snapshot)))  # never a spectrum of a test row, as the authors' set
        # a published row's id is its index (cc_train_3): the drafts carry it as their sample_id, the authors' sample_index
        cold = export_authors_sharegpt(kept, Path(tmp) / "drafts", out / "ColdStartSFT")
    print(f"{out}: SpecVI-Bench {len(files)} files, {sum(f['rows'] for f in files.values())} rows; "
          f"ColdStartSFT {len(kept)} of {len(records)} expert drafts (QC-passed) in the authors' form -> {cold.name}")
    return out


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("out"); p.add_argument("--per-class", type=int, default=2); p.add_argument("--seed", type=int, default=0)
    p.add_argument("--spectra", help="a real collection in data/real-spectra's schema (default: data/real-spectra)")
    a = p.parse_args()
    build(a.out, a.per_class, a.seed, a.spectra)
