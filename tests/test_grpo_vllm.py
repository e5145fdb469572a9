"""GRPO with TRL's vLLM generation (speco3.grpo, nbs/14_grpo.ipynb "Generating with vLLM"), without vLLM: vLLM does not
install on our machines, so it is stubbed where TRL imports it. Colocate: `LLM` and `SamplingParams` in
`trl.generation.vllm_generation`; the fake `SamplingParams` takes only the arguments vLLM's does, so a keyword vLLM
would refuse (HF's `suppress_tokens`) fails here too. Server: TRL's own `VLLMClient` with its HTTP post replaced, so the
request bodies TRL would send are checked as JSON. In both modes one real GRPO step runs on the tiny model through the
stub (a zoom, the plot, an answer), weights are pushed to the stub after the step, and the vision markup is banned
with `logit_bias`. Also: the one-line error when vLLM is missing, before any model loads. What is not run: vLLM itself."""
import json
from types import SimpleNamespace

import pytest

pytest.importorskip("torch", reason="torch is not installed (pip install 'speco3[train]')")
pytest.importorskip("trl", reason="trl is not installed (pip install 'speco3[train]')")
from trl.generation import vllm_client, vllm_generation

from speco3.grpo import LOGIT_BAN, demo_rows, grpo_dataset, grpo_trainer

CALL = ('<think>Zoom on H-alpha.</think>\n<tool_call>{"name": "spectral_visualization_tool", '
        '"arguments": {"wavelength_range": [6480, 6650], "label": "H-alpha"}}</tool_call><|im_end|>')
ANSWER = "<think>Settled.</think>\n<answer>\\boxed{YES}</answer><|im_end|>"
RUN = dict(profile="smoke", max_steps=1, progress=False)  # 2 questions x 2 rollouts, a random tiny model
VISION = ("<|image_pad|>", "<|video_pad|>", "<|vision_start|>", "<|vision_end|>", "<|vision_pad|>")
# the constructor arguments of vLLM's SamplingParams (vllm.SamplingParams, API reference; `structured_outputs` replaced
# `guided_decoding` in recent versions)
SAMPLING_FIELDS = {"n", "best_of", "presence_penalty", "frequency_penalty", "repetition_penalty", "temperature", "top_p",
                   "top_k", "min_p", "seed", "stop", "stop_token_ids", "ignore_eos", "max_tokens", "min_tokens", "logprobs",
                   "prompt_logprobs", "detokenize", "skip_special_tokens", "spaces_between_special_tokens",
                   "logits_processors", "include_stop_str_in_output", "truncate_prompt_tokens", "output_kind",
                   "structured_outputs", "guided_decoding", "logit_bias", "allowed_token_ids", "extra_args", "bad_words"}

pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py


@pytest.fixture(scope="module")
def data():
    return grpo_dataset(demo_rows(2, tasks=("cv",), guidelines=False), style="fast", prompt="brief")


def reply(tok, prompt_ids):
    "The scripted policy: zoom while only the overview is in view, then answer."
    plots = prompt_ids.count(tok.convert_tokens_to_ids("<|vision_start|>"))
    return tok.encode(CALL if plots < 2 else ANSWER, add_special_tokens=False)


def vision_ids(trainer):
    tok = trainer.processing_class.tokenizer
    return {tok.convert_tokens_to_ids(t) for t in VISION} - {None, tok.unk_token_id}


class FakeSamplingParams:
    "vLLM's SamplingParams as far as its arguments go: an unknown one is a TypeError, as there."
    def __init__(self, **kw):
        if bad := sorted(set(kw) - SAMPLING_FIELDS): raise TypeError(f"SamplingParams got unexpected arguments {bad}")
        self.kw = kw


class FakeLLM:
    "vLLM's LLM as TRL's colocate mode uses it: generate from token ids and images, load weights, reset the cache."
    made = []

    def __init__(self, **kw):
        self.kw, self.calls, self.loaded = kw, [], []
        self.tok = None  # set by the test once the trainer's tokenizer is known
        model = SimpleNamespace(load_weights=self.loaded.extend)
        self.llm_engine = SimpleNamespace(model_config=SimpleNamespace(max_model_len=kw["max_model_len"] or 32768),
                                          model_executor=SimpleNamespace(driver_worker=SimpleNamespace(model_runner=SimpleNamespace(model=model))))
        FakeLLM.made.append(self)

    def reset_prefix_cache(self): pass

    def generate(self, prompts, sampling_params, use_tqdm=False):
        self.calls.append((prompts, sampling_params))
        out = []
        for p in prompts:
            ids = reply(self.tok, p["prompt_token_ids"])
            lps = [{t: SimpleNamespace(logprob=-0.5, rank=1)} for t in ids]
            out.append(SimpleNamespace(prompt_token_ids=p["prompt_token_ids"], outputs=[SimpleNamespace(token_ids=ids, logprobs=lps)]))
        return out


@pytest.fixture
def stub_vllm(monkeypatch):
    "vLLM 'installed' as far as TRL can tell; the env vars TRL's colocate mode sets are restored afterwards."
    for k, v in (("RANK", "0"), ("LOCAL_RANK", "0"), ("WORLD_SIZE", "1"), ("MASTER_ADDR", "127.0.0.1"), ("MASTER_PORT", "29512")):
        monkeypatch.setenv(k, v)
    monkeypatch.setattr(vllm_generation, "is_vllm_available", lambda *a, **k: True)
    monkeypatch.setattr(vllm_generation, "LLM", FakeLLM, raising=False)
    monkeypatch.setattr(vllm_generation, "SamplingParams", FakeSamplingParams, raising=False)
    FakeLLM.made.clear()


def test_colocate_step_bans_the_vision_markup_in_vllm_form(data, tmp_path, stub_vllm):
    trainer = grpo_trainer(data, tmp_path, use_vllm=True, vllm_mode="colocate", vllm_max_model_length=4096, **RUN)
    llm = FakeLLM.made[-1]
    llm.tok = trainer.processing_class.tokenizer
    assert trainer.args.use_vllm and trainer.args.vllm_mode == "colocate" and llm.kw["max_model_len"] == 4096
    trainer.train()
    assert len(llm.calls) == 2                                     # the overview round, then the round after the plot
    banned = vision_ids(trainer)
    for prompts, sp in llm.calls:
        assert "suppress_tokens" not in sp.kw
        assert sp.kw["logit_bias"] == {i: LOGIT_BAN for i in banned} and len(banned) == 5
        assert sp.kw["temperature"] == 1.0 and sp.kw["n"] == 1
    first, second = llm.calls[0][0], llm.calls[1][0]
    assert len(first) == 4 and all(not isinstance(p["multi_modal_data"]["image"], list) for p in first)  # one overview each
    assert all(len(p["multi_modal_data"]["image"]) == 2 for p in second)                              # overview + the zoom
    assert len(llm.loaded) == sum(1 for _ in trainer.model.parameters())  # the weights were pushed before generating
    log = trainer.state.log_history[0]
    assert log["tool_calls"] == 1.0 and log["format_valid"] == 1.0
    assert log["accuracy"] == pytest.approx(sum(t == "YES" for t in data["ground_truth"]) / len(data))  # the script says YES


class FakeClient(vllm_client.VLLMClient):
    "TRL's VLLMClient with no server: its own generate builds the bodies; the HTTP post is recorded and answered here."
    made = []

    def __init__(self, base_url=None, group_port=51216, connection_timeout=0.0):
        self.base_url, self.model, self.posts, self.pushed, self.tok = base_url, "served-model", [], [], None
        FakeClient.made.append(self)

    def init_communicator(self, device=0): pass
    def get_server_info(self): return {"model_config": {"logprobs_mode": "processed_logprobs"}}
    def update_named_params(self, metadata, params): self.pushed += [name for name, _ in params]
    def reset_prefix_cache(self): pass

    def image_features(self, images, max_concurrent_requests=64):
        return [None if not imgs else {"mm_placeholders": {"image": [{"offset": 0, "length": 1}] * len(imgs)}} for imgs in images]

    def _post(self, url, **kw):
        body = json.loads(json.dumps(kw["json"]))  # what goes over the wire (int keys become strings)
        self.posts.append((url, body))
        ids = reply(self.tok, body["token_ids"])
        lp = {"content": [{"token": f"token_id:{t}", "logprob": -0.5, "top_logprobs": []} for t in ids]}
        return {"choices": [{"token_ids": ids, "logprobs": lp}] * body["sampling_params"]["n"]}


def test_server_step_sends_the_ban_as_logit_bias(data, tmp_path, stub_vllm, monkeypatch):
    monkeypatch.setattr(vllm_generation, "VLLMClient", FakeClient)
    FakeClient.made.clear()
    trainer = grpo_trainer(data, tmp_path, use_vllm=True, vllm_mode="server", vllm_server_base_url="http://gpu-box:8000", **RUN)
    client = FakeClient.made[-1]
    client.tok = trainer.processing_class.tokenizer
    assert client.base_url == "http://gpu-box:8000" and trainer.args.vllm_mode == "server"
    trainer.train()
    # the first round asks once per question for its 2 rollouts; after the plot each rollout goes on alone
    assert [b["sampling_params"]["n"] for _, b in client.posts] == [2, 2, 1, 1, 1, 1]
    assert [len(b["features"]["mm_placeholders"]["image"]) for _, b in client.posts] == [1, 1, 2, 2, 2, 2]
    banned = vision_ids(trainer)
    for url, body in client.posts:
        sp = body["sampling_params"]
        assert url == "http://gpu-box:8000/inference/v1/generate" and body["model"] == "served-model"
        assert set(sp) <= SAMPLING_FIELDS, sorted(set(sp) - SAMPLING_FIELDS)
        assert sp["logit_bias"] == {str(i): LOGIT_BAN for i in banned} and len(banned) == 5
    assert set(client.pushed) == {n for n, _ in trainer.model.named_parameters()}
    assert trainer.state.log_history[0]["tool_calls"] == 1.0


def test_missing_vllm_is_one_line_before_the_model_loads(data, tmp_path, monkeypatch):
    monkeypatch.setattr(vllm_generation, "is_vllm_available", lambda *a, **k: False)
    with pytest.raises(ImportError) as e:
        grpo_trainer(data, tmp_path, use_vllm=True, vllm_mode="server", **RUN)
    assert "vLLM is not installed" in str(e.value) and "\n" not in str(e.value)
    assert not (tmp_path / "base").exists()                        # refused before the tiny model was even built
    with pytest.raises(ValueError, match="vllm_mode"):
        grpo_trainer(data, tmp_path, use_vllm=True, vllm_mode="remote", **RUN)


def test_hf_generate_keeps_suppress_tokens(data, tmp_path):
    trainer = grpo_trainer(data, tmp_path, **RUN)
    assert not trainer.args.use_vllm and vision_ids(trainer) <= set(trainer.generation_config.suppress_tokens)
    assert "logit_bias" not in trainer.args.generation_kwargs
