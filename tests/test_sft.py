"""Cold-start SFT (speco3.sft, nbs/13_sft.ipynb) on the tiny offline Qwen2.5-VL: a real batch from the trainer's own
data loader trains exactly the assistant replies; the vision tower and merger are frozen and unchanged by training;
a run killed after its step-2 checkpoint resumes to the same weights as an unbroken run; the same seed gives the same
loss curve and another seed a different one; LoRA trains only adapters on the language model and saves a merged model;
resuming with other settings or starting over on top of checkpoints is refused. Skips without the `train` extra."""
import csv, json
from pathlib import Path
import pytest
from conftest import optional_extra

pytest.importorskip("torch", reason="torch is not installed (pip install 'speco3[train]')")
pytest.importorskip("trl", reason="trl is not installed (pip install 'speco3[train]')")
import torch
from transformers import AutoModelForImageTextToText, TrainerCallback

import speco3
from speco3.prompts import render_chat, restyle
from speco3.profiles import SFT
from speco3.sft import (as_sft_dataset, assistant_spans, conversation_to_example, demo_conversations, settle,
                        sft_dataset, sft_trainer, train_sft, trained_spans, accelerate_config)

RUN = dict(profile="smoke", max_steps=4, save_steps=2, progress=False)  # 4 steps of 2 conversations, checkpoints at 2 and 4


pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py


@pytest.fixture(scope="module")
def chats():
    return demo_conversations(8, seed=3, guidelines=False)


@pytest.fixture(scope="module")
def unbroken(chats, tmp_path_factory):
    "An uninterrupted 4-step run."
    return train_sft(chats, tmp_path_factory.mktemp("sft") / "unbroken", **RUN)


def weights(path):
    return AutoModelForImageTextToText.from_pretrained(path).state_dict()


def losses(result):
    return [float(r["loss"]) for r in csv.DictReader(open(result["loss_csv"]))]


class Kill(TrainerCallback):
    "Stops the run right after the step-2 checkpoint is on disk, as a kill would."
    def on_save(self, args, state, control, **kw):
        if state.global_step == 2: raise RuntimeError("simulated kill")


# --- data ------------------------------------------------------------------------------------------------------------

def test_rows_keep_the_rendered_text_and_images(chats):
    for chat in chats:
        ex = conversation_to_example(chat)
        msgs = json.loads(ex["messages"])
        assert render_chat(msgs) == render_chat(chat)  # structured tool calls render the model's own text
        calls = [m for m in msgs if m["role"] == "assistant" and m.get("tool_calls")]
        assert calls and all(m["content"].startswith("<think>") for m in calls)  # reasoning before every call
        assert len(ex["images"]) == 1 + sum(m["role"] == "tool" for m in chat)
    row = sft_dataset(chats)[0]
    assert row["images"] == [] and render_chat(row["messages"]) == render_chat(chats[0])


def test_bad_tables_are_refused_with_a_reason(chats):
    from datasets import Dataset
    ok = conversation_to_example(chats[0])
    with pytest.raises(ValueError, match="columns"):
        as_sft_dataset(Dataset.from_list([{"messages": ok["messages"]}]))
    with pytest.raises(ValueError, match="image placeholders"):
        as_sft_dataset(Dataset.from_list([{"messages": ok["messages"], "images": ok["images"][:1]}]))
    with pytest.raises(ValueError, match="no assistant"):
        conversation_to_example(chats[0][:2])


def test_profiles_and_overrides():
    p = SFT["paper"]
    assert (p.learning_rate, p.num_train_epochs, p.lr_scheduler_type, p.warmup_steps, p.bf16, p.max_length,
            p.per_device_train_batch_size) == (2e-5, 5, "cosine", 0.05, True, 32768, 4)
    assert p.model.startswith("Qwen/Qwen2.5-VL") and SFT["cpu"].model is None
    prof, extra = settle("cpu", max_steps=3, optim="sgd")
    assert prof.max_steps == 3 and extra == {"optim": "sgd"} and SFT["cpu"].max_steps == -1
    with pytest.raises(ValueError, match="lr"): settle("cpu", lr=1e-3)
    with pytest.raises(ValueError, match="assistant_only_loss"): settle("cpu", assistant_only_loss=False)


# --- the label mask --------------------------------------------------------------------------------------------------

def test_a_real_batch_trains_exactly_the_assistant_replies(chats, tmp_path):
    trainer = sft_trainer(chats, tmp_path, profile="smoke", per_device_train_batch_size=4, progress=False)
    assert trainer.args.assistant_only_loss
    tok = trainer.processing_class.tokenizer
    expected = [assistant_spans(restyle(c, SFT["smoke"].prompt)) for c in chats]  # smoke learns the brief style
    seen = []
    for batch in trainer.get_train_dataloader():
        for i in range(batch["labels"].shape[0]):
            spans = trained_spans(batch["labels"][i], tok)
            assert spans in expected                       # exactly one conversation's replies, run for run
            seen.append(expected.index(spans))
            text = "".join(spans)
            assert text.count("<|im_end|>") == len(spans) and "</tool_call>" in text and "\\boxed{" in text
            for never in ("<tool_response>", "Generated spectral", "<|image_pad|>", "<|vision_start|>", "<|im_start|>",
                          "system", "user", "You are an expert", "Answer YES or NO"):
                assert never not in text, never
            ids, labels = batch["input_ids"][i], batch["labels"][i]
            image = tok.convert_tokens_to_ids("<|image_pad|>")
            assert (ids == image).sum() > 0 and not (labels == image).any()
    assert sorted(seen) == list(range(len(chats)))  # one epoch covers every conversation once


def test_a_saved_folder_loads_through_coldstart(chats, tmp_path):
    "A folder in the export layout (datasets save_to_disk: messages JSON + images) is read by speco3.coldstart."
    pytest.importorskip("speco3.coldstart", reason="speco3.coldstart is not exported yet")
    from datasets import Dataset
    Dataset.from_list([conversation_to_example(c) for c in chats[:4]]).save_to_disk(str(tmp_path / "data"))
    trainer = sft_trainer(tmp_path / "data", tmp_path / "run", profile="smoke", progress=False)
    batch = next(iter(trainer.get_train_dataloader()))
    expected = [assistant_spans(restyle(c, SFT["smoke"].prompt)) for c in chats[:4]]
    assert all(trained_spans(row, trainer.processing_class.tokenizer) in expected for row in batch["labels"])


# --- training: frozen vision, resume, seeds, LoRA ---------------------------------------------------------------------

def test_vision_is_frozen_and_unchanged(unbroken, tmp_path, chats):
    assert unbroken["frozen"] == ["model.visual.patch_embed", "model.visual.rotary_pos_emb", "model.visual.blocks",
                                  "model.visual.merger"]
    trainer = sft_trainer(chats, tmp_path, profile="smoke", progress=False)
    params = dict(trainer.model.named_parameters())
    assert not any(p.requires_grad for n, p in params.items() if n.startswith("model.visual."))
    assert any(n.startswith("model.visual.merger.") for n in params)
    assert all(p.requires_grad for n, p in params.items() if n.startswith("model.language_model."))
    base, after = weights(f"{unbroken['out_dir']}/base"), weights(unbroken["model_dir"])
    visual = [k for k in base if k.startswith("model.visual.")]
    assert visual and all(torch.equal(base[k], after[k]) for k in visual)
    changed = [k for k in base if not torch.equal(base[k], after[k])]
    assert changed and all(k.startswith(("model.language_model.", "lm_head")) for k in changed)


def test_outputs_and_curve(unbroken):
    assert unbroken["global_step"] == 4 and unbroken["resumed_from"] is None and unbroken["samples"] == 8
    rows = list(csv.DictReader(open(unbroken["loss_csv"])))
    assert [int(r["step"]) for r in rows] == [1, 2, 3, 4]
    assert unbroken["figure"].endswith("figures/sft_loss_smoke.png")
    from PIL import Image
    assert Image.open(unbroken["figure"]).size[0] > 300
    config = json.load(open(unbroken["config"]))
    assert config["profile"]["max_steps"] == 4 and config["seed"] == 0 and config["profile"]["name"] == "smoke"
    assert unbroken["tokens_per_s"] > 0 and unbroken["samples_per_s"] > 0


def test_kill_then_resume_matches_an_unbroken_run(unbroken, chats, tmp_path):
    out = tmp_path / "killed"
    with pytest.raises(RuntimeError, match="simulated kill"):
        train_sft(chats, out, callbacks=[Kill()], **RUN)
    assert sorted(p.name for p in (out / "checkpoints").glob("checkpoint-*")) == ["checkpoint-2"]
    assert not (out / "model").exists()
    resumed = train_sft(chats, out, **RUN)
    assert resumed["resumed_from"] == "checkpoint-2" and resumed["global_step"] == 4
    assert resumed["samples"] == 4  # only steps 3 and 4 ran again
    assert losses(resumed) == losses(unbroken)  # steps 1-2 from the checkpoint's log, 3-4 recomputed identically
    a, b = weights(unbroken["model_dir"]), weights(resumed["model_dir"])
    assert all(torch.equal(a[k], b[k]) for k in a)  # on CPU, bit for bit


def test_same_seed_same_curve_other_seed_differs(unbroken, chats, tmp_path):
    again = train_sft(chats, tmp_path / "again", **{**RUN, "max_steps": 2})
    other = train_sft(chats, tmp_path / "other", seed=1, **{**RUN, "max_steps": 2})
    assert losses(again) == losses(unbroken)[:2]
    assert losses(other)[0] != losses(unbroken)[0]


def test_lora_trains_adapters_on_the_language_model_only(unbroken, chats, tmp_path):
    m = train_sft(chats, tmp_path / "lora", lora=True, **{**RUN, "max_steps": 2})
    assert m["trainable_params"] < m["total_params"] / 2
    assert (tmp_path / "lora" / "adapter" / "adapter_config.json").exists()
    base, merged = weights(tmp_path / "lora" / "base"), weights(m["model_dir"])
    changed = [k for k in base if not torch.equal(base[k], merged[k])]
    assert changed and all(k.startswith("model.language_model.layers.") and k.endswith("proj.weight") for k in changed)


def test_resume_refuses_other_settings_and_starting_over(unbroken, chats):
    with pytest.raises(ValueError, match="other settings"):
        train_sft(chats, unbroken["out_dir"], **{**RUN, "learning_rate": 1e-4})
    with pytest.raises(ValueError, match="resume=True"):
        train_sft(chats, unbroken["out_dir"], resume=False, **RUN)


def test_rerunning_a_finished_run_trains_nothing(unbroken, chats):
    again = train_sft(chats, unbroken["out_dir"], **RUN)  # transformers would train one step more from the last checkpoint
    assert again["global_step"] == unbroken["global_step"] == 4
    assert losses(again) == losses(unbroken)
    assert sorted(p.name for p in (Path(unbroken["out_dir"]) / "checkpoints").glob("checkpoint-*"))[-1] == "checkpoint-4"


def test_bf16_profiles_need_a_gpu(chats, tmp_path):
    if torch.cuda.is_available(): pytest.skip(optional_extra("gpu", "a GPU is present: the paper profile would load the 7B model"))
    with pytest.raises(ValueError, match="no CUDA device"):
        sft_trainer(chats, tmp_path, profile="paper")


def test_paper_profile_is_the_authors_recipe():
    p = SFT["paper"]
    assert (p.model, p.learning_rate, p.num_train_epochs, p.lr_scheduler_type, p.warmup_steps, p.per_device_train_batch_size) == \
        ("Qwen/Qwen2.5-VL-7B-Instruct", 2e-5, 5, "cosine", 0.05, 4)
    assert p.freeze_vision  # vision tower and projector (merger) frozen: freeze_vision covers both (test_vision_is_frozen_and_unchanged)


def test_paper_accelerate_config_shards_full_fine_tuning():
    from accelerate.commands.config.config_args import load_config_from_file
    path = accelerate_config("paper")
    assert path.is_file() and path.parent.name == "configs" and path.parent.parent == Path(speco3.__file__).parent
    acc = load_config_from_file(str(path))
    assert acc.distributed_type == "FSDP" and acc.mixed_precision == "bf16" and not acc.use_cpu
    assert acc.fsdp_config["fsdp_sharding_strategy"] == "FULL_SHARD" and acc.fsdp_config["fsdp_state_dict_type"] == "FULL_STATE_DICT"
    import transformers.models.qwen2_5_vl.modeling_qwen2_5_vl as qwen  # the layer classes it wraps exist
    assert all(hasattr(qwen, c) for c in acc.fsdp_config["fsdp_transformer_layer_cls_to_wrap"].split(","))
    root = Path(speco3.__file__).parent.parent
    if (root / "MANIFEST.in").exists(): assert "*.yaml" in (root / "MANIFEST.in").read_text()  # shipped as package data


def test_the_brief_style_is_learnt_and_recorded(unbroken, chats):
    "smoke trains on the brief prompt (restyled from the paper's), templated conclusions, and writes the style next to the model."
    from speco3.hf import saved_context
    from speco3.prompts import BRIEF_PROMPT, chat_style, _text_of
    assert SFT["smoke"].prompt == SFT["cpu"].prompt == "brief" and SFT["gpu"].prompt == SFT["paper"].prompt == "paper"
    assert chat_style(chats[0]) == ("paper", True)            # the data are in the paper's style...
    brief = restyle(chats[0], "brief")
    assert brief[0]["content"] == BRIEF_PROMPT and "Conclusion: this is " in _text_of(brief[-1]["content"])
    assert saved_context(unbroken["model_dir"])["prompt"] == "brief"   # ...the model answers in the brief one


def test_small_sft_two_askers_get_one_run(chats, tmp_path, capsys):
    "04_sft and 04a_ablation_runs ask for the small-set SFT at once (`speco3.paper.small_sft`): trained and vetted once, both read it."
    import threading
    from speco3.paper import small_sft, small_set
    full = as_sft_dataset(chats)
    from speco3.coldstart import simulate_samples
    test_rows = simulate_samples(1, tasks=("cv",), seed=5)  # one spectrum to vet
    got, errors = [], []
    def ask():
        try: got.append(small_sft(full, 3, tmp_path, test_rows, "fast", 8, "smoke", seed=0, max_steps=1, save_steps=1))
        except Exception as e: errors.append(e)
    threads = [threading.Thread(target=ask) for _ in range(2)]
    for t in threads: t.start()
    for t in threads: t.join()
    assert not errors, errors
    a, b = got
    assert a["n"] == b["n"] == 3 and len(small_set(full, 3)) == 3 and len(small_set(full, 100)) == len(full) // 2
    assert a["metrics"]["out_dir"] == b["metrics"]["out_dir"] and Path(a["metrics"]["out_dir"]).name == "sft-smoke-3"
    assert capsys.readouterr().out.count("finished earlier at step 1") == 1   # the second asker read the first one's run back
    assert len(a["records"]) == len(b["records"]) == len(test_rows) and a["records"] == b["records"]
    assert json.loads((tmp_path / "sft-smoke-3" / "eval" / "summary.json").read_text())["n_resumed"] == len(test_rows)  # vetted once
