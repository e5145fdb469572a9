"""GRPO with multi-turn image tool calls (speco3.grpo, nbs/14_grpo.ipynb) on the tiny offline Qwen2.5-VL, overfit to
zoom once and answer: a real GRPO step's loss mask, decoded, trains exactly the model's own turns and none of the tool's
text or plot tokens; the prompt TRL renders, with the tool TRL collected from the environment, equals the SFT prompt;
a tool turn costs exactly what `tool_turn_tokens` says; a completion budget too small for the plot makes TRL drop it
and the log counts every drop; the paper budget holds eight of the largest plots; a run killed after its step-2
checkpoint resumes to the same weights as an unbroken run. Skips without the `train` extra."""
import json
import numpy as np
import pytest

pytest.importorskip("torch", reason="torch is not installed (pip install 'speco3[train]')")
pytest.importorskip("trl", reason="trl is not installed (pip install 'speco3[train]')")
import torch
from transformers import AutoModelForImageTextToText, TrainerCallback
from transformers.utils import get_json_schema
from trl.data_utils import prepare_multimodal_messages

from speco3.agent import LIMIT_TEXT
from speco3.prompts import PAPER_TASKS, build_messages, render_chat
from speco3.render import FAST_SIZE
from speco3.tiny import build_tiny, load_tiny, overfit, scripted_conversations, tiny_processor
from speco3.tool import TOOL_SCHEMA, SpectralVisualizationTool
from speco3.profiles import GRPO
from speco3.grpo import (LARGEST_IMAGE, SpectralToolEnv, completion_budget, demo_rows, grpo_dataset, grpo_trainer,
                         paper_processor, tool_turn_tokens, train_grpo)
from speco3.grpo import _mask_runs as mask_runs, _record_batches as record_batches  # the chapter's inspection helpers

CALL = ('<think>Is there broad Balmer emission? I zoom on H-alpha.</think>\n<tool_call>{"name": "spectral_visualization_tool", '
        '"arguments": {"wavelength_range": [6480, 6650], "label": "H-alpha"}}</tool_call>')
ANSWER = "<think>The line settles it.</think>\n<answer>\\boxed{YES}</answer>"
RUN = dict(profile="smoke", temperature=0.1, prompt="paper", progress=False)  # 4 rollouts (2 questions x 2) per step, <= 2 calls each;
# the paper's prompt here (the zoomer learnt it); the brief path has its own test below
TOOL_TURN = ("\n<|im_start|>user\n<tool_response>\n<|vision_start|>", "</tool_response><|im_end|>\n<|im_start|>assistant\n")


pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py


@pytest.fixture(scope="module")
def rows():
    return demo_rows(4, tasks=("cv",), guidelines=False)


@pytest.fixture(scope="module")
def data(rows):
    return grpo_dataset(rows, style="fast")


@pytest.fixture(scope="module")
def zoomer(rows, tmp_path_factory):
    "A tiny model overfit on one scripted cv inspection: zoom on H-alpha, then answer YES."
    path = tmp_path_factory.mktemp("zoomer")
    build_tiny(path)
    model, processor = load_tiny(path)
    losses = overfit(model, processor, scripted_conversations(rows[:1], [CALL, ANSWER], style="fast", guidelines=False))
    assert losses[-1] < 0.1 < losses[0], losses
    model.save_pretrained(path)
    return path


@pytest.fixture(scope="module")
def step(data, zoomer, tmp_path_factory):
    "One real GRPO step: the trainer and the batch it trained on."
    trainer = grpo_trainer(data, tmp_path_factory.mktemp("step"), init=zoomer, max_steps=1, **RUN)
    batches = record_batches(trainer)
    trainer.train()
    return trainer, batches[0]


# --- the loss mask of a real multi-turn rollout ----------------------------------------------------------------------

def test_a_real_step_trains_the_model_turns_and_masks_every_tool_token(step):
    trainer, b = step
    tok = trainer.processing_class.tokenizer
    pad = tok.convert_tokens_to_ids("<|image_pad|>")
    n_zoomed, n_trained = 0, 0
    for i in range(len(b["completion_ids"])):
        ids, cm, tm = b["completion_ids"][i], b["completion_mask"][i], b["tool_mask"][i]
        assert not ((tm * cm).bool() & (ids == pad)).any()           # no plot token carries the loss
        assert int(((ids == pad) & cm.bool()).sum()) % 54 == 0          # whole plots only (54 tokens each, tiny limits)
        runs = mask_runs(ids, cm, tm, tok)
        assert runs[0][0]                                              # the model's first token trains
        for k, (trained, text) in enumerate(runs):
            if trained:
                assert "<tool_response>" not in text and "<|image_pad|>" not in text
                assert "Generated spectral visualization" not in text
                assert text.endswith("<|im_end|>") or k == len(runs) - 1
            else:
                assert text.startswith(TOOL_TURN[0]) and text.endswith(TOOL_TURN[1])
                assert "<|image_pad|>" * 54 + "<|vision_end|>Generated spectral visualization focused on wavelength range" in text
        n_zoomed += any(not t for t, _ in runs)
        n_trained += int((cm * tm).sum())
    assert n_zoomed == len(b["completion_ids"])                          # the overfit model zoomed in every rollout
    log = trainer.state.log_history[0]
    assert n_trained == pytest.approx(log["completions/mean_length"] * len(b["completion_ids"]))  # TRL counts the same tokens
    assert log["tool_calls"] == 1.0 and log["dropped_tool_images"] == 0 and log["accuracy"] in (0.0, 0.5, 1.0)


def test_a_tool_turn_costs_what_the_budget_says(step):
    "TRL's own tool-suffix tokens for a real plot and reply equal `tool_turn_tokens` (the budget's T)."
    trainer, _ = step
    w = np.linspace(3800, 9000, 800)
    r = SpectralVisualizationTool(w, 1 + 0.1 * np.sin(w / 40), style="fast").execute([6480, 6650], "H-alpha")
    msg = {"role": "tool", "name": "spectral_visualization_tool", "content": [{"type": "image", "image": r.image}, {"type": "text", "text": r.text}]}
    assert len(trainer._get_tool_suffix_ids([msg])) == tool_turn_tokens(trainer.processing_class, r.image.size, r.text)


def test_the_prompt_trl_renders_is_the_sft_prompt(step, data):
    trainer, _ = step
    tools = trainer._env_tools[None]                                 # what TRL collected from the environment
    assert len(tools) == 1 and dict(tools[0]) == TOOL_SCHEMA
    ex = data[0]
    grpo = trainer.processing_class.apply_chat_template(prepare_multimodal_messages(ex["prompt"], ex["images"]), tools=tools,
                                                        add_generation_prompt=True, tokenize=False)
    assert grpo == render_chat(build_messages("cv", image=ex["images"][0], guidelines=False, tools=True), add_generation_prompt=True)
    # why the environment hands TRL a schema dict: the method's own schema cannot carry minItems/maxItems
    assert get_json_schema(SpectralToolEnv.spectral_visualization_tool) != TOOL_SCHEMA


def test_the_vision_markup_is_never_sampled(step):
    "TRL suppresses only the image pad; a sampled video pad crashes Qwen2.5-VL's training forward (found in the cpu run)."
    trainer, _ = step
    tok = trainer.processing_class.tokenizer
    ids = {tok.convert_tokens_to_ids(t) for t in ("<|image_pad|>", "<|video_pad|>", "<|vision_start|>", "<|vision_end|>")}
    assert ids <= set(trainer.generation_config.suppress_tokens)


def test_prompts_match_for_every_task_with_guidelines():
    ds = grpo_dataset(demo_rows(5), style="fast")
    processor, env = tiny_processor(), SpectralToolEnv(style="fast")
    for ex in ds:
        grpo = processor.apply_chat_template(prepare_multimodal_messages(ex["prompt"], ex["images"]), tools=[env.spectral_visualization_tool],
                                             add_generation_prompt=True, tokenize=False)
        assert grpo == render_chat(build_messages(ex["task"], image=ex["images"][0], tools=True), add_generation_prompt=True)
    assert sorted(ds["task"]) == sorted(PAPER_TASKS)


# --- dropped plots ---------------------------------------------------------------------------------------------------

def test_a_plot_that_does_not_fit_is_dropped_and_counted(data, zoomer, tmp_path):
    with pytest.warns(UserWarning, match="dropped_tool_images"):
        trainer = grpo_trainer(data, tmp_path, init=zoomer, max_steps=1, max_completion_length=100, **RUN)
    batches = record_batches(trainer)
    trainer.train()
    log, b = trainer.state.log_history[0], batches[0]
    tok = trainer.processing_class.tokenizer
    kept = sum(int((row == tok.convert_tokens_to_ids("<|vision_start|>")).sum()) for row in b["completion_ids"])
    assert kept == 0 and log["tools/call_frequency"] == 1.0           # every rollout called, no plot stayed
    assert log["dropped_tool_images"] == 4 and log["dropped_tool_results"] == 4
    assert trainer.speco3["budget"]["total"] > 100


def test_a_round_of_error_replies_keeps_the_loop_alive(rows, zoomer, tmp_path):
    "The zoomer asks for H-alpha, which these spectra (z = 0.6) do not cover: every reply is an error text, no plot comes back."
    far = []
    for r in rows:
        r = json.loads(json.dumps({k: r[k] for k in ("prompt", "reward_model", "data_source", "extra_info", "images")}))
        r["extra_info"]["tools_kwargs"]["spectral_visualization_tool"]["create_kwargs"]["redshift"] = 0.6
        far.append(r)
    trainer = grpo_trainer(grpo_dataset(far, style="fast"), tmp_path, init=zoomer, max_steps=1, **RUN)
    batches = record_batches(trainer)
    trainer.train()
    log, tok = trainer.state.log_history[0], trainer.processing_class.tokenizer
    assert log["tools/call_frequency"] >= 1.0 and log["dropped_tool_results"] == 0
    text = tok.decode(batches[0]["completion_ids"][0], skip_special_tokens=False)
    assert "is invalid or outside the available data range" in text and "<|image_pad|>" not in text


def test_the_paper_budget_holds_eight_of_the_largest_plots():
    b = completion_budget(paper_processor(), calls=8, style="spec-o3", reasoning_tokens=512, answer_tokens=512)
    assert b["image_tokens"] == 476 and b["tool_turn"] > 476   # the full view, 792 × 472 px
    assert b["total"] == 8 * (512 + b["call"] + b["tool_turn"]) + 512 <= GRPO["paper"].max_completion_length
    assert GRPO["gpu"].max_completion_length <= GRPO["paper"].max_completion_length == 32768  # the authors' response length
    w = np.linspace(3600, 10400, 12000)  # a full view: the spec-o3 style's largest figure
    assert SpectralVisualizationTool(w, 1 + 0.1 * np.sin(w / 40)).execute().image.size == LARGEST_IMAGE["spec-o3"]
    assert completion_budget(tiny_processor(), 8, "fast", 160, 160)["total"] <= GRPO["cpu"].max_completion_length
    assert LARGEST_IMAGE["fast"] == FAST_SIZE


def test_the_environment_answers_eight_calls(rows):
    env = SpectralToolEnv(style="fast")
    env.reset(create_kwargs=rows[0]["extra_info"]["tools_kwargs"]["spectral_visualization_tool"]["create_kwargs"])
    out = [env.spectral_visualization_tool(wavelength_range=[6400 + 10 * k, 6700]) for k in range(9)]
    assert all(o[0]["type"] == "image" for o in out[:8]) and out[8] == LIMIT_TEXT
    assert (env.n_calls, env.n_images, len(env.results)) == (8, 8, 9)


# --- a run, killed and resumed ---------------------------------------------------------------------------------------

def test_each_epoch_order_depends_only_on_seed_and_epoch(step):
    "A resumed run builds a fresh sampler; at epoch 1 it must draw what an unbroken run draws after epoch 0."
    trainer, _ = step
    unbroken = trainer._get_train_sampler()
    unbroken.set_epoch(0); first = list(unbroken)
    unbroken.set_epoch(1); second = list(unbroken)
    resumed = trainer._get_train_sampler()
    resumed.set_epoch(1)
    assert list(resumed) == second and sorted(first) == sorted(second)

class Kill(TrainerCallback):
    "Stops the run right after the step-2 checkpoint is on disk, as a kill would."
    def on_save(self, args, state, control, **kw):
        if state.global_step == 2: raise RuntimeError("simulated kill")


def weights(path):
    return AutoModelForImageTextToText.from_pretrained(path).state_dict()


def test_kill_then_resume_matches_an_unbroken_run(data, zoomer, tmp_path):
    run = dict(RUN, temperature=1.0, max_steps=4, save_steps=2)  # varied rollouts: non-zero advantages, moving weights
    unbroken = train_grpo(data, tmp_path / "unbroken", init=zoomer, **run)
    with pytest.raises(RuntimeError, match="simulated kill"):
        train_grpo(data, tmp_path / "killed", init=zoomer, callbacks=[Kill()], **run)
    resumed = train_grpo(data, tmp_path / "killed", init=zoomer, **run)
    assert resumed["resumed_from"] == "checkpoint-2" and resumed["global_step"] == 4
    a, b, start = weights(unbroken["model_dir"]), weights(resumed["model_dir"]), weights(zoomer)
    # The resumed run restores the same RNG states, weights and optimizer state at step 2 and samples the same
    # rollouts; the update computed after a resume can still differ in float rounding, which Adam's normalised
    # step amplifies (seen with the current stack: gaps of 2.5e-6 to 1.4e-5 against a training movement of ~4e-4).
    # So "the same weights" is relative: the gap is under a tenth of how far training moved the weights.
    moved = max(float((a[k].float() - start[k].float()).abs().max()) for k in a)
    gap = max(float((a[k].float() - b[k].float()).abs().max()) for k in a)
    assert moved > 1e-4 and gap < 0.1 * moved, (moved, gap)         # training moved the weights; resuming lands on them
    rows = open(unbroken["rewards_csv"]).read().splitlines()
    assert rows[0].startswith("step,reward,reward_std,accuracy,format_valid,tool_calls") and len(rows) == 5
    m = json.loads(open(tmp_path / "unbroken" / "metrics.json").read())
    assert m["logged_steps"] == 4 and m["rollouts_this_session"] == 16 and m["dropped_tool_images"] == 0
    assert m["reward_first_fifth"] is not None and m["budget"]["total"] <= 768
    again = train_grpo(data, tmp_path / "killed", init=zoomer, **run)  # finished: nothing more trains
    assert again["global_step"] == 4 and again["resumed_from"] == "checkpoint-2"
    assert max(int(p.name.split("-")[1]) for p in (tmp_path / "killed" / "checkpoints").glob("checkpoint-*")) == 4
    with pytest.raises(ValueError, match="resume=True"):
        train_grpo(data, tmp_path / "killed", init=zoomer, resume=False, **run)
    with pytest.raises(ValueError, match="other settings"):
        train_grpo(data, tmp_path / "killed", init=zoomer, **dict(run, learning_rate=1e-3))


def test_cpu_profile_needs_an_sft_checkpoint(data, tmp_path):
    with pytest.raises(ValueError, match="SFT checkpoint"):
        grpo_trainer(data, tmp_path, profile="cpu", progress=False)


def test_the_brief_prompt_trl_renders_is_the_brief_sft_prompt(rows, zoomer, tmp_path):
    "smoke asks in the brief style: TRL passes the tool schemas, the template leaves them out, and the text is SFT's restyled one."
    import shutil
    from speco3.hf import save_context, saved_context
    from speco3.prompts import restyle
    model = tmp_path / "model"; shutil.copytree(zoomer, model); save_context(model, prompt="paper")
    with pytest.warns(UserWarning, match="trained with the 'paper' prompt"):
        trainer = grpo_trainer(grpo_dataset(rows, style="fast", prompt="brief"), tmp_path / "run", init=model, profile="smoke", max_steps=1, progress=False)
    assert trainer.args.chat_template_kwargs == {"tools_in_system": False}
    ex = trainer.train_dataset[0]
    grpo = trainer.processing_class.apply_chat_template(prepare_multimodal_messages(ex["prompt"], ex["images"]), tools=trainer._env_tools[None],
                                                        add_generation_prompt=True, tokenize=False, **trainer.args.chat_template_kwargs)
    sft = render_chat(restyle(build_messages("cv", image=ex["images"][0], tools=True), "brief"), add_generation_prompt=True)
    assert grpo == sft and "<tools>" not in grpo and "Vet one spectrum plot." in grpo
    save_context(model, prompt="brief")
    run = train_grpo(grpo_dataset(rows[:2], style="fast", prompt="brief"), tmp_path / "trained", init=model, profile="smoke", max_steps=1, progress=False)
    assert saved_context(run["model_dir"]) == {"keep_plots": None, "prompt": "brief"}   # HFPolicy will ask in it
