"""Vetting on a Dask cluster (`speco3.cluster`, `speco3 vet --cluster`): a local cluster of two worker processes vets
real spectra from the project's own copy (data/real-spectra/raw) with the scripted expert and the paper's plots, and the
merged run folder holds what one machine writes; a worker killed with SIGKILL mid-shard costs only that shard's
unfinished samples: the run finishes, nothing lost, nothing twice. `distributed` is the `cluster` extra, which
tools/env.sh installs: without it this module is reported as a skip that did not belong (bin/test fails)."""
import json, os, signal, threading, time
from pathlib import Path

import pytest

distributed = pytest.importorskip("distributed", reason="the cluster extra (pip install 'speco3[cluster]') is missing")

from test_scale import untimed, images   # what two runs of the same inputs share, as the --jobs tests compare them
from speco3.agent import run, expand_inputs, read_trajectories
from speco3.cli import main
from speco3.cluster import vet_on_cluster, connect
from speco3.expert import ScriptedExpertPolicy
from speco3.inputs import walk
from speco3.io import real_spectra_dir

RAW = real_spectra_dir() / "raw"
SIZE = 5   # inputs per shard: 20 spectra make 4 shards


@pytest.fixture(scope="module")
def items():
    "20 real spectra: the LAMOST and SDSS files (in the walk's stable order) and the science targets of a DESI coadd."
    found = expand_inputs([*walk(RAW / "lamost"), *walk(RAW / "sdss"), str(RAW / "desi" / "coadd-sv3-dark-26065.fits")])
    assert len(found) >= 20, len(found)
    return found[:20]


@pytest.fixture(scope="module")
def reference(items, tmp_path_factory):
    "A one-machine `run` of the same inputs."
    out = tmp_path_factory.mktemp("one") / "run"
    run(items, ScriptedExpertPolicy(), out, task="cv", style="spec-o3", progress=False)
    return out


@pytest.fixture(scope="module")
def client():
    "A local cluster of two worker processes (one thread each), as `--cluster local:2` starts."
    with connect("local:2") as c:
        yield c


class Killer(threading.Thread):
    "Kills (SIGKILL) the worker process vetting a shard once that shard has recorded between 1 and SIZE - 2 samples."
    def __init__(self, out):
        super().__init__(daemon=True)
        self.out, self.killed, self.stop = Path(out), None, threading.Event()

    def run(self):
        while not self.stop.is_set():
            for folder in sorted((self.out / "shards").glob("*")):
                log, lock = folder / "trajectories.jsonl", folder / ".lock"
                try: n, pid = log.read_bytes().count(b"\n"), int(lock.read_text().split()[0])
                except (OSError, ValueError, IndexError): continue
                if 1 <= n <= SIZE - 2:
                    os.kill(pid, signal.SIGKILL)
                    self.killed = dict(shard=int(folder.name), pid=pid, seen=n)
                    return
            time.sleep(0.02)


def test_two_workers_one_killed_mid_shard_write_what_one_machine_writes(items, reference, client, tmp_path):
    out = tmp_path / "run"
    pids = set(client.run(os.getpid).values())
    killer = Killer(out); killer.start()
    try: s = vet_on_cluster(items, ScriptedExpertPolicy(), out, client, task="cv", style="spec-o3", shard_size=SIZE,
                            batch_size=1, progress=False)
    finally: killer.stop.set(); killer.join()
    k = killer.killed
    assert k is not None and k["pid"] in pids, (k, pids)             # a worker of the cluster was killed mid-shard
    got, want = read_trajectories(out), read_trajectories(reference)
    assert {r["status"] for r in want} == {"answered"}                          # every input was vetted
    assert [r["sample_id"] for r in got] == [r["sample_id"] for r in want]   # nothing lost, nothing twice, input order
    assert [untimed(r) for r in got] == [untimed(r) for r in want]            # answers, turns, image hashes
    assert images(out) == images(reference)                                  # the image files, byte for byte
    assert sorted(p.name for p in out.iterdir()) == sorted(p.name for p in reference.iterdir())   # no shards/ left
    assert json.loads((out / "run_config.json").read_text()) == json.loads((reference / "run_config.json").read_text())
    shards = {r["shard"]: r for r in s["cluster"]["shards"]}
    assert sorted(shards) == [0, 1, 2, 3] and all(r["n_samples"] == SIZE for r in shards.values())
    again = shards[k["shard"]]                      # the killed shard, run again on a live worker: only what was left
    assert again["pid"] != k["pid"] and k["seen"] <= again["n_resumed"] < SIZE, (k, again)
    assert again["n_resumed"] + again["n_run"] == SIZE
    assert sum(r["n_resumed"] for r in shards.values()) == again["n_resumed"]   # no other shard redid anything
    assert (s["n_samples"], s["n_resumed"], s["n_run"], s["jobs"]) == (20, 0, 20, 2)
    # the finished folder resumed: nothing sent to the cluster, the files unchanged
    before = (out / "trajectories.jsonl").read_bytes()
    s2 = vet_on_cluster(items, ScriptedExpertPolicy(), out, client, task="cv", style="spec-o3", shard_size=SIZE,
                        progress=False)
    assert (s2["n_resumed"], s2["n_run"], s2["cluster"]["shards"]) == (20, 0, [])
    assert (out / "trajectories.jsonl").read_bytes() == before


def test_driver_lost_mid_merge_resumes_without_twins(items, reference, client, tmp_path, monkeypatch):
    """The driver dies after shard 1's records were appended, before its folder went: the next attempt appends none
    twice; the folder is then an ordinary run folder, which one machine resumes."""
    import speco3.cluster as cluster
    out, real = tmp_path / "run", cluster.shutil.rmtree
    def cut(path, *a, **kw):
        if Path(path).name == "1": raise KeyboardInterrupt   # as a kill would, mid-merge
        real(path, *a, **kw)
    monkeypatch.setattr(cluster, "shutil", type("shutil", (), {"rmtree": staticmethod(cut)}))
    with pytest.raises(KeyboardInterrupt):
        vet_on_cluster(items[:10], ScriptedExpertPolicy(), out, client, task="cv", style="spec-o3", shard_size=SIZE,
                       progress=False)
    assert (out / "shards" / "1").is_dir() and len(read_trajectories(out)) == 10
    monkeypatch.undo()
    s = vet_on_cluster(items[:10], ScriptedExpertPolicy(), out, client, task="cv", style="spec-o3", shard_size=SIZE,
                       progress=False)
    assert (s["n_resumed"], s["n_run"], s["cluster"]["shards"]) == (10, 0, []) and not (out / "shards").exists()
    want = read_trajectories(reference)[:10]
    assert [untimed(r) for r in read_trajectories(out)] == [untimed(r) for r in want]
    folders = {Path(r["overview"]["path"]).parent.name for r in want}
    assert images(out) == {k: v for k, v in images(reference).items() if Path(k).parent.name in folders}
    s = run(items[:10], ScriptedExpertPolicy(), out, task="cv", style="spec-o3", progress=False)   # on one machine
    assert (s["n_resumed"], s["n_run"]) == (10, 0)


def test_cli_cluster_writes_the_tables_of_one_machine(items, client, tmp_path, capsys):
    "`speco3 vet --cluster tcp://…` (the running local cluster, by its address) finishes a run begun on one machine."
    manifest = tmp_path / "list.txt"
    files = [str(i) for i in items if isinstance(i, str)][:6]
    manifest.write_text("\n".join(files) + "\n")
    one, many = tmp_path / "one", tmp_path / "many"
    vet = ["vet", "--manifest", str(manifest), "--task", "cv", "--style", "fast", "--quiet"]
    assert main([*vet, "--out", str(one)]) == 0
    assert main([*vet, "--out", str(many), "--limit", "3"]) == 0                       # begun on one machine
    assert main([*vet, "--out", str(many), "--cluster", client.scheduler.address, "--shard-size", "2"]) == 0
    assert capsys.readouterr().out.splitlines()[-1].startswith("vetted 6 of 6: ")
    assert (many / "predictions.csv").read_bytes() == (one / "predictions.csv").read_bytes()
    assert [untimed(r) for r in read_trajectories(many)] == [untimed(r) for r in read_trajectories(one)]
    summary = json.loads((many / "summary.json").read_text())
    assert (summary["n_resumed"], summary["n_run"], summary["cluster"]["shard_size"]) == (3, 3, 2)
    assert [(r["shard"], r["n_samples"]) for r in summary["cluster"]["shards"]] == [(1, 1), (2, 2)]   # shard 0 was done


def test_bad_cluster_arguments_say_what_is_wrong(tmp_path, capsys):
    table = real_spectra_dir() / "spectra.parquet"
    base = ["vet", str(table), "--limit", "2", "--task", "cv", "--quiet", "--out"]
    for cluster, why in (("local:0", "cluster local:0: a local cluster needs at least 1 worker"),
                         ("scheduler:8786", "cluster 'scheduler:8786': give local:N (N worker processes on this "
                                            "machine) or a scheduler address such as tcp://host:8786")):
        assert main([*base, str(tmp_path / "r"), "--cluster", cluster]) == 1
        assert capsys.readouterr().err.strip() == f"speco3 vet: {why}"
    assert main([*base, str(tmp_path / "r"), "--cluster", "local:2", "--jobs", "2"]) == 1
    assert capsys.readouterr().err.strip().startswith("speco3 vet: --jobs is for one machine")
    assert main([*base, str(tmp_path / "r"), "--cluster", "local:2", "--shard-size", "0"]) == 2   # argparse's own
    assert "--shard-size: must be >= 1, got 0" in capsys.readouterr().err
    assert not (tmp_path / "r").exists()                                     # refused before anything was written
