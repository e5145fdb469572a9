"""Vetting throughput of a Qwen2.5-VL-3B-shaped model on one GPU: seconds per spectrum and peak memory.

    python bench/gpu_vet.py [--n 64] [--batch 16] [--calls 3] [--style spec-o3]   # on a CUDA machine, ~1-3 min
    .venv/bin/python bench/gpu_vet.py --tiny [--n 8]                              # the same code path on CPU

Builds Qwen2.5-VL-3B's architecture from a config (36 text layers of width 2048, a 32-block vision tower, tied
embeddings: about 3.75 B parameters) with random bf16 weights straight on the GPU — nothing is downloaded — and
vets `n` simulated LAMOST spectra (SpecVI-Sim, cv task) with HFPolicy through speco3.agent.run, batched. Random
weights babble, so every message is forced (constrained decoding; the model still computes every token): `--calls`
zooms, then an answer, 40-60 tokens each. The tokenizer is the tiny one (its ids index the 151 936-row embedding;
Qwen's own tokenizer would write the same text in a similar number of tokens), the image processor has Qwen2.5-VL's
own limits (a full spec-o3 plot costs 476 image tokens, a zoom 260-375). The first batch is a warm-up and is not
timed. Prints s/spectrum (model and tool shares), tokens per step, and peak GPU memory.

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


def script(calls):
    "A force function: `calls` zooms over Balmer and He lines, then a YES answer that ends the turn."
    windows = [(6480, 6650, "H-alpha"), (4800, 4920, "H-beta"), (4400, 4720, "He I 4471, He II 4686"),
               (5820, 5920, "He I 5876"), (6640, 6720, "He I 6678"), (3800, 4200, "higher Balmer lines"),
               (7000, 7300, "TiO of a donor star"), (8150, 8230, "Na I 8183/8195")]
    def force(ep):
        if ep.n_tool_calls < calls:
            lo, hi, name = windows[ep.n_tool_calls % len(windows)]
            return (f"<think>Next I check {name}: is the line broad, and is it in emission?</think>\n"
                    f'<tool_call>{{"name": "spectral_visualization_tool", "arguments": {{"wavelength_range": [{lo}, {hi}], '
                    f'"label": "{name}"}}}}</tool_call>')
        return "<think>The Balmer and helium lines are broad and in emission.</think>\n<answer>\\boxed{YES}</answer><|im_end|>"
    force.__name__ = f"script_{calls}_calls"
    return force


def build(tiny, device, dtype):
    "(model, processor): the 3B-shaped (or tiny) random model and a processor with Qwen's image limits."
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
        text = dict(QWEN25_VL_3B["text"], bos_token_id=tok.pad_token_id, eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id)
        config = Qwen2_5_VLConfig(text_config=text, vision_config=QWEN25_VL_3B["vision"], tie_word_embeddings=True, **ids)
    torch.manual_seed(0)
    with torch.device(device):
        model = AutoModelForImageTextToText.from_config(config, dtype=dtype)
    model.generation_config.eos_token_id = [tok.eos_token_id, tok.pad_token_id]
    return model.eval(), processor


def main(n, batch, calls, style, tiny, max_new_tokens):
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
          f"GPU: {gpu}; {n} spectra, batch {batch}, {calls} zooms each, style {style}")
    t0 = time.perf_counter()
    model, processor = build(tiny, device, dtype)
    n_params = sum(p.numel() for p in model.parameters())
    print(f"model: {'tiny' if tiny else 'Qwen2.5-VL-3B-shaped'}, {n_params / 1e6:,.1f} M parameters, {dtype}, "
          f"random weights built in {time.perf_counter() - t0:.1f} s")
    policy = HFPolicy(model, processor, device=device, dtype=dtype, max_new_tokens=max_new_tokens, batch_size=batch,
                      force=script(calls))
    items = simulate("cv_dn", n=n + min(batch, n), seed=3)
    tmp = Path(tempfile.mkdtemp(prefix="gpu_vet_"))
    run(items[n:], policy, tmp / "warmup", task="cv", batch_size=batch, progress=False, style=style)  # kernels, caches
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
    p.add_argument("--tiny", action="store_true", help="the tiny config on CPU, to check the script without a GPU")
    a = p.parse_args()
    main(a.n, a.batch, a.calls, a.style, a.tiny, a.max_new_tokens)
