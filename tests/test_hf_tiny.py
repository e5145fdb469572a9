"""The tiny offline Qwen2.5-VL (speco3.tiny, nbs/09b_tiny.ipynb) and the Hugging Face policy (speco3.hf,
nbs/08b_hf.ipynb): the build is offline and deterministic, the folder loads like a checkpoint, HFPolicy drives the
real agent loop end to end (a random model that babbles, and a model overfit to call the tool and answer), decoding
is deterministic and batch-independent, failures stay with their episode, and TRL accepts the template on the real
processor. Skips when torch/transformers are not installed (they are the `train` extra)."""
import json, subprocess, sys
import numpy as np
import pytest

pytest.importorskip("torch", reason="torch is not installed (pip install 'speco3[train]')")
pytest.importorskip("transformers", reason="transformers is not installed (pip install 'speco3[train]')")
import torch
import huggingface_hub.constants as hub_constants
from transformers import AutoModelForImageTextToText

from speco3.spectrum import Spectrum, lamost_wavelength
from speco3.render import render
from speco3.policy import Episode
from speco3.prompts import build_messages, RESPONSE_TEMPLATE
from speco3.tool import TOOL_SCHEMA, TOOL_NAME
from speco3.agent import inspect, inspect_batch, run, read_trajectories
from speco3.hf import HFPolicy, QwenVLProcessor, KEEP_TOKENS
from speco3.tiny import (TINY_SIZES, SPECIAL_TOKENS, build_tiny, load_tiny, tiny_config, tiny_tokenizer, overfit,
                         scripted_conversations)

W = lamost_wavelength()
CALL = ('<think>There may be a broad emission line near 6563 Å.</think>\n<tool_call>\n{"name": "spectral_visualization_tool", '
        '"arguments": {"wavelength_range": [6480, 6650], "label": "H-alpha"}}\n</tool_call>')  # the authors' format
ANSWER = "<think>H-alpha is broad.</think>\n<answer>\\boxed{YES}</answer>"
STATUSES = {"answered", "no_answer", "turn_limit", "policy_error"}


def spectrum(i, z=0.0):
    "A blue continuum with a broad Hα emission line and noise (seed i), at redshift z."
    rng = np.random.default_rng(i)
    rest = W / (1 + z)
    f = 2 - rest / 9000 + 0.8 * np.exp(-0.5 * ((rest - 6564.6) / 15) ** 2) + rng.normal(0, 0.02, len(W))
    return Spectrum(W, f, redshift=z, meta={"id": f"halpha-{i}"})


def episode(i, task="cv", guidelines=True):
    s = spectrum(i)
    return Episode(f"s{i}", task, build_messages(task, image=render(s, style="fast"), tools=True, guidelines=guidelines), s)


pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    "Two tiny models: Qwen's init (std 0.02, writes one token everywhere) and std 0.2 (input-dependent babble)."
    root = tmp_path_factory.mktemp("tiny")
    return {"quiet": build_tiny(root / "quiet"), "lively": build_tiny(root / "lively", init_std=0.2)}


@pytest.fixture(scope="module")
def trained(folders):
    "The quiet tiny model overfit on one scripted cv trajectory: zoom on Hα, then answer YES."
    chats = scripted_conversations([spectrum(100)], [CALL, ANSWER], task="cv", style="fast", guidelines=False)
    model, processor = load_tiny(folders["quiet"]["path"])
    losses = overfit(model, processor, chats)
    assert losses[-1] < 0.1 < losses[0], losses
    return model, processor


# --- the build -------------------------------------------------------------------------------------------------------

def test_build_is_deterministic_offline_and_loads(tmp_path, folders, monkeypatch):
    monkeypatch.setattr(hub_constants, "HF_HUB_OFFLINE", True)  # any hub request would now raise
    a = build_tiny(tmp_path / "a")
    assert a["sha256"] == folders["quiet"]["sha256"]                     # same seed, same bytes
    assert build_tiny(tmp_path / "b", seed=1)["sha256"] != a["sha256"]
    assert 1e6 < a["params"] < 2e6 and a["seconds"] < 10
    model = AutoModelForImageTextToText.from_pretrained(tmp_path / "a")
    assert type(model).__name__ == "Qwen2_5_VLForConditionalGeneration"
    model, processor = load_tiny(tmp_path / "a")
    assert isinstance(processor, QwenVLProcessor)
    assert processor.chat_template == processor.tokenizer.chat_template and "{%- generation %}" in processor.chat_template
    assert processor.tokenizer.response_template == RESPONSE_TEMPLATE
    assert HFPolicy(str(tmp_path / "a"), max_new_tokens=2).act([episode(0, guidelines=False)])[0] is not None


def test_sizes():
    tok = tiny_tokenizer()
    counts = {}
    for size in TINY_SIZES:
        cfg = tiny_config(tok, size)
        text = cfg.text_config
        assert sum(text.rope_parameters["mrope_section"]) == text.hidden_size // text.num_attention_heads // 2
        with torch.device("meta"):
            counts[size] = sum(p.numel() for p in AutoModelForImageTextToText.from_config(cfg).parameters())
    assert 1e6 < counts["tiny"] < 2e6 and 5e6 < counts["small"] < 7e6 and 35e6 < counts["base"] < 45e6, counts


def test_tokenizer_tags_survive_decoding():
    tok = tiny_tokenizer()
    for t in SPECIAL_TOKENS + KEEP_TOKENS: assert len(tok(t)["input_ids"]) == 1, t
    ids = tok(CALL + "<|im_end|>")["input_ids"]
    assert tok.decode(ids, skip_special_tokens=True) == CALL
    assert 3900 <= len(tok) <= 4096


# --- the policy in the agent loop ------------------------------------------------------------------------------------

def test_random_model_runs_the_loop_end_to_end(folders, tmp_path):
    policy = HFPolicy(folders["quiet"]["path"], max_new_tokens=16)
    samples = [spectrum(i, z) for i, z in enumerate([0.0, 0.01, 0.2])]
    trajs = inspect_batch(samples, policy, task="cv", style="fast", max_tool_calls=2)
    for t in trajs:
        assert t.status in STATUSES and t.status != "policy_error", t.error
        assert (t.status == "answered") == (t.prediction is not None)
        assert t.turns and all(isinstance(x.text, str) for x in t.turns)
        assert t.policy["name"] == "hf" and t.policy["template"] == "speco3" and t.style == "fast/1"
    summary = run(samples, policy, tmp_path / "run", task="cv", style="fast", progress=False, max_tool_calls=2)
    records = read_trajectories(tmp_path / "run")
    assert summary["n_run"] == 3 and [r["sample_id"] for r in records] == [t.sample_id for t in trajs]
    assert [r["turns"][0]["text"] for r in records] == [t.turns[0].text for t in trajs]  # greedy: same text again


def test_overfit_model_zooms_then_answers(trained, tmp_path):
    model, processor = trained
    policy = HFPolicy(model, processor, max_new_tokens=64)
    t = inspect(spectrum(7, 0.05), policy, task="cv", style="fast", guidelines=False)
    assert (t.status, t.prediction, t.n_tool_calls, t.format_ok) == ("answered", "YES", 1, True)
    assert [x.text for x in t.turns] == [CALL, ANSWER]  # stopped at </tool_call>: the tool, not the model, answered
    res = t.turns[0].results[0]
    assert res["ok"] and res["window"] == [6480.0, 6650.0] and res["image"].size == (448, 336)
    rec = t.to_record(tmp_path)
    assert (tmp_path / rec["turns"][0]["results"][0]["image"]["path"]).exists()
    json.dumps(rec)


def test_greedy_and_sampling_are_reproducible_and_batch_independent(folders):
    path = folders["lively"]["path"]
    eps = [episode(0), episode(1, "wd"), episode(2, "cv", guidelines=False), episode(3, "gm")]
    greedy = HFPolicy(path, max_new_tokens=12, batch_size=4)
    together = greedy.act(eps)
    assert together == [greedy.act([e])[0] for e in eps]   # left padding and 3-D positions are right
    assert len(set(together)) == 4                          # outputs depend on the input (so the line above can fail)
    assert HFPolicy(path, max_new_tokens=12, batch_size=2).act(eps) == together
    sample = lambda seed: HFPolicy(path, do_sample=True, seed=seed, max_new_tokens=12).act(eps)
    assert sample(5) == sample(5) and sample(5) != sample(6)


def test_failures_stay_with_their_episode(folders):
    policy = HFPolicy(folders["quiet"]["path"], max_new_tokens=4, max_length=800)
    broken = episode(9, guidelines=False)
    broken.messages[1]["content"][0] = {"type": "image"}  # placeholder without an image
    out = policy.act([episode(0, guidelines=False), broken, episode(1)])  # the last is ~1 050 tokens > 800
    assert isinstance(out[0], str)
    assert isinstance(out[1], ValueError) and "without an image" in str(out[1])
    assert isinstance(out[2], ValueError) and "beyond the context of 800 tokens" in str(out[2])


def test_hub_id_offline_error(monkeypatch):
    monkeypatch.setattr(hub_constants, "HF_HUB_OFFLINE", True)
    with pytest.raises(OSError) as e:
        HFPolicy("speco3-nobody/not-a-model")
    assert str(e.value) == "could not load speco3-nobody/not-a-model: no network and not in the local cache; pass a local folder"
    with pytest.raises(FileNotFoundError, match="no such folder"):
        HFPolicy("./no/such/folder")


# --- the template with TRL and the real processor --------------------------------------------------------------------

def test_trl_accepts_the_template_on_the_tiny_processor(folders):
    trl = pytest.importorskip("trl", reason="trl is not installed")
    from trl import chat_template_utils as ctu
    _, processor = load_tiny(folders["quiet"]["path"])
    for pc in (processor, processor.tokenizer):
        assert ctu.supports_tool_calling(pc)
        assert ctu.is_chat_template_prefix_preserving(pc)
        assert ctu.is_chat_template_stop_token_trained(pc)


def test_spec_o3_reply_round_trips_through_trl_parse_response(folders):
    pytest.importorskip("trl", reason="trl is not installed")
    from trl.chat_template_utils import parse_response
    _, processor = load_tiny(folders["quiet"]["path"])
    tok = processor.tokenizer
    call = {"type": "function", "function": {"name": TOOL_NAME, "arguments": {"wavelength_range": [6480, 6650], "label": "H-alpha"}}}
    think = "<think>There may be a broad emission line near 6563 Å.</think>"
    prompt = build_messages("cv", image=render(spectrum(0), style="fast"), tools=True, guidelines=False)
    prompt_ids = processor.apply_chat_template(prompt, tokenize=True, add_generation_prompt=True, return_dict=False)[0]
    structured = prompt + [{"role": "assistant", "content": think, "tool_calls": [call]}]
    full_ids = processor.apply_chat_template(structured, tokenize=True, return_dict=False)[0]
    assert full_ids[:len(prompt_ids)] == prompt_ids
    parsed = parse_response(tok, full_ids[len(prompt_ids):], prefix=prompt_ids, tools=[TOOL_SCHEMA])
    assert parsed["content"].strip() == think and parsed["tool_calls"] == [call]
    # what HFPolicy returns (it stops at </tool_call>) parses the same, and the agent's raw-text message renders the
    # same tokens as the structured one SFT data uses
    parsed = parse_response(tok, tok(CALL)["input_ids"], prefix=prompt_ids, tools=[TOOL_SCHEMA])
    assert parsed["tool_calls"] == [call]
    raw = processor.apply_chat_template(prompt + [{"role": "assistant", "content": CALL}], tokenize=True, return_dict=False)[0]
    assert raw == full_ids
    # a malformed call is not an error: TRL falls back to plain text
    bad = parse_response(tok, tok('<tool_call>{"name": "x", "arguments": {"wavelength_range": [6480, </tool_call><|im_end|>')["input_ids"])
    assert "tool_calls" not in bad and "<tool_call>" in bad["content"]


def test_policy_and_agent_stay_torch_free():
    code = "import sys, speco3.policy, speco3.agent; print([m for m in ('torch', 'transformers') if m in sys.modules])"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == "[]"


def test_p_yes_is_the_answer_tokens_two_way_softmax(trained):
    """p(YES) of the overfit model's answer: in [0, 1]; equal (to 1e-4) to softmax over the YES/NO first tokens of the
    logits `generate` itself returned at the answer position (recomputed here without `_p_yes`) and to the extra forward
    pass `_p_yes` falls back on when the logits were not kept; and, decoding being
    greedy, the answer token is the arg-max, so a YES answer has p(YES) >= 0.5. The agent copies it into the record."""
    model, processor = trained
    policy = HFPolicy(model, processor, max_new_tokens=64)
    t = inspect(spectrum(7, 0.05), policy, task="cv", style="fast", guidelines=False)
    assert t.prediction == "YES" and t.p_yes is not None and 0.5 <= t.p_yes <= 1
    # the final message again, with generate's logits kept: the same prompt the agent built for the second turn
    eps = []
    class Keep(HFPolicy):
        def act(self, episodes): eps.extend(episodes); return super().act(episodes)
    inspect(spectrum(7, 0.05), Keep(model, processor, max_new_tokens=64), task="cv", style="fast", guidelines=False)
    ep = eps[-1]
    assert ep.messages[-1] == {"role": "assistant", "content": ANSWER}    # the agent appended the answer: ask without it
    enc = policy._encode(Episode(ep.sample_id, ep.task, ep.messages[:-1], ep.spectrum))
    batch = {k: v for k, v in enc.items()}
    with torch.inference_mode():
        out = model.generate(**batch, generation_config=policy._generation_config(enc["input_ids"].shape[1]),
                             output_logits=True, return_dict_in_generate=True)
    new = out.sequences[0, enc["input_ids"].shape[1]:]
    tok = processor.tokenizer
    text = policy._decode(new)
    assert text == ANSWER
    k, yes, no = policy._answer_position(new, text)
    assert tok.decode(new[:k].tolist()).endswith("\\boxed") or tok.decode(new[:k].tolist()).endswith("\\boxed{")
    assert int(new[k]) == yes and tok.decode([yes]).endswith("YES") and tok.decode([no]).endswith("NO")
    logits = out.logits[k][0].float()
    assert int(logits.argmax()) == yes                                    # greedy: the answer token is the arg-max
    two = torch.softmax(torch.stack([logits[yes], logits[no]]), 0)
    assert abs(float(two[0]) - ep.meta["p_yes"]) < 1e-4 and abs(ep.meta["p_yes"] - t.p_yes) < 1e-6
    assert abs(policy._p_yes(enc, new, text) - ep.meta["p_yes"]) < 1e-5    # the extra forward pass (nothing kept) agrees
    kept = policy._answer_ids()
    assert yes in kept and no in kept and len(kept) < len(tok)             # the candidates generate kept: a few, not the vocabulary
    assert policy._answer_position(new, "<think>x</think>\n<answer>maybe</answer>") is None   # no boxed answer: none
