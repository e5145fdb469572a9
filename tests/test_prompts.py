"""Prompts and the chat template (speco3.prompts, from nbs/06_prompts.ipynb, and
speco3/templates/qwen2_5_vl_tools.jinja): the exact rendering of a multi-turn conversation with images, prefix
preservation, no blank line before a bare tool call, the checks TRL runs on a tool template, SFT and GRPO system
prompts being the same text, and the Python renderer agreeing with the Jinja file.

Jinja tests render the file the way transformers does (sandboxed environment, trim_blocks, lstrip_blocks, its
`tojson`, a `generation` tag); they skip when jinja2 is missing. Tests of the real transformers/TRL entry points
skip when those packages are missing."""
import json, random, re
from pathlib import Path
import pytest

from speco3.prompts import (TASKS, PAPER_TASKS, OOD_TASKS, Task, SYSTEM_PROMPT, DEFAULT_SYSTEM, MAX_TOOL_CALLS,
                            IMAGE_TOKEN, TEMPLATE_PATH, RESPONSE_TEMPLATE, RESPONSE_SCHEMA, system_text, user_prompt,
                            build_messages, chat_template, render_chat, install_template)
from speco3.tool import TOOL_SCHEMA, TOOL_NAME

try:
    import jinja2
    from jinja2 import nodes
    from jinja2.ext import Extension
    from jinja2.sandbox import ImmutableSandboxedEnvironment
except ImportError:
    jinja2 = None
try:
    import transformers
except ImportError:
    transformers = None
try:
    import trl
except ImportError:
    trl = None

needs_jinja = pytest.mark.skipif(jinja2 is None, reason="jinja2 is not installed (it comes with transformers)")
needs_transformers = pytest.mark.skipif(transformers is None, reason="transformers is not installed")
needs_trl = pytest.mark.skipif(transformers is None or trl is None, reason="transformers and trl are not installed")

IMG = "<|vision_start|><|image_pad|><|vision_end|>"
OPEN, CLOSE = "\ue000", "\ue001"  # private-use characters marking the generation blocks in a Jinja render


# --- a renderer that does what transformers does with a chat template ----------------------------------------------

if jinja2 is not None:
    class _Generation(Extension):
        "The `{% generation %}` tag: renders its body, wrapped in markers so the test can find the trained spans."
        tags = {"generation"}

        def parse(self, parser):
            lineno = next(parser.stream).lineno
            body = parser.parse_statements(["name:endgeneration"], drop_needle=True)
            return nodes.CallBlock(self.call_method("_mark"), [], [], body).set_lineno(lineno)

        def _mark(self, caller):
            return OPEN + caller() + CLOSE

    def _raise(message):
        raise jinja2.exceptions.TemplateError(message)

    def _tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        "transformers' tojson: plain json.dumps (jinja2's own escapes HTML characters and sorts keys)."
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    _ENV = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                         extensions=[_Generation, jinja2.ext.loopcontrols])
    _ENV.filters["tojson"] = _tojson
    _ENV.globals["raise_exception"] = _raise
    _TEMPLATE = _ENV.from_string(chat_template())


def jinja_render(messages, tools=None, add_generation_prompt=False, spans=False, **kwargs):
    "Render the template file; with spans=True also the (start, end) of each generation block in the clean text."
    marked = _TEMPLATE.render(messages=messages, tools=tools, add_generation_prompt=add_generation_prompt,
                              bos_token="", eos_token="<|im_end|>", **kwargs)
    text, marks, start = "", [], None
    for piece in re.split(f"([{OPEN}{CLOSE}])", marked):
        if piece == OPEN: start = len(text)
        elif piece == CLOSE: marks.append((start, len(text)))
        else: text += piece
    return (text, marks) if spans else text


RENDERERS = [pytest.param(render_chat, id="python"), pytest.param(jinja_render, id="jinja", marks=needs_jinja)]


# --- conversations ----------------------------------------------------------------------------------------------

ZOOM = {"type": "function", "function": {"name": "zoom", "description": "Zoom.", "parameters": {
    "type": "object", "properties": {"wavelength_range": {"type": "array"}}, "required": ["wavelength_range"]}}}
CALL = {"type": "function", "function": {"name": "zoom", "arguments": {"wavelength_range": [6480, 6650]}}}

CONVERSATION = [
    {"role": "system", "content": "Sys."},
    {"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "Is it a CV?"}]},
    {"role": "assistant", "content": "<think>look</think>", "tool_calls": [CALL]},
    {"role": "tool", "name": "zoom", "content": [{"type": "image"}, {"type": "text", "text": "Zoomed."}]},
    {"role": "assistant", "content": "<think>broad</think>\n<answer>\\boxed{YES}</answer>"},
]

# Written out by hand: this string is the specification of the format.
GOLDEN = (
    "<|im_start|>system\n"
    "Sys.\n"
    "\n"
    "# Tools\n"
    "\n"
    "You may call one or more functions to assist with the user query.\n"
    "\n"
    "You are provided with function signatures within <tools></tools> XML tags:\n"
    "<tools>\n"
    '{"type": "function", "function": {"name": "zoom", "description": "Zoom.", "parameters": {"type": "object", '
    '"properties": {"wavelength_range": {"type": "array"}}, "required": ["wavelength_range"]}}}\n'
    "</tools>\n"
    "\n"
    "For each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:\n"
    "<tool_call>\n"
    '{"name": <function-name>, "arguments": <args-json-object>}\n'
    "</tool_call><|im_end|>\n"
    "<|im_start|>user\n"
    "<|vision_start|><|image_pad|><|vision_end|>Is it a CV?<|im_end|>\n"
    "<|im_start|>assistant\n"
    "<think>look</think>\n"
    "<tool_call>\n"
    '{"name": "zoom", "arguments": {"wavelength_range": [6480, 6650]}}\n'
    "</tool_call><|im_end|>\n"
    "<|im_start|>user\n"
    "<tool_response>\n"
    "<|vision_start|><|image_pad|><|vision_end|>Zoomed.\n"
    "</tool_response><|im_end|>\n"
    "<|im_start|>assistant\n"
    "<think>broad</think>\n"
    "<answer>\\boxed{YES}</answer><|im_end|>\n")

GOLDEN_REPLIES = [
    '<think>look</think>\n<tool_call>\n{"name": "zoom", "arguments": {"wavelength_range": [6480, 6650]}}\n</tool_call><|im_end|>',
    "<think>broad</think>\n<answer>\\boxed{YES}</answer><|im_end|>"]


def trl_like_conversations():
    "The conversations TRL renders in its template checks (string contents, JSON-string arguments, extra keys)."
    return [
        [{"role": "user", "content": "What color is the sky?"},
         {"role": "assistant", "reasoning_content": "Hmmm", "thinking": "Hmmm", "content": "It is blue."},
         {"role": "user", "content": "And at night?"}],
        [{"role": "user", "content": "What is 2+2?"},
         {"role": "assistant", "content": "Let me think about this...",
          "tool_calls": [{"function": {"name": "calculator", "arguments": '{"a": 2, "b": 2}'}}]},
         {"role": "tool", "content": "4"},
         {"role": "assistant", "content": "The answer is 4."}],
    ]


def random_conversation(rng):
    "A random but well-formed conversation: parts or strings, images, 0-2 calls per reply, odd whitespace, unicode."
    words = ["Hα", "broad", "Å", '"quoted"', "{{ not jinja }}", "{% raw %}", "line\nbreak", "  padded  ", "\\boxed{NO}",
             "<think>x</think>", "ZrO 6474", "é", ""]
    say = lambda: " ".join(rng.choice(words) for _ in range(rng.randint(0, 4)))
    def content(images=True):
        kind = rng.choice(["str", "parts", "parts"] + (["empty"] if not images else []))
        if kind == "str": return say()
        if kind == "empty": return rng.choice(["", [], None, " \n "])
        parts = [{"type": "image"}] if images and rng.random() < 0.7 else []
        return parts + [{"type": "text", "text": say()} for _ in range(rng.randint(0, 2))]
    def tool_call():
        args = {"wavelength_range": [rng.randint(3700, 6000), rng.randint(6001, 9000)], "label": say()}
        if rng.random() < 0.3: args = json.dumps(args)
        call = {"name": rng.choice([TOOL_NAME, "zoom"]), "arguments": args}
        return {"type": "function", "function": call} if rng.random() < 0.7 else call
    msgs = [{"role": "system", "content": rng.choice([say(), [{"type": "text", "text": say()}]])}] if rng.random() < 0.7 else []
    msgs.append({"role": "user", "content": content()})
    for _ in range(rng.randint(0, 4)):
        calls = [tool_call() for _ in range(rng.choice([0, 1, 1, 2]))]
        msgs.append({"role": "assistant", "content": content(images=False), **({"tool_calls": calls} if calls else {})})
        if calls: msgs += [{"role": "tool", "name": TOOL_NAME, "content": content()} for _ in calls]
        elif rng.random() < 0.5: msgs.append({"role": "user", "content": content()})
    return msgs


def prefix_failures(render, msgs, tools=None):
    "Indices k where rendering the first k messages is not a prefix of rendering k+1 (a tool after a tool excepted)."
    bad = []
    for k in range(1, len(msgs)):
        if msgs[k]["role"] == "tool" and msgs[k - 1]["role"] == "tool": continue
        full = render(msgs[:k + 1], tools)
        if not full.startswith(render(msgs[:k], tools)): bad.append(k)
        if msgs[k]["role"] == "assistant" and not full.startswith(render(msgs[:k], tools, True)): bad.append(k)
    return bad


# --- the exact format ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("render", RENDERERS)
def test_golden_conversation(render):
    text, spans = render(CONVERSATION, [ZOOM], spans=True)
    assert text == GOLDEN
    assert [text[a:b] for a, b in spans] == GOLDEN_REPLIES  # trained spans: the replies and their <|im_end|>, no header


CONTEXT_ONLY = [dict(m, train=False) if i == 2 else m for i, m in enumerate(CONVERSATION)]  # first reply: context, not trained


@pytest.mark.parametrize("render", RENDERERS)
def test_untrained_reply_renders_the_same_text_outside_the_span(render):
    "An assistant message with train=False (one-turn SFT examples) writes the same text but is not a trained span."
    text, spans = render(CONTEXT_ONLY, [ZOOM], spans=True)
    assert text == GOLDEN
    assert [text[a:b] for a, b in spans] == GOLDEN_REPLIES[1:]
    assert render([dict(m, train=True) if m["role"] == "assistant" else m for m in CONVERSATION], [ZOOM], spans=True)[1] == \
        render(CONVERSATION, [ZOOM], spans=True)[1]  # train=True is the default

@pytest.mark.parametrize("render", RENDERERS)
def test_generation_prompt_and_default_system(render):
    text = render([{"role": "user", "content": "hi"}], None, True)
    assert text == f"<|im_start|>system\n{DEFAULT_SYSTEM}<|im_end|>\n<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"
    assert render(CONVERSATION[:2], [ZOOM], True) == GOLDEN[:GOLDEN.index("<think>look")]


@pytest.mark.parametrize("render", RENDERERS)
@pytest.mark.parametrize("empty", ["", [], None, "  \n", [{"type": "text", "text": ""}]], ids=repr)
def test_bare_tool_call_starts_on_a_new_line_as_the_authors(render, empty):
    "The authors' template writes every call after a newline, so an empty reply leaves a blank line after the header."
    msgs = [{"role": "user", "content": "x"}, {"role": "assistant", "content": empty, "tool_calls": [CALL]}]
    text, spans = render(msgs, None, spans=True)
    blank = empty if isinstance(empty, str) else ""
    assert f"<|im_start|>assistant\n{blank}\n<tool_call>\n{{" in text
    assert text[spans[0][0]:spans[0][1]] == blank + '\n<tool_call>\n{"name": "zoom", "arguments": {"wavelength_range": [6480, 6650]}}\n</tool_call><|im_end|>'


@pytest.mark.parametrize("render", RENDERERS)
def test_text_is_kept_and_calls_go_one_per_line(render):
    msgs = [{"role": "user", "content": "x"},
            {"role": "assistant", "content": "<think>a</think>", "tool_calls": [CALL, CALL["function"]]}]
    call = '<tool_call>\n{"name": "zoom", "arguments": {"wavelength_range": [6480, 6650]}}\n</tool_call>'
    assert render(msgs).endswith(f"<|im_start|>assistant\n<think>a</think>\n{call}\n{call}<|im_end|>\n")


@pytest.mark.parametrize("render", RENDERERS)
def test_plain_text_tool_call_passes_through(render):
    raw = '<think>zoom</think>\n<tool_call>{"name": "zoom", "arguments": {"wavelength_range": [1, 2]}}</tool_call>'
    assert render([{"role": "user", "content": "x"}, {"role": "assistant", "content": raw}]).endswith(
        f"<|im_start|>assistant\n{raw}<|im_end|>\n")


@pytest.mark.parametrize("render", RENDERERS)
def test_consecutive_tool_messages_share_one_user_turn(render):
    msgs = [{"role": "user", "content": "x"}, {"role": "assistant", "content": "<think>two</think>", "tool_calls": [CALL, CALL]},
            {"role": "tool", "content": "A"}, {"role": "tool", "content": [{"type": "image"}, {"type": "text", "text": "B"}]}]
    assert render(msgs).endswith(
        f"<|im_start|>user\n<tool_response>\nA\n</tool_response>\n<tool_response>\n{IMG}B\n</tool_response><|im_end|>\n")


@pytest.mark.parametrize("render", RENDERERS)
def test_prefix_preserving(render):
    convs = [CONVERSATION] + trl_like_conversations() + [random_conversation(random.Random(i)) for i in range(40)]
    for msgs in convs:
        assert prefix_failures(render, msgs) == [], msgs
        assert prefix_failures(render, msgs, [TOOL_SCHEMA]) == [], msgs


@pytest.mark.parametrize("render", RENDERERS)
def test_trl_tool_suffix_extraction(render):
    "GRPO cuts the tool-result tokens out of a dummy conversation after its last <|im_end|>: they must be a clean user turn."
    for empty in ["", [], [{"type": "text", "text": ""}]]:
        dummy = [{"role": "user", "content": "dummy"},
                 {"role": "assistant", "content": empty, "tool_calls": [{"type": "function", "function": {"name": TOOL_NAME, "arguments": {}}}]}]
        tool = [{"role": "tool", "name": TOOL_NAME, "content": [{"type": "image"}, {"type": "text", "text": "Generated."}]}]
        prefix = render(dummy)
        prefix = prefix[:prefix.rindex("<|im_end|>") + len("<|im_end|>")]
        full = render(dummy + tool, None, True)
        assert full.startswith(prefix)
        assert full[len(prefix):] == f"\n<|im_start|>user\n<tool_response>\n{IMG}Generated.\n</tool_response><|im_end|>\n<|im_start|>assistant\n"


@pytest.mark.parametrize("render", RENDERERS)
def test_tool_call_parts_appear(render):
    "What TRL's supports_tool_calling looks for: the call's name, its argument key and value, the tool content."
    sentinel = "TOOL_CONTENT_7d1f"
    for args in ({"city": "Paris"}, '{"city": "Paris"}'):
        for call in ({"type": "function", "function": {"name": "get_weather", "arguments": args}}, {"name": "get_weather", "arguments": args}):
            text = render([{"role": "user", "content": "Weather?"}, {"role": "assistant", "content": "", "tool_calls": [call]},
                           {"role": "tool", "name": "get_weather", "content": sentinel}])
            assert all(s in text for s in ("get_weather", "city", "Paris", sentinel)), text
            want = {"city": "Paris"} if isinstance(args, dict) else args  # a string is written as a JSON string (tojson)
            assert '<tool_call>\n{"name": "get_weather", "arguments": ' + json.dumps(want) + '}\n</tool_call>' in text


@pytest.mark.parametrize("render", RENDERERS)
@pytest.mark.parametrize("task", list(TASKS))
def test_sft_and_grpo_system_prompts_match(render, task):
    sft = render(build_messages(task, tools=True), None, True)
    grpo = render(build_messages(task), [TOOL_SCHEMA], True)
    assert sft == grpo
    assert sft.startswith("<|im_start|>system\n" + system_text(tools=True) + "<|im_end|>\n<|im_start|>user\n" + IMG)
    assert sft.count(IMG) == 1


@pytest.mark.parametrize("render", RENDERERS)
def test_system_text_matches_any_tool_list(render):
    "A trainer that derives its own schemas (TRL does, from the environment's methods) gets the same text if given them."
    tools = [ZOOM, TOOL_SCHEMA]
    msgs = [{"role": "system", "content": system_text()}, {"role": "user", "content": "x"}]
    assert render(msgs, tools) == render([{"role": "system", "content": system_text(tools=tools)}, {"role": "user", "content": "x"}])


def test_unknown_role_is_an_error():
    with pytest.raises(ValueError, match="unknown role 'robot'"): render_chat([{"role": "robot", "content": "x"}])
    with pytest.raises(ValueError, match="no 'name'"): render_chat([{"role": "assistant", "content": "", "tool_calls": [{"arguments": {}}]}])


@needs_jinja
def test_unknown_role_is_an_error_in_jinja():
    with pytest.raises(jinja2.exceptions.TemplateError, match="unknown message role"): jinja_render([{"role": "robot", "content": "x"}])
    with pytest.raises(jinja2.exceptions.TemplateError, match="mapping"): jinja_render([{"role": "user", "content": {"text": "x"}}])


@needs_jinja
def test_python_renderer_equals_jinja_on_random_conversations():
    rng = random.Random(0)
    for i in range(300):
        msgs = random_conversation(rng)
        tools = rng.choice([None, [], [TOOL_SCHEMA], [ZOOM, TOOL_SCHEMA]])
        gen = rng.random() < 0.5
        assert render_chat(msgs, tools, gen, spans=True) == jinja_render(msgs, tools, gen, spans=True), (i, msgs)


# --- tasks and prompts ------------------------------------------------------------------------------------------

def test_task_keys_and_windows():
    assert set(TASKS) == set(PAPER_TASKS) | set(OOD_TASKS) and PAPER_TASKS == ("cv", "carbon", "gm", "ss", "wd")
    for key, t in TASKS.items():
        assert isinstance(t, Task) and t.key == key and t.question.endswith("?")
        for lo, hi, name in t.windows:
            assert isinstance(lo, (int, float)) and isinstance(hi, (int, float)) and lo < hi and name.strip()


def test_user_prompt_for_the_bench():
    for key, t in TASKS.items():
        u = user_prompt(key)
        assert u.startswith(IMAGE_TOKEN) and u.count(IMAGE_TOKEN) == 1 and t.question in u
        assert u == IMAGE_TOKEN + build_messages(key)[1]["content"][1]["text"]
        assert user_prompt(key, guidelines=False) == f"{IMAGE_TOKEN}{t.question} Answer YES or NO."
    with pytest.raises(ValueError, match="unknown"): user_prompt("xx")


def test_system_prompt_teaches_the_format():
    for s in ("<think>", "</think>", "<tool_call>", "<answer>\\boxed{YES}</answer>", "<answer>\\boxed{NO}</answer>",
              TOOL_NAME, f"at most {MAX_TOOL_CALLS} tool calls"):
        assert s in SYSTEM_PROMPT, s
    assert system_text(zoom=False).count("<tool_call>") == 0


def test_template_ships_with_the_package():
    assert Path(str(TEMPLATE_PATH)).name == "qwen2_5_vl_tools.jinja" and "{%- generation %}" in chat_template()
    manifest = (Path(__file__).resolve().parents[1] / "MANIFEST.in").read_text()
    assert re.search(r"recursive-include speco3 .*\*\.jinja", manifest)


def test_install_template_sets_processor_and_tokenizer():
    class Obj: pass
    proc, tok = Obj(), Obj()
    proc.tokenizer = tok
    assert install_template(proc) is proc
    assert proc.chat_template == tok.chat_template == chat_template() and tok.response_template is RESPONSE_TEMPLATE
    alone = Obj()
    install_template(alone)
    assert alone.chat_template == chat_template() and alone.response_template is RESPONSE_TEMPLATE


# --- parsing the reply back ---------------------------------------------------------------------------------------

def _legacy_parse(reply):
    "The legacy response_schema's regexes as transformers applies them (re.search / re.finditer with DOTALL)."
    m = re.search(RESPONSE_SCHEMA["x-regex"], reply, re.DOTALL)
    it = RESPONSE_SCHEMA["properties"]["tool_calls"]["x-regex-iterator"]
    return m["content"], [json.loads(c) for c in re.findall(it, m["tool_calls"] or "", re.DOTALL)]


def test_legacy_schema_regexes_on_rendered_replies():
    assert _legacy_parse(GOLDEN_REPLIES[0]) == ("<think>look</think>", [{"name": "zoom", "arguments": {"wavelength_range": [6480, 6650]}}])
    assert _legacy_parse(GOLDEN_REPLIES[1]) == ("<think>broad</think>\n<answer>\\boxed{YES}</answer>", [])
    two = render_chat([{"role": "user", "content": "x"}, {"role": "assistant", "content": "", "tool_calls": [CALL, CALL]}], spans=True)
    a, b = two[1][0]
    assert _legacy_parse(two[0][a:b]) == ("", [CALL["function"]] * 2)


def test_response_template_structure():
    "The keys and rules transformers' loader enforces: known keys, one implicit (opener-less) field, valid regexes."
    assert set(RESPONSE_TEMPLATE) <= {"version", "defaults", "fields", "start_anchor", "start_anchor_pattern"}
    allowed = {"open", "open_pattern", "close", "close_pattern", "content", "content_args", "repeats", "optional", "transform"}
    fields = RESPONSE_TEMPLATE["fields"]
    assert all(set(f) <= allowed for f in fields.values())
    assert [k for k, f in fields.items() if "open" not in f and "open_pattern" not in f] == ["content"]
    assert "reasoning_content" not in fields  # <think> stays in content, where the reward reads it
    close = re.compile(fields["tool_calls"]["close_pattern"])
    assert close.match("</tool_call>\n") and re.compile(fields["content"]["close_pattern"]).match("<|im_end|>\n")
    assert GOLDEN.count(RESPONSE_TEMPLATE["start_anchor"]) == 2


# --- with the real libraries ----------------------------------------------------------------------------------------

def _tokenizer():
    "A tiny word-level tokenizer with Qwen's special tokens, carrying our template (words it lacks become [UNK])."
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast
    t = Tokenizer(models.WordLevel({"[UNK]": 0}, unk_token="[UNK]"))
    t.pre_tokenizer = pre_tokenizers.Whitespace()
    tok = PreTrainedTokenizerFast(tokenizer_object=t, unk_token="[UNK]", eos_token="<|im_end|>",
                                  additional_special_tokens=["<|im_start|>", "<|vision_start|>", "<|image_pad|>", "<|vision_end|>"])
    return install_template(tok)


@needs_transformers
def test_transformers_renders_like_render_chat():
    tok, rng = _tokenizer(), random.Random(1)
    assert tok.apply_chat_template(CONVERSATION, tools=[ZOOM], tokenize=False) == GOLDEN
    for _ in range(50):
        msgs, gen = random_conversation(rng), rng.random() < 0.5
        assert tok.apply_chat_template(msgs, tools=[TOOL_SCHEMA], tokenize=False, add_generation_prompt=gen) == \
            render_chat(msgs, [TOOL_SCHEMA], gen)


def _masks(tok, messages):
    "(transformers' ids, its assistant mask, the mask render_chat's spans give for the same tokens)."
    out = tok.apply_chat_template(messages, tools=[ZOOM], tokenize=True, return_dict=True, return_assistant_tokens_mask=True)
    text, spans = render_chat(messages, [ZOOM], spans=True)
    enc = tok(text, add_special_tokens=False, return_offsets_mapping=True)
    assert enc["input_ids"] == list(out["input_ids"])
    return list(out["input_ids"]), list(out["assistant_masks"]), [int(any(a <= s < b for a, b in spans)) for s, _ in enc["offset_mapping"]]


@needs_transformers
def test_transformers_assistant_mask_is_the_generation_spans():
    "return_assistant_tokens_mask (what SFT's assistant_only_loss uses) marks exactly the tokens of render_chat's spans."
    _, got, expected = _masks(_tokenizer(), CONVERSATION)
    assert got == expected and sum(expected) > 0


@needs_transformers
def test_transformers_assistant_mask_skips_untrained_replies():
    "What SFT trains on a one-turn example: only the replies without train=False, as render_chat's spans say."
    tok = _tokenizer()
    _, got, expected = _masks(tok, CONTEXT_ONLY)
    _, full, _ = _masks(tok, CONVERSATION)
    assert got == expected and 0 < sum(expected) < sum(full)

@needs_transformers
def test_transformers_parses_tool_calls_with_the_response_template():
    tok = _tokenizer()
    prefix = render_chat(CONVERSATION[:2], [ZOOM], True)  # the prompt up to the assistant header, as GRPO passes it
    assert tok.parse_response(GOLDEN_REPLIES[0], prefix=prefix) == {"role": "assistant", "content": "<think>look</think>", "tool_calls": [CALL]}
    assert tok.parse_response(GOLDEN_REPLIES[1], prefix=prefix) == {"role": "assistant", "content": CONVERSATION[-1]["content"]}
    two = render_chat([{"role": "user", "content": "x"}, {"role": "assistant", "content": "<think>a</think>", "tool_calls": [CALL, CALL]}], spans=True)
    (a, b), = two[1]
    assert tok.parse_response(two[0][a:b], prefix=two[0][:a])["tool_calls"] == [CALL, CALL]


@needs_trl
def test_trl_accepts_the_template():
    "TRL's own checks: tool calling rendered, prefix-preserving, stop token trained, and no patching needed for SFT."
    from trl import chat_template_utils as ctu
    tok = _tokenizer()
    assert ctu.supports_tool_calling(tok)
    assert ctu.is_chat_template_prefix_preserving(tok)
    assert ctu.is_chat_template_stop_token_trained(tok)
    assert ctu.get_training_chat_template(tok) is None


@needs_trl
def test_trl_accepts_the_template_on_a_qwen2_5_vl_processor():
    "The VLM path of TRL's checks (multimodal content, image-token expansion) with a real Qwen2.5-VL processor."
    from PIL import Image
    from transformers import Qwen2_5_VLProcessor, Qwen2VLImageProcessorPil
    from trl import chat_template_utils as ctu

    class Processor(Qwen2_5_VLProcessor):  # no video processor: its default needs torchvision (stack-notes)
        def __init__(self, image_processor=None, tokenizer=None, chat_template=None, **kw):
            super().__init__(image_processor=image_processor, tokenizer=tokenizer, video_processor=None, chat_template=chat_template)

    tok = _tokenizer()
    tok.add_special_tokens({"additional_special_tokens": ["<|im_start|>", "<|vision_start|>", "<|image_pad|>", "<|vision_end|>", "<|video_pad|>"]})
    proc = install_template(Processor(image_processor=Qwen2VLImageProcessorPil(min_pixels=28 * 28 * 4, max_pixels=28 * 28 * 16), tokenizer=tok))
    assert ctu.supports_tool_calling(proc) and ctu.is_chat_template_prefix_preserving(proc)
    assert ctu.is_chat_template_stop_token_trained(proc) and ctu.get_training_chat_template(proc) is None
    out = proc.apply_chat_template(build_messages("cv", image=Image.new("RGB", (200, 150), "white")), tools=[TOOL_SCHEMA],
                                   add_generation_prompt=True, tokenize=True, return_dict=True)
    n_pad = list(out["input_ids"][0]).count(tok.convert_tokens_to_ids("<|image_pad|>"))
    assert n_pad == int(out["image_grid_thw"][0].prod()) // 4 > 0  # the one placeholder expanded to the image's tokens


# --- the authors' chat template (tests/conformance/template/cases.jsonl): both renderings answer as theirs did
import json as _json_mod
from pathlib import Path as _Path
TEMPLATE_CASES = [_json_mod.loads(l) for l in (_Path(__file__).parent / "conformance" / "template" / "cases.jsonl").read_text().splitlines() if l.strip()]

@pytest.mark.parametrize("case", TEMPLATE_CASES, ids=[c["case"] for c in TEMPLATE_CASES])
def test_template_conformance_python(case):
    from speco3.prompts import render_chat
    assert render_chat(case["messages"], tools=case["tools"], add_generation_prompt=case["add_generation_prompt"]) == case["authors_text"]

@pytest.mark.parametrize("case", TEMPLATE_CASES, ids=[c["case"] for c in TEMPLATE_CASES])
def test_template_conformance_jinja(case):
    cu = pytest.importorskip("transformers.utils.chat_template_utils")
    from speco3.prompts import chat_template
    text = cu.render_jinja_template(conversations=[case["messages"]], tools=case["tools"], chat_template=chat_template(),
                                    add_generation_prompt=case["add_generation_prompt"])[0][0]
    assert text == case["authors_text"]

def test_template_keeps_generation_markers():
    from speco3.prompts import chat_template
    assert "{%- generation %}" in chat_template() and "{%- endgeneration %}" in chat_template()


@pytest.mark.parametrize("render", RENDERERS)
def test_tools_in_system_false_writes_no_schema(render):
    "The brief prompt's GRPO rendering: TRL passes tools=, the keyword keeps the schema block out; default unchanged."
    from speco3.prompts import build_messages, TOOL_SCHEMA, BRIEF_PROMPT
    msgs = build_messages("cv", prompt="brief")
    plain = render(msgs, tools=[TOOL_SCHEMA], add_generation_prompt=True, tools_in_system=False)
    assert plain.startswith("<|im_start|>system\n" + BRIEF_PROMPT + "<|im_end|>") and "<tools>" not in plain
    assert "<tools>" in render(msgs, tools=[TOOL_SCHEMA], add_generation_prompt=True, tools_in_system=True)
    assert "<tools>" in render(msgs, tools=[TOOL_SCHEMA], add_generation_prompt=True)
