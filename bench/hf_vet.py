"""End-to-end vetting throughput of HFPolicy with the tiny Qwen2.5-VL on CPU, through speco3.agent.run.

    .venv/bin/python bench/hf_vet.py [--n 16] [--batch 8] [--size tiny] [--threads 1]

Builds a random tiny model (speco3.tiny) and vets `n` simulated LAMOST spectra (SpecVI-Sim dwarf novae and active
M dwarfs, the cv task) with `speco3.agent.run`, once per render style. A random model babbles and stops after one
turn, so every message is forced (`HFPolicy(force=...)`, constrained decoding: the model still reads the whole
conversation and computes every token) to the same script: zoom on H-alpha, zoom on H-beta, answer. Each spectrum
thus costs three model steps and two tool calls, as a short real trajectory does. Prints spectra/s and the model's
and the tool's share per spectrum (with batching, a step's model time is split evenly over its episodes). The
figures say where the time goes in the loop on a CPU; bench/gpu_vet.py measures a 3B-shaped model on a GPU.
"""
import argparse, platform, tempfile, time
from pathlib import Path
import torch, transformers
from speco3.agent import run, read_trajectories
from speco3.hf import HFPolicy
from speco3.simulate import simulate
from speco3.tiny import build_tiny

SCRIPT = [
    '<think>The overview may show emission near 6563 Å.</think>\n<tool_call>{"name": "spectral_visualization_tool", '
    '"arguments": {"wavelength_range": [6480, 6650], "label": "H-alpha"}}</tool_call>',
    '<think>H-alpha is in emission; check H-beta.</think>\n<tool_call>{"name": "spectral_visualization_tool", '
    '"arguments": {"wavelength_range": [4800, 4920], "label": "H-beta"}}</tool_call>',
    "<think>Both Balmer lines are broad.</think>\n<answer>\\boxed{YES}</answer><|im_end|>",
]


def script(ep):
    "Message k of SCRIPT at step k."
    return SCRIPT[min(ep.step, len(SCRIPT) - 1)]


def samples(n):
    "n simulated LAMOST spectra for the cv task: half dwarf novae, half active M dwarfs (a confuser)."
    return simulate("cv_dn", n=(n + 1) // 2, seed=1) + simulate("dme", n=n // 2, seed=1)


def main(n, batch, size, threads):
    torch.set_num_threads(threads)
    print(f"python {platform.python_version()}, torch {torch.__version__}, transformers {transformers.__version__}; "
          f"{threads} thread(s); {n} spectra, batch {batch}")
    tmp = Path(tempfile.mkdtemp(prefix="hf_vet_"))
    info = build_tiny(tmp / "model", size=size)
    print(f"model: {size}, {info['params'] / 1e6:.2f} M parameters, built in {info['seconds']} s")
    items = samples(n)
    for style in ("spec-o3", "fast"):
        policy = HFPolicy(info["path"], max_new_tokens=96, batch_size=batch, force=script)
        s = run(items, policy, tmp / f"run-{style}", task="cv", batch_size=batch, progress=False, style=style)
        recs = read_trajectories(tmp / f"run-{style}")
        assert all(r["status"] == "answered" and r["n_tool_calls"] == 2 for r in recs), "the script did not run as forced"
        st = policy.stats
        print(f"{style:8} {s['spectra_per_s']:6.2f} spectra/s ({s['wall_s'] / n:.3f} s/spectrum): per spectrum model "
              f"{s['model_s'] / n:.3f} s, tool {s['tool_s'] / n:.3f} s (2 zooms); per step {st['prompt_tokens'] / st['episodes']:.0f} "
              f"prompt tokens, {st['new_tokens'] / st['episodes']:.0f} new; encode {st['encode_s']:.2f} s, "
              f"generate {st['generate_s']:.2f} s in all")


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n", type=int, default=16)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--size", default="tiny", choices=["tiny", "small", "base"])
    p.add_argument("--threads", type=int, default=1)
    a = p.parse_args()
    main(a.n, a.batch, a.size, a.threads)
