"""Vetting throughput of a Qwen2.5-VL-3B-shaped (or 7B-shaped) model on one GPU: seconds per spectrum and peak memory.

    python bench/gpu_vet.py [--n 64] [--batch 16] [--calls 3] [--style spec-o3]   # on a CUDA machine, ~1-3 min
    python bench/gpu_vet.py --n 16 --max-new-tokens 320 --turn-tokens 320         # the evaluation's long turns
    .venv/bin/python bench/gpu_vet.py --tiny [--n 8]                              # the same code path on CPU

Builds Qwen2.5-VL-3B's architecture from a config (36 text layers of width 2048, a 32-block vision tower, tied
embeddings: about 3.75 B parameters) with random bf16 weights straight on the GPU — nothing is downloaded — and
vets `n` simulated LAMOST spectra (SpecVI-Sim, cv task) with HFPolicy through speco3.agent.run, batched. Random
weights babble, so every message is forced (constrained decoding; the model still computes every token): `--calls`
zooms, then an answer, 40-60 tokens each. The tokenizer is the tiny one (its ids index the 151 936-row embedding;
Qwen's own tokenizer would write the same text in a similar number of tokens), the image processor has Qwen2.5-VL's
own limits (a full spec-o3 plot costs 476 image tokens, a zoom 260-375). The first batch is a warm-up and is not
timed (`--warmup` sets its size; 0: none, the time then an upper bound).
Prints s/spectrum (model and tool shares), tokens per step, and peak GPU memory. `--size 7b` builds
Qwen2.5-VL-7B's architecture instead (QWEN25_VL_7B below); `--turn-tokens N` lengthens every forced turn's reasoning
to about N tokens, so that the turns are as long as the evaluation's budget (max_new_tokens 320 at gpu and paper)
rather than 40-60 tokens.

Without a GPU it stops at once with a message; `--tiny` swaps in the tiny config on CPU to check the script.
"""
import argparse, platform, sys, tempfile, time
from pathlib import Path
import torch

QWEN25_VL_3B = dict(  # Qwen2.5-VL-3B-Instruct's published config.json (architecture only)
    text=dict(hidden_size=2048, intermediate_size=11008, num_hidden_layers=36, num_attention_heads=16,
              num_key_value_heads=2, vocab_size=151936, max_position_embeddings=128000, rms_norm_eps=1e-6,
              rope_parameters={"rope_type": "default", "rope_theta": 1e6, "mrope_section": [16, 24, 24]}),
    vision=dict(depth=32, hidden_size=1280, intermediate_size=3420, num_heads=16, out_hidden_size=2048,
                window_size=112, fullatt_block_indexes=[7, 15, 23, 31], spatial_merge_size=2, patch_size=14,
                temporal_patch_size=2),
)
QWEN25_VL_7B = dict(  # Qwen2.5-VL-7B-Instruct's published config.json (architecture only): 28 text layers of
    # width 3584, 28 query and 4 key-value heads, MLP 18944, a 152 064-row vocabulary, untied output head; the same
    # vision tower with a 3584-wide merger output (the values of the hub's Qwen/Qwen2.5-VL-7B-Instruct config.json;
    # about 8.29 B parameters)
    text=dict(QWEN25_VL_3B["text"], hidden_size=3584, intermediate_size=18944, num_hidden_layers=28,
              num_attention_heads=28, num_key_value_heads=4, vocab_size=152064),
    vision=dict(QWEN25_VL_3B["vision"], out_hidden_size=3584),
)
SIZES = {"3b": (QWEN25_VL_3B, True), "7b": (QWEN25_VL_7B, False)}  # --size -> (architecture, tie_word_embeddings)


def shape_name(tiny, size):
    "How the outputs name the model built."
    return "tiny" if tiny else f"Qwen2.5-VL-{size.upper()}-shaped"


def pad_thought(thought, tokenizer, turn_tokens, rest):
    "`thought` lengthened with more of the same reasoning until it and `rest` make about `turn_tokens` tokens."
    if not turn_tokens: return thought
    more = " I compare the line's width with the continuum noise and with the next line of the series before deciding."
    out = thought
    while len(tokenizer.encode(out + more + rest, add_special_tokens=False)) <= turn_tokens: out += more
    return out


def script(calls, tokenizer=None, turn_tokens=0):
    """A force function: `calls` zooms over Balmer and He lines, then a YES answer that ends the turn; with
    `turn_tokens` every turn's reasoning is lengthened to about that many tokens (the evaluation's max_new_tokens)."""
    windows = [(6480, 6650, "H-alpha"), (4800, 4920, "H-beta"), (4400, 4720, "He I 4471, He II 4686"),
               (5820, 5920, "He I 5876"), (6640, 6720, "He I 6678"), (3800, 4200, "higher Balmer lines"),
               (7000, 7300, "TiO of a donor star"), (8150, 8230, "Na I 8183/8195")]
    def force(ep):
        if ep.n_tool_calls < calls:
            lo, hi, name = windows[ep.n_tool_calls % len(windows)]
            call = (f'</think>\n<tool_call>{{"name": "spectral_visualization_tool", "arguments": '
                    f'{{"wavelength_range": [{lo}, {hi}], "label": "{name}"}}}}</tool_call>')
            thought = f"Next I check {name}: is the line broad, and is it in emission?"
            return "<think>" + pad_thought(thought, tokenizer, turn_tokens, call) + call
        answer = "</think>\n<answer>\\boxed{YES}</answer><|im_end|>"
        thought = "The Balmer and helium lines are broad and in emission."
        return "<think>" + pad_thought(thought, tokenizer, turn_tokens, answer) + answer
    force.__name__ = f"script_{calls}_calls" + (f"_{turn_tokens}_tokens" if turn_tokens else "")
    return force


def build(tiny, device, dtype, size="3b"):
    "(model, processor): the 3B- or 7B-shaped (or tiny) random model and a processor with Qwen's image limits."
    from transformers import AutoModelForImageTextToText, Qwen2VLImageProcessorPil, Qwen2_5_VLConfig
    from speco3.hf import QwenVLProcessor
    from speco3.prompts import install_template
    from speco3.tiny import tiny_config, tiny_tokenizer
    tok = tiny_tokenizer()
    processor = install_template(QwenVLProcessor(Qwen2VLImageProcessorPil(), tok))
    if tiny:
        config = tiny_config(tok)
    else:
        ids = {k: tok.convert_tokens_to_ids(t) for k, t in [("image_token_id", "<|image_pad|>"), ("video_token_id", "<|video_pad|>"),
               ("vision_start_token_id", "<|vision_start|>"), ("vision_end_token_id", "<|vision_end|>")]}
        arch, tied = SIZES[size]
        text = dict(arch["text"], bos_token_id=tok.pad_token_id, eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id)
        config = Qwen2_5_VLConfig(text_config=text, vision_config=arch["vision"], tie_word_embeddings=tied, **ids)
    torch.manual_seed(0)
    with torch.device(device):
        model = AutoModelForImageTextToText.from_config(config, dtype=dtype)
    model.generation_config.eos_token_id = [tok.eos_token_id, tok.pad_token_id]
    return model.eval(), processor


def main(n, batch, calls, style, tiny, max_new_tokens, size="3b", turn_tokens=0, warmup=None):
    if not tiny and not torch.cuda.is_available():
        sys.exit(f"bench/gpu_vet.py needs a CUDA GPU: torch.cuda.is_available() is False (torch {torch.__version__}). "
                 "Run it with --tiny to check the script on CPU.")
    import transformers
    from speco3.agent import run, read_trajectories
    from speco3.hf import HFPolicy
    from speco3.simulate import simulate
    device, dtype = ("cpu", torch.float32) if tiny else ("cuda", torch.bfloat16)
    if tiny: torch.set_num_threads(1)  # tiny matrices: one CPU thread is as fast, and far faster on shared cores
    gpu = torch.cuda.get_device_name() if device == "cuda" else "none (--tiny on CPU)"
    print(f"python {platform.python_version()}, torch {torch.__version__}, transformers {transformers.__version__}; "
          f"GPU: {gpu}; {n} spectra, batch {batch}, {calls} zooms each, style {style}, max_new_tokens {max_new_tokens}"
          + (f", turns forced to about {turn_tokens} tokens" if turn_tokens else ""))
    t0 = time.perf_counter()
    model, processor = build(tiny, device, dtype, size)
    n_params = sum(p.numel() for p in model.parameters())
    print(f"model: {shape_name(tiny, size)}, {n_params / 1e6:,.1f} M parameters, {dtype}, "
          f"random weights built in {time.perf_counter() - t0:.1f} s")
    policy = HFPolicy(model, processor, device=device, dtype=dtype, max_new_tokens=max_new_tokens, batch_size=batch,
                      force=script(calls, processor.tokenizer, turn_tokens))
    warmup = min(batch, n) if warmup is None else warmup
    items = simulate("cv_dn", n=n + warmup, seed=3)
    tmp = Path(tempfile.mkdtemp(prefix="gpu_vet_"))
    if warmup:  # kernels, caches
        run(items[n:], policy, tmp / "warmup", task="cv", batch_size=batch, progress=False, style=style)
    else: print("no warm-up: the time below includes the first batch's start-up (an upper bound)")
    if device == "cuda": torch.cuda.synchronize(); torch.cuda.reset_peak_memory_stats()
    policy.stats = {k: 0 if isinstance(v, int) else 0.0 for k, v in policy.stats.items()}
    s = run(items[:n], policy, tmp / "run", task="cv", batch_size=batch, progress=False, style=style)
    recs = read_trajectories(tmp / "run")
    bad = [r["sample_id"] for r in recs if r["status"] != "answered" or r["n_tool_calls"] != calls]
    if bad: sys.exit(f"the forced script did not run as planned for {len(bad)} spectra, e.g. {bad[0]}")
    st = policy.stats
    print(f"{s['wall_s'] / n:.3f} s/spectrum ({s['spectra_per_s']:.2f} spectra/s): per spectrum model {s['model_s'] / n:.3f} s, "
          f"tool {s['tool_s'] / n:.3f} s, rest (overview plot, PNG writing) {(s['wall_s'] - s['model_s'] - s['tool_s']) / n:.3f} s")
    print(f"per model step: {st['prompt_tokens'] / st['episodes']:.0f} prompt tokens, {st['new_tokens'] / st['episodes']:.0f} new tokens; "
          f"{st['calls']} batched calls, encode {st['encode_s']:.1f} s, generate {st['generate_s']:.1f} s")
    if device == "cuda":
        print(f"peak GPU memory: {torch.cuda.max_memory_allocated() / 2**30:.1f} GiB allocated, "
              f"{torch.cuda.max_memory_reserved() / 2**30:.1f} GiB reserved")


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n", type=int, default=64, help="spectra timed (a warm-up batch comes first)")
    p.add_argument("--batch", type=int, default=16, help="episodes per generate call")
    p.add_argument("--calls", type=int, default=3, help="zooms per spectrum (then the answer)")
    p.add_argument("--style", default="spec-o3", choices=["spec-o3", "fast"])
    p.add_argument("--max-new-tokens", type=int, default=96)
    p.add_argument("--size", default="3b", choices=sorted(SIZES), help="the architecture built: Qwen2.5-VL-3B's or 7B's")
    p.add_argument("--warmup", type=int, default=None,
                   help="spectra of the untimed warm-up (default: one batch; 0: none)")
    p.add_argument("--turn-tokens", type=int, default=0,
                   help="force every turn to about this many tokens (0: 40-60 each)")
    p.add_argument("--tiny", action="store_true", help="the tiny config on CPU, to check the script without a GPU")
    a = p.parse_args()
    if a.turn_tokens > a.max_new_tokens:
        p.error(f"--turn-tokens {a.turn_tokens} exceeds --max-new-tokens {a.max_new_tokens}")
    main(a.n, a.batch, a.calls, a.style, a.tiny, a.max_new_tokens, a.size, a.turn_tokens, a.warmup)
