"""SFT training throughput of the tiny Qwen2.5-VL on CPU: conversations/s and tokens/s through speco3.sft.train_sft.

    .venv/bin/python bench/sft.py [--n 32] [--steps 8] [--batch 4] [--runs 3] [--size tiny] [--threads 1]

Makes `n` scripted demo conversations (speco3.sft.demo_conversations: the real agent loop, the five paper tasks, the
full expert guidelines in the prompt, 1-3 zooms each, `fast` plots), then trains the `cpu` profile's recipe (full
fine-tuning, vision frozen, assistant-only loss, AdamW, cosine) for `steps` optimiser steps of `batch` conversations,
`runs` times, each from a freshly built model in a new folder. Throughput is counted over the trainer's own
`train_runtime` (the steps themselves: collation and image processing included, model building and saving not).
Prints each run and the median, and what the median implies for the `cpu` profile on 1000 conversations.
"""
import argparse, platform, statistics, tempfile, time
from pathlib import Path
import torch, transformers, trl
from speco3.profiles import SFT
from speco3.sft import demo_conversations, train_sft


def main(n, steps, batch, runs, size, threads):
    torch.set_num_threads(threads)
    print(f"python {platform.python_version()}, torch {torch.__version__}, transformers {transformers.__version__}, "
          f"trl {trl.__version__}; {threads} thread(s)")
    t0 = time.perf_counter()
    chats = demo_conversations(n, seed=0)
    print(f"{n} demo conversations made in {time.perf_counter() - t0:.1f} s "
          f"({sum(sum(m['role'] == 'tool' for m in c) for c in chats) / n:.1f} zooms each on average)")
    tmp = Path(tempfile.mkdtemp(prefix="bench_sft_"))
    rows = []
    for k in range(runs):
        m = train_sft(chats, tmp / f"run{k}", profile="cpu", tiny_size=size, max_steps=steps,
                      per_device_train_batch_size=batch, save_steps=10**6, logging_steps=steps, progress=False)
        rows.append(m)
        print(f"run {k}: {m['samples_per_s']:.2f} conversations/s, {m['tokens_per_s']:,.0f} tokens/s "
              f"({m['samples']} conversations, {m['tokens'] / m['samples']:.0f} tokens each, {m['train_runtime_s']:.1f} s; "
              f"{m['trainable_params'] / 1e6:.2f} M of {m['total_params'] / 1e6:.2f} M parameters train)")
    sps = statistics.median(m["samples_per_s"] for m in rows)
    tps = statistics.median(m["tokens_per_s"] for m in rows)
    cpu = SFT["cpu"]
    print(f"median of {runs}: {sps:.2f} conversations/s, {tps:,.0f} tokens/s (model {size}, batch {batch})")
    print(f"at this rate the cpu profile ({cpu.num_train_epochs:g} epochs) on 1000 such conversations trains in "
          f"{1000 * cpu.num_train_epochs / sps / 60:.0f} min")


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n", type=int, default=32, help="demo conversations (the data of every run)")
    p.add_argument("--steps", type=int, default=8, help="optimiser steps per run")
    p.add_argument("--batch", type=int, default=4, help="conversations per step")
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--size", default="tiny", choices=["tiny", "small", "base"])
    p.add_argument("--threads", type=int, default=1)
    a = p.parse_args()
    main(a.n, a.steps, a.batch, a.runs, a.size, a.threads)
