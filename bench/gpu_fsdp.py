"""A 2-process SFT under `accelerate launch` (FSDP full-shard on GPUs) of a Qwen2.5-VL-3B-shaped model: step time.

    python bench/gpu_fsdp.py [--processes 2] [--steps 3] [--batch 4] [--size 3b]   # on >= 2 GPUs
    .venv/bin/python bench/gpu_fsdp.py --tiny                     # the same code path on CPU (DDP over gloo)

Builds the architecture from a config (bench/gpu_vet.py) with random bf16 weights, saves it with its processor into a
temporary folder, and trains it with speco3.sft.train_sft(processes=N): the project's own multi-process path (every
rank loads the folder; accelerate launch with FSDP full-shard on GPUs, DDP over gloo on CPUs) at the `gpu` profile's
recipe (fp32 master weights, bf16 compute, activation checkpointing, vision tower frozen), `batch` conversations per
process and step (global batch batch x N, no accumulation), for `steps` optimiser steps. Prints the run's own
figures (train_sft's metrics: runtime, tokens/s, conversations/s); the per-step time includes the first step's warm-up
(the launched processes cannot hand a callback back), so it is an upper bound.

With fewer GPUs than processes it prints that it skipped and why, and exits 0 (the benches' loan is one GPU).
"""
import argparse, platform, sys, tempfile, time
from pathlib import Path
import torch


def main(processes, steps, batch, size, tiny):
    import transformers
    n_gpu = torch.cuda.device_count()
    if not tiny and n_gpu < processes:
        print(f"skipped: a {processes}-process FSDP SFT needs {processes} GPUs, one per process; this machine has "
              f"{n_gpu} ({torch.cuda.get_device_name() if n_gpu else 'no CUDA device'})")
        return
    from gpu_vet import build, shape_name
    from speco3.sft import demo_conversations, train_sft
    device, dtype = ("cpu", torch.float32) if tiny else ("cuda", torch.bfloat16)
    gpu = f"{n_gpu} x {torch.cuda.get_device_name()}" if device == "cuda" else "none (--tiny on CPU)"
    print(f"python {platform.python_version()}, torch {torch.__version__}, transformers {transformers.__version__}; "
          f"GPU: {gpu}; {processes} processes ({'FSDP full-shard' if device == 'cuda' else 'DDP over gloo'}), "
          f"{steps} steps of "
          f"{batch} conversations per process")
    chats = demo_conversations(steps * batch * processes, seed=0, style="spec-o3")
    tmp = Path(tempfile.mkdtemp(prefix="gpu_fsdp_"))
    t0 = time.perf_counter()
    model, processor = build(tiny, device, dtype, size)
    model.save_pretrained(tmp / "base"); processor.save_pretrained(tmp / "base")
    n = sum(p.numel() for p in model.parameters())
    del model; torch.cuda.empty_cache() if device == "cuda" else None
    print(f"model: {shape_name(tiny, size)}, {n / 1e6:,.1f} M parameters, random weights built and saved in "
          f"{time.perf_counter() - t0:.1f} s")
    m = train_sft(chats, tmp / "run", profile="cpu" if tiny else "gpu", model=str(tmp / "base"), processes=processes,
                  max_steps=steps, per_device_train_batch_size=batch, global_batch=batch * processes, save_steps=10**6,
                  logging_steps=1, progress=False)
    if m["global_step"] != steps or m["processes"] != processes:
        sys.exit(f"the run did not train as planned: {m['global_step']} steps in {m['processes']} processes")
    print(f"{m['tokens']:,} tokens in {m['samples']} conversations over {m['processes']} processes; "
          f"loss -> {m['final_loss']:.2f}")
    print(f"train_runtime {m['train_runtime_s']:.1f} s for {steps} steps: {m['train_runtime_s'] / steps:.2f} s/step "
          f"(warm-up included), {m['tokens_per_s']:,.0f} tokens/s, {m['samples_per_s']:.2f} conversations/s; wall with "
          f"loading and saving {m['wall_s']:.0f} s")


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--processes", type=int, default=2, help="processes (one per GPU)")
    p.add_argument("--steps", type=int, default=3, help="optimiser steps")
    p.add_argument("--batch", type=int, default=None,
                   help="conversations per process and step (default 4; 1 with --tiny)")
    p.add_argument("--size", default="3b", choices=["3b", "7b"], help="the architecture built: Qwen2.5-VL-3B's or 7B's")
    p.add_argument("--tiny", action="store_true", help="the tiny config on CPU, to check the script without a GPU")
    a = p.parse_args()
    if a.processes < 2: p.error(f"--processes {a.processes}: this bench is about 2 or more")
    main(a.processes, a.steps, a.batch or (1 if a.tiny else 4), a.size, a.tiny)
