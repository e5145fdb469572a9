"""`vet_model(..., endpoint=URL)` (speco3.paper, nbs/90b_paper.ipynb) against the fake OpenAI-compatible server of
test_remote.py: each request names the model as `vllm serve MODEL_DIR` serves it, decodes greedily and stops after a
tool call as HFPolicy does, and asks in the prompt style and plot window the model folder records. Rendered with our
chat template the way vLLM renders a chat with `--chat-template-content-format openai` (text and image parts in
order, an image part as `{"type": "image"}`), every request is exactly the text HFPolicy would give the model, with the
same images. What is not run: vLLM itself, so the server-side rendering is our template applied here, as the
`vllm serve` command below tells vLLM to apply it:

    vllm serve MODEL_DIR --chat-template "$(python -c 'import speco3.prompts as p; print(p.TEMPLATE_PATH)')" \
        --chat-template-content-format openai --limit-mm-per-prompt '{"image": 8, "video": 0}' \
        --max-model-len 32768 --generation-config vllm --seed 0
"""
import base64, io, json

import pytest
from PIL import Image

pytest.importorskip("torch", reason="torch is not installed (pip install 'speco3[train]')")
from test_remote import ANSWER_TEXT, ZOOM_TEXT, say, serve, spectrum

from speco3.agent import Sample
from speco3.hf import HFPolicy, save_context
from speco3.prompts import BRIEF_PROMPT, chat_template, newest_plots
from speco3.remote import OpenAIPolicy
from speco3.paper import vet_model
from speco3.tiny import build_tiny

pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py


def respond(body, n):
    "Zoom while no plot has come back, then answer."
    seen = any("<tool_response>" in json.dumps(m["content"]) for m in body["messages"][2:])
    return say(ANSWER_TEXT if seen else ZOOM_TEXT)


def as_vllm_renders(messages):
    "Wire messages as vLLM hands them to a chat template in the openai content format: parts in order, images as {'type': 'image'}."
    out = []
    for m in messages:
        c = m["content"]
        parts = [{"type": "text", "text": c}] if isinstance(c, str) else [
            {"type": "image"} if p["type"] == "image_url" else {"type": "text", "text": p["text"]} for p in c]
        out.append({"role": m["role"], "content": parts})
    return out


def wire_images(messages):
    return [Image.open(io.BytesIO(base64.b64decode(p["image_url"]["url"].split(",", 1)[1])))
            for m in messages if isinstance(m["content"], list) for p in m["content"] if p["type"] == "image_url"]


def hf_images(messages):
    return [p["image"] for m in messages if isinstance(m.get("content"), list) for p in m["content"] if p.get("type") == "image"]


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    "The tiny model folder, recorded as trained in the brief prompt with one plot in view."
    m = tmp_path_factory.mktemp("served") / "model"
    build_tiny(m)
    save_context(m, keep_plots=1, prompt="brief")
    return m


def test_a_served_model_gets_what_the_hf_policy_would_read(model_dir, tmp_path, monkeypatch):
    asked = []  # (the episode's messages, the request body) of every request
    payload = OpenAIPolicy.payload
    monkeypatch.setattr(OpenAIPolicy, "payload", lambda self, ep: asked.append((list(ep.messages), payload(self, ep))) or asked[-1][1])
    samples = [Sample(f"toy-{i}", "cv", spectrum(), "YES") for i in range(2)]
    with serve(respond) as fake:
        recs, summary = vet_model(model_dir, samples, tmp_path / "run", max_new_tokens=64, endpoint=fake.url)
    assert [(r["status"], r["prediction"], r["n_tool_calls"]) for r in recs] == [("answered", "YES", 1)] * 2
    assert summary["generation"]["n_ok"] == 4 and len(fake.requests) == 4 and len(asked) == 4
    assert all(r["path"] == "/v1/chat/completions" for r in fake.requests)
    hf = HFPolicy(str(model_dir))
    assert (hf.prompt, hf.keep_plots, hf.template_kind) == ("brief", 1, "speco3")
    for (messages, _), req in zip(sorted(asked, key=lambda a: json.dumps(a[1], sort_keys=True)),
                                  sorted(fake.requests, key=lambda r: json.dumps(r["body"], sort_keys=True))):
        body = req["body"]
        assert body["model"] == str(model_dir)                       # vLLM's name for `vllm serve MODEL_DIR`
        assert (body["temperature"], body["max_tokens"], body["seed"], body["repetition_penalty"]) == (0.0, 64, 0, 1.0)
        assert body["stop"] == ["</tool_call>"] and body["include_stop_str_in_output"] is True
        seen = newest_plots(messages, hf.keep_plots)
        served = hf.processor.apply_chat_template(as_vllm_renders(body["messages"]), chat_template=chat_template(),
                                                  tokenize=False, add_generation_prompt=True)
        assert served == hf.render(seen)                              # the same text, token for token
        assert [im.size for im in wire_images(body["messages"])] == [im.size for im in hf_images(seen)]
    second = [r["body"]["messages"] for r in fake.requests if "<tool_response>" in json.dumps(r["body"]["messages"])]
    assert len(second) == 2 and all(len(wire_images(m)) == 1 for m in second)  # the overview left the window
    assert recs[0]["policy"]["prompt"] == "brief" and recs[0]["policy"]["keep_plots"] == 1
    system = [r["body"]["messages"][0] for r in fake.requests]
    assert all(m["role"] == "system" and BRIEF_PROMPT in m["content"] for m in system)  # the style the folder records, not the paper's


def test_served_name_and_bad_endpoint(model_dir, tmp_path):
    with serve(respond) as fake:
        vet_model(model_dir, [Sample("toy", "cv", spectrum(), "YES")], tmp_path / "run", endpoint=fake.url, served_name="spec-o3")
    assert {r["body"]["model"] for r in fake.requests} == {"spec-o3"}
    with pytest.raises(ValueError, match="not an http"):
        vet_model(model_dir, [], tmp_path / "r2", endpoint="localhost:8000")


def test_endpoint_vllm_serves_the_model_for_the_call_and_stops_it(model_dir, tmp_path, monkeypatch):
    "`endpoint='vllm'` starts `vllm serve MODEL_DIR` (here tests/fake_vllm.py on PATH), vets through it, and stops it."
    import os, stat, sys, urllib.request
    from pathlib import Path
    bin_dir = tmp_path / "bin"; bin_dir.mkdir()
    fake = bin_dir / "vllm"
    fake.write_text((Path(__file__).parent / "fake_vllm.py").read_text().replace("/usr/bin/env python3", sys.executable, 1))
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    recs, summary = vet_model(model_dir, [Sample(f"toy-{i}", "cv", spectrum(), "YES") for i in range(2)], tmp_path / "run",
                              endpoint="vllm")
    assert [(r["status"], r["prediction"]) for r in recs] == [("answered", "NO")] * 2   # the fake server's answer
    assert summary["generation"]["n_ok"] == 2
    log = (tmp_path / "run" / "vllm.log").read_text()
    assert f"fake vllm serving {model_dir} on" in log and log.count("request POST /v1/chat/completions") == 2
    port = int(log.split(" on ", 1)[1].split()[0])
    with pytest.raises(OSError):   # the server is gone once the call returned
        urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/models", timeout=2)


def test_endpoint_vllm_without_vllm_is_one_line(model_dir, tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))   # no vllm command anywhere
    with pytest.raises(FileNotFoundError, match="no `vllm` command here"):
        vet_model(model_dir, [Sample("toy", "cv", spectrum(), "YES")], tmp_path / "run", endpoint="vllm")
