"""The largest GRPO micro-batch whose training pass fits one GPU, for a Qwen2.5-VL-3B- or 7B-shaped model.

    python bench/gpu_memory.py --size 7b [--micro 1 2 4 8] [--tokens N]   # on a CUDA machine, ~1 min
    .venv/bin/python bench/gpu_memory.py --tiny                           # the same code path on CPU

Builds the architecture from a config (bench/gpu_vet.py: QWEN25_VL_3B or QWEN25_VL_7B) with random bf16 weights
straight on the GPU, every parameter trainable (the GRPO profiles train the vision tower too), and for each
micro-batch size m in turn runs what one GRPO micro-step costs in memory: a forward pass over m rollouts of `tokens`
tokens with activation checkpointing, the log-probabilities of the completion tokens (TRL's selective log-softmax,
row by row, over logits kept for the completion only), a policy-gradient loss, the backward pass, and an AdamW step
(its states in bf16, as the benches' bf16 weights make them). The first CUDA out-of-memory error stops the sweep; the
largest m before it is what fits. The rollouts are text tokens only: a rollout's plots enter the language model as
that many image tokens, and the vision tower's own activations on their patches (checkpointed) are left out.

`tokens` defaults to the gpu profile's rollout at its most: a 2,028-token prompt (bench/gpu_vet.py's measured prompt,
system prompt and overview plot) plus speco3.grpo.completion_budget with the profile's 7 tool calls and 512-token
reasoning and answer allowances. Prints, for each m: peak memory, the step's seconds and tokens/s; then the largest
m that fits, and the arithmetic of weights, gradients and optimizer states (bf16 as run; fp32 master weights as the
profiles' master_fp32 would hold them) — what sharding them over 8 GPUs (FSDP) leaves per GPU.

Without a GPU it stops at once with a message; `--tiny` swaps in the tiny config on CPU (fp32) to check the script.
"""
import argparse, gc, platform, sys, time
import torch

PROMPT_TOKENS = 2028  # bench/gpu_vet.py's measured prompt (results/gpu_bench/gpu_vet.txt: "2028 prompt tokens")


def state_gib(total, trainable, weight_bytes=2, state_bytes=2):
    "GiB of weights (all `total` parameters), gradients and AdamW's two states (the `trainable` ones)."
    return (total * weight_bytes + trainable * (weight_bytes + 2 * state_bytes)) / 2**30


def arithmetic(total, trainable):
    "A line: weights, gradients and AdamW states in bf16 (as the benches run) and in fp32, on 1 and 8 GPUs."
    bf16, fp32 = state_gib(total, trainable), state_gib(total, trainable, 4, 4)
    return (f"by arithmetic, before activations: {bf16:.1f} GiB with bf16 weights, gradients and AdamW states "
            f"({total / 1e9:.2f} B parameters, {trainable / 1e9:.2f} B trainable); {fp32:.1f} GiB with the profiles' "
            f"fp32 master weights (master_fp32); sharded over 8 GPUs (FSDP full-shard): {bf16 / 8:.1f} and "
            f"{fp32 / 8:.1f} GiB per GPU")


def gpu_gib():
    "The GPU's memory in GiB (None on CPU)."
    return torch.cuda.get_device_properties(0).total_memory / 2**30 if torch.cuda.is_available() else None


def rollout_tokens(calls=7, reasoning=512, answer=512):
    "A gpu-profile rollout at its longest: the measured prompt plus the completion budget of `calls` spec-o3 plots."
    from speco3.grpo import completion_budget, paper_processor
    return PROMPT_TOKENS + completion_budget(paper_processor(), calls, "spec-o3", reasoning, answer)["total"]


def micro_step(model, opt, m, tokens, completion, vocab, device):
    "One GRPO-shaped training micro-step on m random rollouts; returns its seconds."
    from trl.trainer.utils import selective_log_softmax
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    ids = torch.randint(0, vocab, (m, tokens), device=device)
    sync(); t0 = time.perf_counter()
    logits = model(input_ids=ids, logits_to_keep=completion + 1).logits[:, :-1]  # the completion's next-token logits
    logps = selective_log_softmax(logits, ids[:, -completion:])
    advantages = torch.linspace(-1, 1, m, device=device).unsqueeze(1)  # a group's advantages, some up, some down
    loss = -(torch.exp(logps - logps.detach()) * advantages).mean()  # the clipped ratio's gradient at ratio 1
    loss.backward()
    opt.step(); opt.zero_grad(set_to_none=True)
    sync()
    return time.perf_counter() - t0


def main(size, micro, tokens, completion, tiny):
    if not tiny and not torch.cuda.is_available():
        sys.exit(f"bench/gpu_memory.py needs a CUDA GPU: torch.cuda.is_available() is False (torch "
                 f"{torch.__version__}). Run it with --tiny to check the script on CPU.")
    import transformers
    from gpu_vet import build, shape_name
    device, dtype = ("cpu", torch.float32) if tiny else ("cuda", torch.bfloat16)
    if tiny: torch.set_num_threads(1)
    gpu = f"{torch.cuda.get_device_name()}, {gpu_gib():.1f} GiB" if device == "cuda" else "none (--tiny on CPU)"
    tokens = tokens or (256 if tiny else rollout_tokens())
    completion = min(max(completion or (tokens // 2 if tiny else tokens - PROMPT_TOKENS), 1), tokens - 1)
    print(f"python {platform.python_version()}, torch {torch.__version__}, transformers {transformers.__version__}; "
          f"GPU: {gpu}; GRPO micro-steps of {tokens:,} tokens per rollout ({completion:,} completion), "
          f"micro-batches {micro}")
    t0 = time.perf_counter()
    model, _ = build(tiny, device, dtype, size)
    model.train()
    model.config.use_cache = False
    if not tiny: model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    total = sum(p.numel() for p in model.parameters())
    trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    print(f"model: {shape_name(tiny, size)}, {total / 1e6:,.1f} M parameters ({trainable / 1e6:,.1f} M trainable), "
          f"{dtype}, random weights built in {time.perf_counter() - t0:.1f} s")
    print(arithmetic(total, trainable))
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-6, weight_decay=0.01)
    vocab, fits = model.config.get_text_config().vocab_size, []
    for m in micro:
        if device == "cuda": torch.cuda.reset_peak_memory_stats()
        try:
            s = micro_step(model, opt, m, tokens, completion, vocab, device)
        except torch.cuda.OutOfMemoryError as e:
            opt.zero_grad(set_to_none=True); gc.collect(); torch.cuda.empty_cache()
            print(f"micro-batch {m}: does not fit (CUDA out of memory: {str(e).splitlines()[0][:160]})")
            break
        peak = (f"peak {torch.cuda.max_memory_allocated() / 2**30:.1f} GiB allocated, "
                f"{torch.cuda.max_memory_reserved() / 2**30:.1f} GiB reserved") if device == "cuda" else \
               "peak not measured on CPU"
        warm = "; warm-up included" if m == micro[0] else ""
        print(f"micro-batch {m}: fits; {peak}; {s:.2f} s (forward, backward, AdamW{warm}), "
              f"{m * tokens / s:,.0f} tokens/s")
        fits.append(m)
    print(f"largest micro-batch that fits: {max(fits) if fits else 'none'} of {micro}"
          + ("" if fits and max(fits) == max(micro) else " (the next one ran out of memory)"))


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--size", default="7b", choices=["3b", "7b"], help="the architecture built")
    p.add_argument("--micro", type=int, nargs="+", default=[1, 2, 4, 8], help="micro-batch sizes tried, smallest first")
    p.add_argument("--tokens", type=int, default=None,
                   help="tokens per rollout (default: the gpu profile's longest rollout)")
    p.add_argument("--completion", type=int, default=None,
                   help="completion tokens among them (default: all but the prompt)")
    p.add_argument("--tiny", action="store_true", help="the tiny config on CPU, to check the script without a GPU")
    a = p.parse_args()
    if sorted(a.micro) != a.micro or min(a.micro) < 1:
        p.error(f"--micro {a.micro}: give positive sizes, smallest first")
    main(a.size, a.micro, a.tokens, a.completion, a.tiny)
