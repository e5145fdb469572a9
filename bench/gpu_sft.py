"""A few SFT steps of a Qwen2.5-VL-3B- or 7B-shaped model on one GPU at the paper's settings: step time, peak memory.

    python bench/gpu_sft.py [--steps 6] [--batch 4] [--lora] [--size 7b]   # on a CUDA machine, ~2-4 min
    .venv/bin/python bench/gpu_sft.py --tiny [--steps 3]       # the same code path on CPU, to check the script

Builds Qwen2.5-VL-3B's architecture from a config (bench/gpu_vet.py's QWEN25_VL_3B: 36 text layers of width 2048, a
32-block vision tower, tied embeddings; about 3.75 B parameters) with random bf16 weights straight on the GPU —
nothing is downloaded — and trains it through speco3.sft.sft_trainer with the `paper` profile: full fine-tuning (or
LoRA with --lora), vision tower and merger frozen, assistant-only loss, AdamW at 2e-5 with a cosine schedule, bf16,
activation checkpointing, max length 32768, `batch` conversations per step. The data are demo conversations
(speco3.sft.demo_conversations: full expert guidelines, 1-3 zooms each) drawn in the `spec-o3` style at Qwen2.5-VL's
own image limits (a full plot costs 476 image tokens, a zoom 260-375); the tokenizer is the tiny one (its ids index
the 151 936-row embedding). The first step is a warm-up and is not timed. Prints tokens per step, the median step
time (forward, backward, optimizer) and the median wall time per step (collation and image processing included),
tokens/s, peak GPU memory, and what the step time implies for the paper's 5 epochs over 1000 conversations on one GPU.

`--size 7b` builds Qwen2.5-VL-7B's architecture (bench/gpu_vet.py's QWEN25_VL_7B, about 8.29 B parameters). Full
fine-tuning it may not fit one GPU: the script first prints the arithmetic of weights, gradients and AdamW states
(bench/gpu_memory.py's `arithmetic`), and a CUDA out-of-memory error during training is a result, printed as "does not
fit" with that arithmetic, not a crash (exit status 0).

Without a GPU it stops at once with a message; `--tiny` swaps in the tiny config on CPU (fp32) to check the script.
"""
import argparse, platform, statistics, sys, tempfile, time
from pathlib import Path
import torch


from gpu_vet import build, shape_name  # the same 3B/7B-shaped (or tiny) random model and processor as the vetting bench
from gpu_memory import arithmetic, gpu_gib


def clock(device, echo=False):
    "A TrainerCallback timing each optimiser step (begin to end) and the wall between step ends; `echo`: print each."
    from transformers import TrainerCallback
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)

    class Clock(TrainerCallback):
        def __init__(self): self.step_s, self.wall_s = [], []
        def on_train_begin(self, args, state, control, **kw): sync(); self.last = time.perf_counter()
        def on_step_begin(self, args, state, control, **kw): sync(); self.t0 = time.perf_counter()
        def on_step_end(self, args, state, control, **kw):
            sync(); t = time.perf_counter()
            self.step_s.append(t - self.t0); self.wall_s.append(t - self.last); self.last = t
            if echo: print(f"optimizer step {state.global_step} done: {t - self.t0:.2f} s", flush=True)
    return Clock()


def main(steps, batch, lora, tiny, size="3b"):
    if not tiny and not torch.cuda.is_available():
        sys.exit(f"bench/gpu_sft.py needs a CUDA GPU: torch.cuda.is_available() is False (torch {torch.__version__}). "
                 "Run it with --tiny to check the script on CPU.")
    import transformers, trl
    from speco3.sft import demo_conversations, sft_trainer
    device, dtype = ("cpu", torch.float32) if tiny else ("cuda", torch.bfloat16)
    if tiny: torch.set_num_threads(1)  # tiny matrices: one CPU thread is as fast, and far faster on shared cores
    gpu = torch.cuda.get_device_name() if device == "cuda" else "none (--tiny on CPU)"
    print(f"python {platform.python_version()}, torch {torch.__version__}, transformers {transformers.__version__}, "
          f"trl {trl.__version__}; GPU: {gpu}; {steps} steps of {batch} conversations, {'LoRA' if lora else 'full fine-tuning'}")
    t0 = time.perf_counter()
    chats = demo_conversations(steps * batch, seed=0, style="spec-o3")
    print(f"{len(chats)} demo conversations drawn in {time.perf_counter() - t0:.1f} s")
    t0 = time.perf_counter()
    model, processor = build(tiny, device, dtype, size)
    print(f"model: {shape_name(tiny, size)}, {sum(p.numel() for p in model.parameters()) / 1e6:,.1f} M "
          f"parameters, {dtype}, random weights built in {time.perf_counter() - t0:.1f} s")
    if device == "cuda": torch.cuda.reset_peak_memory_stats()
    c = clock(device)
    trainer = sft_trainer(chats, Path(tempfile.mkdtemp(prefix="gpu_sft_")), profile="paper", model=model, processor=processor,
                          lora=lora, max_steps=steps, per_device_train_batch_size=batch, save_steps=10**6, logging_steps=1,
                          progress=False, callbacks=[c], **({"bf16": False} if tiny else {}))
    s = trainer.speco3
    print(f"trainable: {s['trainable_params'] / 1e6:,.1f} M of {s['total_params'] / 1e6:,.1f} M parameters; frozen: {', '.join(s['frozen'])}")
    print(arithmetic(s["total_params"], s["trainable_params"]))
    try:
        trainer.train()
    except torch.cuda.OutOfMemoryError as e:
        peak = torch.cuda.max_memory_allocated() / 2**30
        print(f"does not fit: CUDA out of memory on this GPU ({gpu_gib():.1f} GiB) after {len(c.step_s)} steps, "
              f"{peak:.1f} GiB allocated at the peak; it needs the GiB above by arithmetic plus activations "
              f"({str(e).splitlines()[0][:120]})")
        return
    count = trainer.data_collator
    losses = [r["loss"] for r in trainer.state.log_history if "loss" in r]
    step, wall = statistics.median(c.step_s[1:]), statistics.median(c.wall_s[1:])
    tokens = count.tokens / count.samples * batch
    print(f"{tokens:,.0f} tokens per step ({count.tokens / count.samples:,.0f} per conversation); loss {losses[0]:.2f} -> {losses[-1]:.2f}")
    print(f"step time (median of {len(c.step_s) - 1} after a warm-up): {step:.2f} s; wall per step with collation: {wall:.2f} s; "
          f"{tokens / wall:,.0f} tokens/s, {batch / wall:.2f} conversations/s")
    if device == "cuda":
        print(f"peak GPU memory: {torch.cuda.max_memory_allocated() / 2**30:.1f} GiB allocated, "
              f"{torch.cuda.max_memory_reserved() / 2**30:.1f} GiB reserved")
    print(f"the paper's 5 epochs over 1000 conversations at this rate: {5 * 1000 / batch * wall / 3600:.1f} h on this device")


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=None, help="optimiser steps, the first a warm-up (default 6; 3 with --tiny)")
    p.add_argument("--batch", type=int, default=4, help="conversations per step (the paper: 4 per device)")
    p.add_argument("--lora", action="store_true", help="LoRA on the language model instead of full fine-tuning")
    p.add_argument("--size", default="3b", choices=["3b", "7b"], help="the architecture built: Qwen2.5-VL-3B's or 7B's")
    p.add_argument("--tiny", action="store_true", help="the tiny config on CPU, to check the script without a GPU")
    a = p.parse_args()
    main(a.steps or (3 if a.tiny else 6), a.batch, a.lora, a.tiny, a.size)
