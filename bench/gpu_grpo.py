"""A few GRPO steps with tool calls of a Qwen2.5-VL-3B-shaped model on one GPU: step time, peak memory, rollouts/s.

    python bench/gpu_grpo.py [--steps 3] [--questions 4] [--generations 8] [--calls 3]   # on a CUDA machine, ~2-4 min
    python bench/gpu_grpo.py --questions 8 --per-update 4 --micro 4 --calls 3 --max-calls 7 --steps 2  # the gpu profile
    .venv/bin/python bench/gpu_grpo.py --tiny                                           # the same code path on CPU

Builds Qwen2.5-VL-3B's architecture from a config (bench/gpu_vet.py's QWEN25_VL_3B: 36 text layers of width 2048, a
32-block vision tower, tied embeddings; about 3.75 B parameters) with random bf16 weights straight on the GPU —
nothing is downloaded — and trains it with speco3.grpo.grpo_trainer on the `gpu` profile's recipe (lr 1e-6, no KL,
bf16, activation checkpointing, one SpectralToolEnv per rollout drawing real `spec-o3` plots) for `steps` optimiser
steps, each a fresh generation round of `questions` x `generations` rollouts (simulated SpecVI-Sim questions over
the five tasks, full expert guidelines in the prompt). Random weights babble, so every assistant turn is forced
(constrained decoding; the model still computes every token): `calls` zooms, then YES or NO (alternating between
rollouts, so the group advantages are not all zero). The tokenizer is the tiny one (its ids index the 151 936-row
embedding); the image processor has Qwen2.5-VL's own limits (a full plot costs 476 image tokens, a zoom 260-375).
The first step is a warm-up and is not timed. Prints the median step time (generation with tool calls, scoring,
forward and backward), rollouts/s, tokens per rollout, tool calls and dropped plots per step, and peak GPU memory.

`--max-calls` sets the cap the trainer enforces and budgets completion length for (the gpu profile: 7), while every
rollout is forced to make `--calls` zooms (3: what the trained models and the cold-start drafts make on average).
A generation round of `questions` x `generations` rollouts trains in questions / `per-update` optimiser steps (the gpu
profile: 8 questions per round, 4 per update, so 2 steps, the first generating). The time of a round is the sum of its
steps; with more than one round the first is the warm-up and the median of the others is reported, with a single round
(the gpu profile's shape in a short loan) that round is reported, warm-up included: an upper bound. `--size 7b` builds
Qwen2.5-VL-7B's architecture (bench/gpu_vet.py's QWEN25_VL_7B); full fine-tuning it on one GPU likely runs out of memory
(bench/gpu_memory.py measures the micro-batches that fit).

Without a GPU it stops at once with a message; `--tiny` swaps in the tiny config on CPU (fp32) to check the script.
"""
import argparse, platform, statistics, sys, tempfile, time
from pathlib import Path
import torch

WINDOWS = [(6480, 6650, "H-alpha"), (4800, 4920, "H-beta"), (4400, 4720, "He I 4471, He II 4686"), (5820, 5920, "He I 5876"),
           (6640, 6720, "He I 6678"), (3800, 4200, "higher Balmer lines"), (7000, 7300, "TiO 7054"), (8150, 8230, "Na I 8183/8195")]


def forced_generate(model, tokenizer, calls):
    "Wrap `model.generate` so turn k of every rollout is forced: a zoom while k < calls, then YES (even rows) or NO."
    from transformers import LogitsProcessorList
    from speco3.hf import ForceTokens
    response = tokenizer.convert_tokens_to_ids("<tool_response>")
    def turn(k, r):
        if k < calls:
            lo, hi, name = WINDOWS[k % len(WINDOWS)]
            text = (f"<think>Next I check {name}: is the line broad, and is it in emission?</think>\n<tool_call>"
                    f'{{"name": "spectral_visualization_tool", "arguments": {{"wavelength_range": [{lo}, {hi}], "label": "{name}"}}}}</tool_call>')
        else:
            text = f"<think>The lines decide it.</think>\n<answer>\\boxed{{{'YES' if r % 2 == 0 else 'NO'}}}</answer>"
        return tokenizer.encode(text + "<|im_end|>", add_special_tokens=False)
    generate = model.generate
    def forced(*args, input_ids=None, **kw):
        forced_ids = [turn(int((row == response).sum()), r) for r, row in enumerate(input_ids)]
        return generate(*args, input_ids=input_ids, logits_processor=LogitsProcessorList([ForceTokens(forced_ids, input_ids.shape[1])]), **kw)
    model.generate = forced


def main(steps, questions, generations, calls, micro, tiny, size="3b", per_update=None, max_calls=None):
    if not tiny and not torch.cuda.is_available():
        sys.exit(f"bench/gpu_grpo.py needs a CUDA GPU: torch.cuda.is_available() is False (torch {torch.__version__}). "
                 "Run it with --tiny to check the script on CPU.")
    import transformers, trl
    from gpu_vet import build, shape_name
    from gpu_sft import clock
    from speco3.profiles import GRPO
    from speco3.grpo import completion_budget, demo_rows, grpo_dataset, grpo_trainer
    device, dtype = ("cpu", torch.float32) if tiny else ("cuda", torch.bfloat16)
    if tiny: torch.set_num_threads(1)  # tiny matrices: one CPU thread is as fast, and far faster on shared cores
    gpu = torch.cuda.get_device_name() if device == "cuda" else "none (--tiny on CPU)"
    rollouts, per_update = questions * generations, per_update or questions
    if questions % per_update or steps % (questions // per_update):
        sys.exit(f"--questions {questions} must split into updates of --per-update {per_update}, "
                 f"and --steps {steps} into whole rounds of {questions // per_update} steps")
    per_round = questions // per_update
    print(f"python {platform.python_version()}, torch {torch.__version__}, transformers {transformers.__version__}, trl {trl.__version__}; "
          f"GPU: {gpu}; {steps} steps of {per_update} questions x {generations} rollouts ({steps // per_round} rounds of {questions} questions), "
          f"{calls} zooms each (at most {max_calls or calls} allowed), micro-batch {micro}")
    t0 = time.perf_counter()
    ds = grpo_dataset(demo_rows(steps * questions, seed=0), style="spec-o3")
    print(f"{len(ds)} simulated questions with spec-o3 overview plots in {time.perf_counter() - t0:.1f} s")
    t0 = time.perf_counter()
    model, processor = build(tiny, device, dtype, size)
    model.train()
    print(f"model: {shape_name(tiny, size)}, {sum(p.numel() for p in model.parameters()) / 1e6:,.1f} M "
          f"parameters, {dtype}, random weights built in {time.perf_counter() - t0:.1f} s")
    forced_generate(model, processor.tokenizer, calls)
    max_calls = max(max_calls or calls, calls)
    budget = completion_budget(processor, max_calls, "spec-o3", 64, 64)  # room for the profile's cap of tool calls
    if device == "cuda": torch.cuda.reset_peak_memory_stats()
    c = clock(device, echo=True)  # each step's time as it ends: a run its time limit stops still says how far it got
    trainer = grpo_trainer(ds, Path(tempfile.mkdtemp(prefix="gpu_grpo_")), init=model, processor=processor, profile="gpu",
                           num_generations=generations, prompts_per_step=questions, prompts_per_update=per_update, micro_batch=micro,
                           max_steps=steps, save_steps=10**6, max_tool_calls=max_calls, reasoning_tokens=64, answer_tokens=64,
                           max_completion_length=budget["total"], shuffle_dataset=False,
                           callbacks=[c], progress=False, **({"bf16": False, "activation_checkpointing": False} if tiny else {}))
    trainer.train()
    log = [r for r in trainer.state.log_history if "reward" in r]
    bad = [r["step"] for r in log if r["tool_calls"] != calls or r["dropped_tool_images"]]
    if bad: sys.exit(f"the forced rollouts did not run as planned at steps {bad}: {log[bad[0] - 1]}")
    rounds = [sum(c.step_s[i:i + per_round]) for i in range(0, len(c.step_s), per_round)]
    if len(rounds) > 1: step, timed = statistics.median(rounds[1:]), f"median of {len(rounds) - 1} after a warm-up"
    else: step, timed = rounds[0], "one round, warm-up included: an upper bound"
    tokens = statistics.median(r["completion_tokens"] for r in (log[1:] or log))
    print(f"per rollout: {tokens:,.0f} completion tokens ({log[-1]['completions/mean_length']:.0f} written by the model, the rest "
          f"tool turns with {calls} plots), {log[-1]['tool_calls']:.0f} tool calls, {sum(r['dropped_tool_images'] for r in log):.0f} plots dropped")
    print(f"step time ({timed}): {step:.2f} s for {rollouts} rollouts in {per_round} "
          f"optimizer step{'s' * (per_round > 1)} "
          f"(generation with tool calls, scoring, forward, backward, optimizer): {rollouts / step:.2f} rollouts/s"
          + (f"; steps {', '.join(f'{x:.1f}' for x in c.step_s)} s" if per_round > 1 else ""))
    if device == "cuda":
        print(f"peak GPU memory: {torch.cuda.max_memory_allocated() / 2**30:.1f} GiB allocated, "
              f"{torch.cuda.max_memory_reserved() / 2**30:.1f} GiB reserved")
    paper = 3 * 3364 * 8  # the paper's 3 epochs over 3364 questions, 8 rollouts each
    print(f"the paper's {paper:,} rollouts at this rate: {paper / (rollouts / step) / 3600:.1f} h on this device")


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=None, help="optimiser steps, the first a warm-up (default 3; 2 with --tiny)")
    p.add_argument("--questions", type=int, default=None, help="questions per step (default 4; 2 with --tiny)")
    p.add_argument("--generations", type=int, default=8, help="rollouts per question (the paper: 8)")
    p.add_argument("--calls", type=int, default=3, help="zooms per rollout (then the answer)")
    p.add_argument("--micro", type=int, default=8, help="rollouts per forward/backward pass")
    p.add_argument("--max-calls", type=int, default=None,
                   help="tool calls a rollout may make (the profile's cap; default --calls)")
    p.add_argument("--per-update", type=int, default=None,
                   help="questions per optimiser step (default: all of a round's)")
    p.add_argument("--size", default="3b", choices=["3b", "7b"], help="the architecture built: Qwen2.5-VL-3B's or 7B's")
    p.add_argument("--tiny", action="store_true", help="the tiny config on CPU, to check the script without a GPU")
    a = p.parse_args()
    main(a.steps or (2 if a.tiny else 3), a.questions or (2 if a.tiny else 4), a.generations, a.calls, a.micro, a.tiny,
         a.size, a.per_update, a.max_calls)
