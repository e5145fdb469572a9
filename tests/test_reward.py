"""The authors' conformance cases (tests/conformance/reward: what their compute_score answered) and the odd-output
matrix of speco3.reward's stricter `speco3` rule: every row is a completion, the prediction and format status it must
give, the score against ground truth YES, and a piece of text one of the violation reasons must contain."""
import time
import pytest
from speco3.reward import parse, score, authors_parse, Parsed, TAIL_CHARS

T = "<think>Broad Balmer emission and He II 4686.</think>"
A = lambda box: f"<answer>\\boxed{{{box}}}</answer>"
CALL = '<tool_call>{"name": "spectral_visualization_tool", "arguments": {"wavelength_range": [6500, 6620]}}</tool_call>'
RESP = "<tool_response>Generated spectral visualization focused on wavelength range [6500, 6620] Å for Hα.</tool_response>"

# (id, completion, prediction, format_ok, score against YES with alpha 0.2, substring of a reason or None, found_in)
ROWS = [
    # valid, and what the rule tolerates
    ("valid yes", T + A("YES"), "YES", True, 1.0, None, "answer box"),
    ("valid no", T + A("NO"), "NO", True, 0.0, None, "answer box"),
    ("lower case", T + A("yes"), "YES", True, 1.0, None, "answer box"),
    ("mixed case", T + A("No"), "NO", True, 0.0, None, "answer box"),
    ("spaces in box", T + A(" NO "), "NO", True, 0.0, None, "answer box"),
    ("newline and tab in box", T + A("\n yes\t"), "YES", True, 1.0, None, "answer box"),
    ("prose around the box", T + "<answer>The answer is \\boxed{YES}.</answer>", "YES", True, 1.0, None, "answer box"),
    ("whitespace around answer", T + "\n\n<answer>\n  \\boxed{YES}\n</answer>\n", "YES", True, 1.0, None, "answer box"),
    ("text after answer", T + A("YES") + "\nI hope this helps.", "YES", True, 1.0, None, "answer box"),
    ("tool call then answer", T + CALL + RESP + T + A("YES"), "YES", True, 1.0, None, "answer box"),
    ("several think blocks", T + T + T + A("NO"), "NO", True, 0.0, None, "answer box"),
    ("box in thinking, valid answer", "<think>first guess \\boxed{NO}</think>" + A("YES"), "YES", True, 1.0, None, "answer box"),
    ("non-ASCII around valid", "<think>候选体光谱 🌟 Hα 6563 Å emission, Ångström scale</think>答案：" + A("YES") + " ✅ 完成",
     "YES", True, 1.0, None, "answer box"),
    ("non-ASCII inside answer", T + "<answer>结论 Hα → \\boxed{YES} 🔭</answer>", "YES", True, 1.0, None, "answer box"),
    ("malformed tool JSON is not a format violation", T + '<tool_call>{"name": "t", "arguments": {</tool_call>' + T + A("YES"),
     "YES", True, 1.0, None, "answer box"),
    ("unclosed tool call before answer", T + '<tool_call>{"name": "t"' + A("YES"), "YES", True, 1.0, None, "answer box"),
    ("very long thinking", "<think>" + "The continuum is flat. " * 4500 + "</think>" + A("YES"), "YES", True, 1.0, None, "answer box"),
    # several answers, several boxes
    ("two answers, last YES", T + A("NO") + A("YES"), "YES", False, 0.8, "2 <answer> blocks", "answer box"),
    ("two answers, last NO", T + A("YES") + A("NO"), "NO", False, -0.2, "2 <answer> blocks", "answer box"),
    ("answer inside thinking", "<think>I will write " + A("NO") + "</think>" + A("YES"), "YES", False, 0.8, "2 <answer> blocks", "answer box"),
    ("two boxes in answer", T + "<answer>\\boxed{NO} \\boxed{YES}</answer>", "YES", False, 0.8, "2 \\boxed{} in <answer>", "answer box"),
    ("nested answer tags", T + "<answer><answer>\\boxed{YES}</answer>", "YES", False, 0.8, "nested <answer>", "answer box"),
    # box outside the answer
    ("box without answer", T + "\\boxed{YES}", "YES", False, 0.8, "no <answer> block", "box"),
    ("box only", "\\boxed{no}", "NO", False, -0.2, "no <think> block", "box"),
    ("last box anywhere wins", "<think>\\boxed{YES} at first, then \\boxed{NO}</think>", "NO", False, -0.2, "no <answer>", "box"),
    ("empty answer, box in thinking", "<think>\\boxed{NO}</think><answer></answer>", "NO", False, -0.2, "no \\boxed{} in <answer>", "box"),
    # what is inside the box
    ("nested braces", T + A("{YES}"), "YES", False, 0.8, "is not YES or NO", "answer box"),
    ("text wrapper", T + A("\\text{YES}"), "YES", False, 0.8, "is not YES or NO", "answer box"),
    ("textbf wrapper with spaces", T + A("\\textbf{ no }"), "NO", False, -0.2, "is not YES or NO", "answer box"),
    ("braces and text wrapper", T + A("{\\text{yes}}"), "YES", False, 0.8, "is not YES or NO", "answer box"),
    ("MAYBE", T + A("MAYBE"), None, False, -0.2, "is not YES or NO", "answer box"),
    ("MAYBE beats a word", T + "<answer>\\boxed{MAYBE}, so yes</answer>", None, False, -0.2, "is not YES or NO", "answer box"),
    ("YES/NO in one box", T + A("YES/NO"), None, False, -0.2, "is not YES or NO", "answer box"),
    ("YES or NO in one box", T + A("YES or NO"), None, False, -0.2, "is not YES or NO", "answer box"),
    ("empty box", T + A(""), None, False, -0.2, "is not YES or NO", "answer box"),
    ("emoji in box", T + A("YES ✅"), None, False, -0.2, "is not YES or NO", "answer box"),
    ("YES. in box", T + A("YES."), None, False, -0.2, "is not YES or NO", "answer box"),
    ("space before brace is no box", T + "<answer>\\boxed {YES}</answer>", "YES", False, 0.8, "no \\boxed{} in <answer>", "answer word"),
    ("unclosed box", T + "<answer>\\boxed{YES</answer>", "YES", False, 0.8, "no \\boxed{} in <answer>", "answer word"),
    ("unclosed box beats a box in thinking", "<think>maybe \\boxed{NO}?</think><answer>\\boxed{YES</answer>",
     "YES", False, 0.8, "no \\boxed{} in <answer>", "answer word"),
    # words instead of a box
    ("bare word in answer", T + "<answer>yes</answer>", "YES", False, 0.8, "no \\boxed{} in <answer>", "answer word"),
    ("sentence in answer", T + "<answer>No, this is not a CV.</answer>", "NO", False, -0.2, "no \\boxed{}", "answer word"),
    ("both words in answer", T + "<answer>yes, or maybe no</answer>", None, False, -0.2, "no \\boxed{}", "answer word"),
    ("non-ASCII neighbour", T + "<answer>答案是YES。</answer>", "YES", False, 0.8, "no \\boxed{}", "answer word"),
    ("NOT and YESTERDAY are not words", T + "<answer>NOT a CV, seen YESTERDAY</answer>", None, False, -0.2, "no \\boxed{}", "nothing"),
    ("upper-case word in the tail", "<think>Strong Hα. Final answer: YES</think>", "YES", False, 0.8, "no <answer> block", "tail"),
    ("lower-case prose is not an answer", "<think>Hα shows no emission; yes, the continuum is red.</think>",
     None, False, -0.2, "no <answer> block", "nothing"),
    ("both upper-case words in the tail", "<think>Is it YES or NO?</think>", None, False, -0.2, "no <answer> block", "tail"),
    ("word before the tail", "YES " + "flat " * (TAIL_CHARS // 5 + 1), None, False, -0.2, "no <answer> block", "nothing"),
    # think tags
    ("no think", A("YES"), "YES", False, 0.8, "no <think> block", "answer box"),
    ("unclosed think", "<think>hmm " + A("YES"), "YES", False, 0.8, "unclosed <think>", "answer box"),
    ("stray close think", "reasoning</think>" + A("YES"), "YES", False, 0.8, "stray </think>", "answer box"),
    ("think tags reversed", "</think>x<think>" + A("YES"), "YES", False, 0.8, "stray </think>", "answer box"),
    ("nested think", "<think>a<think>b</think>c</think>" + A("YES"), "YES", False, 0.8, "nested <think>", "answer box"),
    ("extra open think", T + "<think>" + A("NO"), "NO", False, -0.2, "unclosed <think>", "answer box"),
    # answer tags
    ("unclosed answer", T + "<answer>\\boxed{YES}", "YES", False, 0.8, "unclosed <answer>", "box"),
    ("stray close answer", T + "\\boxed{YES}</answer>", "YES", False, 0.8, "stray </answer>", "box"),
    ("answer tags reversed", T + "</answer>\\boxed{NO}<answer>", "NO", False, -0.2, "no <answer> block", "box"),
    # the answer must be last
    ("answer then tool call", T + A("YES") + CALL, "YES", False, 0.8, "<tool_call> after </answer>", "answer box"),
    ("answer then unclosed tool call", T + A("YES") + '<tool_call>{"name"', "YES", False, 0.8, "<tool_call> after </answer>", "answer box"),
    ("answer then think", T + A("NO") + T, "NO", False, -0.2, "<think> after </answer>", "answer box"),
    # tool responses are not the model's text
    ("tool response echoes an answer", T + "<tool_response>" + A("YES") + "</tool_response>" + A("NO"), "NO", True, 0.0, None, "answer box"),
    ("tool response echoes YES, no answer", T + CALL + "<tool_response>YES</tool_response>", None, False, -0.2, "no <answer> block", "nothing"),
    ("tool response's box does not count", T + "<tool_response>\\boxed{YES}</tool_response>", None, False, -0.2, "no <answer>", "nothing"),
    ("tool response's think does not count", "<tool_response><think>x</think></tool_response>" + A("YES"),
     "YES", False, 0.8, "no <think> block", "answer box"),
    ("unclosed tool response runs to the end", T + "<tool_response>The answer is YES " + A("YES"),
     None, False, -0.2, "no <answer> block", "nothing"),
    # nothing at all
    ("empty", "", None, False, -0.2, "no <think> block", "nothing"),
    ("whitespace only", " \n\t \n", None, False, -0.2, "no <answer> block", "nothing"),
    ("tags only", "<think></think><answer></answer>", None, False, -0.2, "no \\boxed{} in <answer>", "nothing"),
]

@pytest.mark.parametrize("completion, prediction, format_ok, score_yes, reason, found_in",
                         [r[1:] for r in ROWS], ids=[r[0] for r in ROWS])
def test_odd_outputs(completion, prediction, format_ok, score_yes, reason, found_in):
    r = score(completion, "YES", rule="speco3")
    assert (r["prediction"], r["format_ok"], r["found_in"]) == (prediction, format_ok, found_in)
    assert r["score"] == pytest.approx(score_yes)
    assert r["score"] == pytest.approx((prediction == "YES") - 0.2 * (not format_ok))
    assert score(completion, "NO", rule="speco3")["score"] == pytest.approx((prediction == "NO") - 0.2 * (not format_ok))
    assert (r["reasons"] == []) == format_ok
    if reason is not None: assert any(reason in x for x in r["reasons"]), r["reasons"]

def test_row_ids_unique():
    assert len({r[0] for r in ROWS}) == len(ROWS)

def test_multi_turn_list_equals_joined_string():
    turns = [T + CALL, RESP, T + A("YES")]
    assert parse(turns) == parse("\n".join(turns))
    r = score(turns, "yes")
    assert (r["score"], r["n_think"], r["n_tool_calls"], r["n_tool_responses"], r["n_answers"]) == (1.0, 2, 1, 1, 1)

def test_multi_turn_answer_then_call_in_a_later_turn():
    r = score([T + A("YES"), CALL], "YES", rule="speco3")
    assert (r["format_ok"], r["score"]) == (False, pytest.approx(0.8))
    assert "<tool_call> after </answer>" in r["reasons"]

def test_tool_calls_parsed_and_errors_counted():
    text = T + CALL + RESP + T + '<tool_call>{"name": "x", "arguments": {"a": </tool_call>' + '<tool_call>[1]</tool_call>' + T + A("NO")
    p = parse(text)
    assert isinstance(p, Parsed)
    assert p.tool_calls[0]["name"] == "spectral_visualization_tool"
    assert p.tool_calls[0]["arguments"] == {"wavelength_range": [6500, 6620]}
    assert p.tool_calls[0]["error"] is None
    assert p.tool_calls[1]["error"].startswith("invalid JSON")
    assert p.tool_calls[2]["error"] == "not a JSON object but a list"
    assert p.format_ok and p.prediction == "NO"
    r = score(text, "NO")
    assert (r["n_tool_calls"], r["n_tool_call_errors"], r["score"]) == (3, 2, 1.0)

def test_unclosed_tool_call_is_reported():
    p = parse(T + '<tool_call>{"name": "t", ' + A("YES"))
    assert p.tool_call_errors == ["unclosed <tool_call>"]

def test_parse_fields():
    p = parse("<think>a</think><think>b</think>" + CALL + "<answer> \\boxed{ no } </answer>")
    assert p.think == ["a", "b"]
    assert p.answers == [" \\boxed{ no } "] and p.answer == " \\boxed{ no } "
    assert (p.boxed, p.prediction, p.found_in) == (" no ", "NO", "answer box")
    assert (p.n_think, p.n_answers, p.n_tool_calls) == (2, 1, 1)
    assert parse("").answer is None

def test_score_keys():
    assert set(score(T + A("YES"), "YES")) == {"score", "prediction", "ground_truth", "correct", "format_ok", "reasons",
                                              "found_in", "n_think", "n_tool_calls", "n_tool_call_errors", "n_answers",
                                              "n_tool_responses", "rule", "predicted_class"}

@pytest.mark.parametrize("truth, expected", [("YES", "YES"), ("no", "NO"), (" Yes\n", "YES"), (True, "YES"), (False, "NO")])
def test_ground_truth_accepted(truth, expected):
    r = score(T + A("YES"), truth)
    assert r["ground_truth"] == expected and r["correct"] == (expected == "YES")

def test_ground_truth_numpy_bool():
    np = pytest.importorskip("numpy")
    assert score(T + A("NO"), np.bool_(False))["correct"] is True

@pytest.mark.parametrize("truth", ["MAYBE", "", "Y", 1, 0, None, ["YES"], b"YES"])
def test_ground_truth_rejected(truth):
    with pytest.raises(ValueError, match="ground_truth must be 'YES' or 'NO'"):
        score(T + A("YES"), truth)

@pytest.mark.parametrize("alpha, expected", [(0, 0.0), (0.2, -0.2), (0.5, -0.5), (1, -1.0)])
def test_alpha(alpha, expected):
    assert score("", "YES", alpha=alpha)["score"] == pytest.approx(expected)
    assert score(A("YES"), "YES", alpha=alpha)["score"] == pytest.approx(1 - alpha)

@pytest.mark.parametrize("alpha", [-0.01, 1.01, float("nan"), float("inf"), "0.2", None, True])
def test_alpha_rejected(alpha):
    with pytest.raises(ValueError, match=r"alpha must be a number in \[0, 1\]"):
        score(T + A("YES"), "YES", alpha=alpha)

@pytest.mark.parametrize("completion", [None, 3, {"role": "assistant", "content": "x"}, ["ok", None]])
def test_completion_type_rejected(completion):
    with pytest.raises(TypeError, match="string"):
        parse(completion)

ADVERSARIAL = {
    "unclosed think": "<think>" * 15_000,
    "stray close think": "</think>" * 13_000,
    "open boxes": "\\boxed{" * 15_000,
    "deep braces": "\\boxed{" + "{" * 100_000,
    "boxes with braces and answers": "\\boxed{{" * 12_000 + "<answer>" * 500,
    "unclosed tool calls": "<tool_call>{" * 8_000,
    "deep JSON in a call": "<tool_call>" + "[" * 100_000 + "</tool_call>",
    "unclosed tool responses": "<tool_response>" * 7_000,
    "words": "YES no " * 15_000,
    "empty boxes in an answer": "<answer>" + "\\boxed{}" * 12_000 + "</answer>",
    "long unclosed box contents": ("\\boxed{" + "x" * 190) * 500,
}

@pytest.mark.parametrize("name", list(ADVERSARIAL))
def test_adversarial_input_is_fast(name):
    text = ADVERSARIAL[name][:100_000] if name != "deep JSON in a call" else ADVERSARIAL[name]
    t0 = time.perf_counter()
    r = score(text, "YES")
    dt = time.perf_counter() - t0
    assert r["format_ok"] is False and score(text, "YES", rule="speco3")["format_ok"] is False
    assert dt < 5, f"{name}: {dt:.1f} s; a linear parser takes milliseconds, so this means super-linear behaviour"


# --- the authors' answers (tests/conformance/reward/cases.jsonl): the default rule reproduces each one
import json
from pathlib import Path
CASES = [json.loads(l) for l in (Path(__file__).parent / "conformance" / "reward" / "cases.jsonl").read_text().splitlines() if l.strip()]

def test_conformance_cases_present():
    assert len(CASES) >= 400

@pytest.mark.parametrize("i", range(len(CASES)))
def test_reward_conformance(i):
    c = CASES[i]
    r = score(c["completion"], c["ground_truth"])
    assert r["score"] == pytest.approx(c["authors"]["score"]), (c["completion"], r["reasons"])
    assert r["predicted_class"] == c["authors"]["predicted_class"]
    assert r["ground_truth"] == c["authors"]["true_class"]

def test_answer_inside_thinking_scores_as_the_authors():
    # their code counts tags over the whole text: one <think>, one </think>, one <answer>, one </answer> is valid
    text = "<think>Broad Balmer lines. <answer>\\boxed{YES}</answer> so it is a CV.</think>"
    r = score(text, "YES")
    assert (r["prediction"], r["format_ok"], r["score"]) == ("YES", True, pytest.approx(1.0))
    assert score(text, "YES", rule="speco3")["score"] == pytest.approx(0.8)

# --- a </think> with no <think> before it (issue 40). The shared conformance file has 58 completions that open with
# "closing only</think>", but each of them also fails the authors' format for another reason (no think block at all,
# no box, two answers...), so none tells the rule apart. These are built from the stated rule of the authors' code
# (as many <think> tags as </think> tags, at least one): -alpha when wrong, 1 - alpha when right, not 0 and 1.
CLOSE_ONLY = [  # (completion, ground truth, the authors' score, their predicted class)
    ("closing only</think><answer>\\boxed{NO}</answer><think>after</think>", "YES", -0.2, "NO"),
    ("closing only</think><answer>\\boxed{NO}</answer><think>after</think>", "NO", 0.8, "NO"),
    ("closing only</think><answer>\\boxed{yes}</answer><think>after</think>", "NO", -0.2, "YES"),
    ("closing only</think><answer>\\boxed{YES}</answer>\n<think>after</think>\nFinal: NO", "YES", 0.8, "YES"),
    ('<tool_call>\n{"name": "spectral_visualization_tool", "arguments": {"wavelength_range": [6480, 6650]}}\n</tool_call>\n'
     "closing only</think><answer>\n\\boxed{ No }\n</answer><think>after</think>", "YES", -0.2, "NO"),
    ("<think>a</think></think><answer>\\boxed{NO}</answer>", "YES", -0.2, "NO"),    # a stray close after a full block
    ("</think><think>x</think><answer>\\boxed{NO}</answer><think>", "YES", 0.0, "NO"),  # two and two: balanced, valid
]

@pytest.mark.parametrize("completion, truth, want, predicted", CLOSE_ONLY)
def test_close_without_open_think_fails_the_authors_format(completion, truth, want, predicted):
    r = score(completion, truth)
    assert (r["score"], r["predicted_class"]) == (pytest.approx(want), predicted), r["reasons"]
    assert r["format_ok"] == (want in (0.0, 1.0))

def test_conformance_close_only_cases_exercised():
    # the shared file's "closing only</think>" completions are scored by test_reward_conformance; keep them there
    assert sum("closing only</think>" in c["completion"] for c in CASES) >= 50

def test_richer_parse_does_not_change_the_score():
    text = T + CALL + RESP + T + "<answer>\\boxed{YES} \\boxed{NO}</answer>"
    r = score(text, "YES")
    assert (r["score"], r["n_think"], r["n_tool_calls"], r["n_tool_responses"]) == (1.0, 2, 1, 1)
    assert authors_parse(text)["predicted_class"] == "YES"

def test_rule_rejected():
    with pytest.raises(ValueError, match="rule must be one of"):
        score(T + A("YES"), "YES", rule="paper")
