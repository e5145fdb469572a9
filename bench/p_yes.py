"""What p(YES) costs in HFPolicy vetting on CPU: the kept answer logits (speco3.hf.AnswerLogits) against one more forward pass per answer.

    .venv/bin/python bench/p_yes.py [--n 32] [--batch 8] [--repeats 3] [--threads 1]

The same forced three-step script as bench/hf_vet.py (zoom on H-alpha, zoom on H-beta, answer) on `n` simulated
SpecVI-Sim spectra with a random tiny Qwen2.5-VL, vetted `repeats` times each way in this process: with p(YES) from
the logits `generate` kept, and with the kept logits withheld so `_p_yes` runs its extra forward pass. Prints the
median wall time of each, their ratio, and the largest difference between the two ways' p(YES) values.
"""
import argparse, statistics, tempfile, time
from pathlib import Path
import torch
from speco3.agent import run, read_trajectories
from speco3.hf import HFPolicy
from speco3.tiny import build_tiny
from hf_vet import script, samples


class ExtraPass(HFPolicy):
    "p(YES) by the extra forward pass: the kept logits are not handed to `_p_yes`."
    def _p_yes(self, enc, ids, text, kept=None): return super()._p_yes(enc, ids, text, None)


def vet(cls, path, items, out, batch):
    policy = cls(path, max_new_tokens=96, batch_size=batch, force=script)
    t0 = time.perf_counter()
    run(items, policy, out, task="cv", batch_size=batch, progress=False, style="fast")
    wall = time.perf_counter() - t0
    return wall, {r["sample_id"]: r["p_yes"] for r in read_trajectories(out)}


def main(n, batch, repeats, threads):
    torch.set_num_threads(threads)
    tmp = Path(tempfile.mkdtemp(prefix="p_yes_"))
    path = build_tiny(tmp / "model")["path"]
    items = samples(n)
    walls = {"kept logits": [], "extra pass": []}
    for k in range(repeats):
        (a, pa), (b, pb) = vet(HFPolicy, path, items, tmp / f"kept-{k}", batch), vet(ExtraPass, path, items, tmp / f"extra-{k}", batch)
        walls["kept logits"].append(a); walls["extra pass"].append(b)
    assert pa.keys() == pb.keys() and all(v is not None for v in pa.values()), "every forced answer has a p(YES)"
    diff = max(abs(pa[i] - pb[i]) for i in pa)
    med = {k: statistics.median(v) for k, v in walls.items()}
    print(f"{n} spectra, batch {batch}, {threads} thread(s), median of {repeats}: kept logits {med['kept logits']:.2f} s, "
          f"extra pass {med['extra pass']:.2f} s; ratio extra/kept {med['extra pass'] / med['kept logits']:.2f}; "
          f"largest p(YES) difference {diff:.2e}")


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n", type=int, default=32)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--threads", type=int, default=1)
    a = p.parse_args()
    main(a.n, a.batch, a.repeats, a.threads)
