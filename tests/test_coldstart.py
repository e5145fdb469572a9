"""Cold start (speco3.coldstart, from nbs/12_coldstart.ipynb): each QC filter catches its defect on hand-built
trajectories, de-duplication against test splits (names, object ids, renamed copies), the review state machine and
the sheet round trip (malformed sheets give one-line errors naming row and column), both exports read back, the
exported data through TRL's collator, and the LLM drafter against a fake OpenAI-compatible server."""
import csv, json, re, threading, time
from contextlib import contextmanager
from http.server import ThreadingHTTPServer, BaseHTTPRequestHandler
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import speco3.coldstart as cs
from speco3.agent import Sample
from speco3.io import to_specvi_row
from speco3.policy import ReplayPolicy
from speco3.prompts import TASKS, system_text, render_chat
from speco3.remote import OpenAIPolicy
from speco3.tool import TOOL_NAME


# --- hand-built trajectories -----------------------------------------------------------------------------------------

def call(lo, hi, label=None):
    args = {"wavelength_range": [lo, hi], **({"label": label} if label else {})}
    return "<tool_call>\n" + json.dumps({"name": TOOL_NAME, "arguments": args}, ensure_ascii=False) + "\n</tool_call>"  # the authors' format


def good(task, truth):
    lo, hi, name = TASKS[task].windows[0]
    mid = round((lo + hi) / 2)
    return [f"<think>The overview needs a closer look at {name}; zoom into {lo:g}-{hi:g} Å.</think>\n{call(lo, hi, name)}",
            f"<think>Around {mid} Å the {name} region shows what decides it.</think>\n<answer>\\boxed{{{truth}}}</answer>"]


def flip(truth): return "NO" if truth == "YES" else "YES"


def defects(task, truth):
    "One script per QC filter, each with that filter's defect and (as far as possible) no other."
    lo, hi, name = TASKS[task].windows[0]
    lo2, hi2, name2 = TASKS[task].windows[1]
    g = good(task, truth)
    return {
        "label": [g[0], g[1].replace(f"{{{truth}}}", f"{{{flip(truth)}}}")],
        "format": [f"Zooming in.\n{call(lo, hi, name)}", g[1]],
        "tool_calls": [g[0], f"<think>Next the second region.</think>\n{call(hi2, lo2)}", g[1]],
        "wavelengths": [g[0], f"<think>Near {round(lo) - 400} Å there is nothing.</think>\n<answer>\\boxed{{{truth}}}</answer>"],
        "zoom": [f"<think>The overview is enough.</think>\n<answer>\\boxed{{{truth}}}</answer>"],
        "repeats": [g[0], f"<think>Once more, to be sure.</think>\n{call(lo, hi, 'again')}", g[1]],
        "length": [g[0], "<think>" + "It is what it is. " * 400 + f"</think>\n<answer>\\boxed{{{truth}}}</answer>"],
        "leak": [g[0], f"<think>The ground truth says {truth}, and the plot agrees.</think>\n<answer>\\boxed{{{truth}}}</answer>"],
    }


@pytest.fixture(scope="module")
def samples():
    return cs.simulate_samples(2, tasks=("cv", "wd"), seed=5)


@pytest.fixture(scope="module")
def drafted(samples, tmp_path_factory):
    "A draft run: every sample drafted well, plus one defective copy per filter, under new ids."
    run = tmp_path_factory.mktemp("drafts")
    items, scripts = [], {}
    for s in samples:
        items.append(s); scripts[s.sample_id] = good(s.task, s.truth)
        for kind, script in defects(s.task, s.truth).items():
            sid = f"{s.sample_id}-{kind}"
            items.append(Sample(sid, s.task, s.spectrum, s.truth)); scripts[sid] = script
    recs = cs.draft(items, run, drafter=ReplayPolicy(scripts, name="test-script"), style="fast")
    return run, {r["sample_id"]: r for r in recs}, samples


# --- drafting ----------------------------------------------------------------------------------------------------

def test_simulate_samples_positives_and_confusers(samples):
    assert [(s.task, s.truth) for s in samples] == [("cv", "YES"), ("cv", "NO"), ("wd", "YES"), ("wd", "NO")]
    assert all(cs.snr_of(s) > cs.MIN_SNR for s in samples)
    assert samples[1].spectrum.meta["kind"] in {k for k in __import__("speco3.simulate").simulate.kinds_for("cv", "confuser")}


def test_draft_records_provenance_and_skips(drafted, samples, tmp_path):
    run, recs, _ = drafted
    r = recs[samples[0].sample_id]
    assert r["drafter"] == "test-script" and r["policy"] == {"name": "test-script"} and r["guided"] is True
    assert r["object_id"] == samples[0].spectrum.meta["object_id"] and len(r["array_sha256"]) == 64
    lo, hi = r["data_range"]
    assert 3500 < lo < 4000 and 8800 < hi < 9300
    assert (run / r["overview"]["path"]).exists() and r["turns"][0]["results"][0]["ok"]
    # low SNR and other tasks are skipped; an unlabelled sample is refused
    low = Sample("low", "cv", samples[0].spectrum.replace(meta={**samples[0].spectrum.meta, "snr": {"g": 5.0}}), "YES")
    other = Sample("qso-1", "qso", samples[0].spectrum, "NO")
    out = cs.draft([low, other], tmp_path / "d", drafter=ReplayPolicy([]), style="fast")
    assert out == [] and json.loads((tmp_path / "d" / "drafts.json").read_text())["skipped"] == {"snr": 1, "task": 1}
    with pytest.raises(ValueError, match="no label"):
        cs.draft([Sample("x", "cv", samples[0].spectrum)], tmp_path / "e", drafter=ReplayPolicy([]))
    with pytest.raises(ValueError, match="drafter"):
        cs.draft(samples, tmp_path / "f", drafter="llm")


# --- quality control -------------------------------------------------------------------------------------------------

def test_good_drafts_pass_every_filter(drafted):
    _, recs, samples = drafted
    for s in samples:
        assert cs.check_draft(recs[s.sample_id]) == {}, s.sample_id


@pytest.mark.parametrize("kind", ["label", "format", "tool_calls", "wavelengths", "zoom", "repeats", "length", "leak"])
def test_each_filter_catches_its_defect(drafted, kind):
    _, recs, samples = drafted
    for s in samples:
        failed = cs.check_draft(recs[f"{s.sample_id}-{kind}"])
        assert set(failed) == {kind}, (s.sample_id, failed)
        assert "\n" not in failed[kind]


def test_wavelength_rule_messages(drafted):
    _, recs, samples = drafted
    rec = json.loads(json.dumps(recs[samples[0].sample_id]))
    assert cs.check_draft(rec) == {}
    rec["turns"][-1]["text"] = rec["turns"][-1]["text"].replace("<think>", "<think>Hα 6563 and [O III] 5007 are weak. ")
    assert cs.check_draft(rec)["wavelengths"] == "turn 2 cites 5007 Å, outside every zoom window"
    rec["turns"][-1]["text"] = "<think>Beyond 12000 Å nothing.</think><answer>\\boxed{YES}</answer>"
    assert "outside the data" in cs.check_draft(rec)["wavelengths"]
    assert cs.cited_wavelengths("FWHM 1500 km/s, Teff 3500 K, EW 30 Å, λ6563, 4959/5007 Å") == [6563, 4959, 5007]


def test_qc_report_per_filter_and_task(drafted):
    _, recs, samples = drafted
    kept, report = cs.qc(list(recs.values()))
    assert {r["sample_id"] for r in kept} == {s.sample_id for s in samples}
    assert list(report.columns) == ["cv", "wd", "all"]
    assert list(report.index) == ["drafts"] + list(cs.FILTERS) + ["all filters"]
    assert report.loc["drafts", "cv"] == 18 and report.loc["drafts", "all"] == 36
    # per task: 2 good + 16 defective; each defect fails one filter in 2 of 18 drafts (test_overlap: none)
    assert report.loc["zoom", "cv"] == round(100 * 16 / 18, 1) and report.loc["test_overlap", "all"] == 100.0
    assert report.loc["all filters", "wd"] == round(100 * 2 / 18, 1)
    assert all(r["qc"] == {} for r in kept)


def test_dedup_against_test_splits(drafted):
    _, recs, samples = drafted
    good_recs = [recs[s.sample_id] for s in samples]
    s0, s1 = samples[0], samples[1]
    # a test split holding s0 under its name, and s1 renamed and re-identified (same flux)
    rows = [to_specvi_row(s0.spectrum, "cv", "YES", name=s0.sample_id),
            {**to_specvi_row(s1.spectrum, "cv", "NO", name="spec-renamed.fits.gz"), "object_id": "another-object"}]
    rows[0]["object_id"] = s0.spectrum.meta["object_id"]
    keys = cs.heldout_keys(pd.DataFrame(rows))
    assert {s0.sample_id, s0.spectrum.meta["object_id"], "spec-renamed.fits.gz", "another-object"} <= keys
    kept, report = cs.qc(good_recs, test_ids=keys)
    assert {r["sample_id"] for r in kept} == {samples[2].sample_id, samples[3].sample_id}
    why = cs.check_draft(recs[s1.sample_id], keys)["test_overlap"]
    assert why.startswith("array_sha256")  # caught by the flux fingerprint only
    assert report.loc["test_overlap", "cv"] == 0.0 and report.loc["test_overlap", "wd"] == 100.0


def test_heldout_keys_reads_only_test_files(tmp_path, samples):
    import pyarrow as pa, pyarrow.parquet as pq
    for name, s in (("train_cv", samples[0]), ("test_wd", samples[2])):
        row = {**to_specvi_row(s.spectrum, s.task, s.truth, name=s.sample_id), "object_id": s.spectrum.meta["object_id"]}
        pq.write_table(pa.Table.from_pylist([row]), tmp_path / f"{name}.parquet")
    keys = cs.heldout_keys(tmp_path)
    assert samples[2].sample_id in keys and samples[0].sample_id not in keys
    assert cs.array_sha256(samples[2].spectrum.flux) in keys


# --- review --------------------------------------------------------------------------------------------------------

def write_sheet(path, rows):
    with open(path, "w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, cs.SHEET_COLUMNS, extrasaction="ignore")
        w.writeheader()
        for r in rows: w.writerow(r)


@pytest.fixture
def review_run(drafted, tmp_path):
    "A fresh copy of the draft run with its four good drafts submitted for review."
    import shutil
    run0, recs, samples = drafted
    run = tmp_path / "run"
    shutil.copytree(run0, run)
    kept, _ = cs.qc(list(recs.values()))
    sheet = cs.export_review(run, kept)
    return run, sheet, {r["sample_id"]: r for r in kept}


def sheet_rows(sheet):
    with open(sheet, newline="", encoding="utf-8") as f: return list(csv.DictReader(f))


def test_export_review_sheet_and_html(review_run):
    run, sheet, kept = review_run
    rows = sheet_rows(sheet)
    assert [c for c in rows[0]] == cs.SHEET_COLUMNS and {r["sample_id"] for r in rows} == set(kept)
    r = rows[0]
    assert (r["state"], r["revision"], r["reviewer"], r["vote"]) == ("draft", "0", "", "")
    assert r["text"].count("--- tool: Generated spectral visualization") == 1 and "<answer>" in r["text"]
    html = (run / "review.html").read_text()
    from speco3.view import read_index
    assert len(rows := read_index(run / "review.html")) == 4 and all(isinstance(r["thumb"], list) for r in rows)  # a thumbnail each
    pages = list((run / "review_files").glob("*.html"))
    assert len(pages) == 4 and sum(p.read_text().count("<img") for p in pages) == 8  # overview + zoom each
    assert set(cs.review_status(run).state) == {"draft"}


def test_review_round_trip_and_rule(review_run):
    run, sheet, kept = review_run
    rows = sheet_rows(sheet)
    a, b, c, d = rows
    edited = a["text"].replace("what decides it", "the broad profile that decides it")
    write_sheet(sheet, [
        {**a, "reviewer": "Ana Ortiz", "vote": "accept", "timestamp": "2026-05-01T10:00:00Z"},
        {**a, "reviewer": "Ben Li", "vote": "edit", "edited_text": edited, "comment": "say what is seen"},
        {**a, "revision": "1", "reviewer": "Ana Ortiz", "vote": "accept"},
        {**a, "revision": "1", "reviewer": "Cy Dube", "vote": "accept"},
        {**b, "reviewer": "Ana Ortiz", "vote": "accept"}, {**b, "reviewer": "Ben Li", "vote": "accept"},
        {**c, "reviewer": "Ana Ortiz", "vote": "accept"}, {**c, "reviewer": "Ben Li", "vote": "reject", "comment": "too thin"},
        {**d, "reviewer": "Ana Ortiz", "vote": "accept"}, {**d},  # d: one accept so far, and an unfilled row
    ])
    st = cs.import_review(run).set_index("sample_id")
    assert st.loc[a["sample_id"], "state"] == "accepted" and st.loc[a["sample_id"], "revision"] == 1
    assert st.loc[a["sample_id"], "votes"] == "Ana Ortiz: accept, Cy Dube: accept" and st.loc[a["sample_id"], "editors"] == "Ben Li"
    assert st.loc[b["sample_id"], "state"] == "accepted"
    assert st.loc[c["sample_id"], "state"] == "rejected"
    assert st.loc[d["sample_id"], "state"] == "audited"
    acc = {r["sample_id"]: r for r in cs.accepted_records(run)}
    assert set(acc) == {a["sample_id"], b["sample_id"]}
    ra = acc[a["sample_id"]]
    assert "the broad profile that decides it" in ra["turns"][-1]["text"] and ra["prediction"] == ra["truth"]
    hist = ra["review"]["history"]
    assert [(h["reviewer"], h["vote"], h["revision"]) for h in hist] == [
        ("Ana Ortiz", "accept", 0), ("Ben Li", "edit", 0), ("Ana Ortiz", "accept", 1), ("Cy Dube", "accept", 1)]
    assert hist[0]["timestamp"] == "2026-05-01T10:00:00+00:00" and hist[1]["comment"] == "say what is seen"
    # a looser rule accepts the single-accept draft; importing the same sheet again records nothing
    assert d["sample_id"] in {r["sample_id"] for r in cs.accepted_records(run, min_accept=1)}
    n = len((run / "review_state.jsonl").read_text().splitlines())
    cs.import_review(run)
    assert len((run / "review_state.jsonl").read_text().splitlines()) == n
    # the re-exported sheet shows the revised text and the states
    rows2 = {r["sample_id"]: r for r in sheet_rows(cs.export_review(run))}
    assert rows2[a["sample_id"]]["revision"] == "1" and "the broad profile" in rows2[a["sample_id"]]["text"]
    assert rows2[c["sample_id"]]["state"] == "rejected"


def test_stale_votes_do_not_count(review_run):
    run, sheet, _ = review_run
    a = sheet_rows(sheet)[0]
    edited = a["text"].replace("what decides it", "what settles it")
    write_sheet(sheet, [{**a, "reviewer": "Ben Li", "vote": "edit", "edited_text": edited},
                        {**a, "reviewer": "Ana Ortiz", "vote": "accept"}, {**a, "reviewer": "Cy Dube", "vote": "accept"}])
    st = cs.import_review(run).set_index("sample_id").loc[a["sample_id"]]
    assert (st["state"], st["revision"], st["n_accept"], st["n_stale"]) == ("revised", 1, 0, 2)


@pytest.mark.parametrize("change,col,msg", [
    (lambda r: {**r, "vote": "maybe", "reviewer": "Ana"}, "vote", "'maybe' is not one of accept, reject, edit"),
    (lambda r: {**r, "vote": "accept"}, "reviewer", "empty"),
    (lambda r: {**r, "vote": "accept", "reviewer": "Ana", "sample_id": "nope"}, "sample_id", "not a draft under review"),
    (lambda r: {**r, "vote": "accept", "reviewer": "Ana", "revision": "one"}, "revision", "not a whole number"),
    (lambda r: {**r, "vote": "accept", "reviewer": "Ana", "revision": "3"}, "revision", "does not exist"),
    (lambda r: {**r, "vote": "accept", "reviewer": "Ana", "timestamp": "yesterday"}, "timestamp", "ISO 8601"),
    (lambda r: {**r, "comment": "looks fine"}, "vote", "empty but comment is filled"),
    (lambda r: {**r, "vote": "edit", "reviewer": "Ana"}, "edited_text", "an edit needs the corrected text"),
    (lambda r: {**r, "vote": "edit", "reviewer": "Ana", "edited_text": r["text"].replace("\\boxed{YES}", "\\boxed{NO}")},
     "edited_text", "the answer is NO but the label is YES"),
    (lambda r: {**r, "vote": "edit", "reviewer": "Ana", "edited_text": re.sub(r"\[(\d+), (\d+)\]", r"[\1, 9000]", r["text"], count=1)},
     "edited_text", "changes its tool call"),
    (lambda r: {**r, "vote": "edit", "reviewer": "Ana", "edited_text": re.sub(r"(?m)^--- tool:.*$", "", r["text"])},
     "edited_text", "has 1 turn(s) but the draft has 2"),
])
def test_malformed_sheet_one_line_errors(review_run, change, col, msg):
    run, sheet, _ = review_run
    rows = sheet_rows(sheet)
    yes = next(r for r in rows if r["truth"] == "YES")
    ok = {**rows[0], "reviewer": "Ana", "vote": "accept"}
    write_sheet(sheet, [ok, change(yes)])
    with pytest.raises(cs.ReviewError) as e:
        cs.import_review(run)
    text = str(e.value)
    assert text.startswith(f"review.csv row 3, column {col}: ") and msg in text and "\n" not in text
    assert not (run / "review_state.jsonl").read_text().count('"event": "vote"')  # all or nothing


def test_sheet_missing_columns_and_several_problems(review_run):
    run, sheet, _ = review_run
    rows = sheet_rows(sheet)
    with open(sheet, "w", newline="") as f:
        w = csv.writer(f); w.writerow(["sample_id", "reviewer"]); w.writerow([rows[0]["sample_id"], "Ana"])
    with pytest.raises(cs.ReviewError, match=r"^review.csv: missing column\(s\) revision, vote"):
        cs.import_review(run)
    write_sheet(sheet, [{**rows[0], "vote": "yes", "reviewer": "Ana"}, {**rows[1], "vote": "accept"}])
    with pytest.raises(cs.ReviewError) as e:
        cs.import_review(run)
    assert len(e.value.problems) == 2 and "(and 1 more problem(s)" in str(e.value)
    assert e.value.problems[1].startswith("review.csv row 3, column reviewer")


def test_simulated_review_is_labelled(review_run):
    run, sheet, kept = review_run
    cs.simulate_review(run, p_reject=0.0)
    st = cs.import_review(run)
    assert set(st.state) == {"accepted"} and len(st) == len(kept)
    assert all(set(v.split(", ")) == {"simulated-reviewer-1: accept", "simulated-reviewer-2: accept"} for v in st.votes)


# --- exports -------------------------------------------------------------------------------------------------------

@pytest.fixture
def accepted_run(review_run):
    run, _, kept = review_run
    cs.simulate_review(run, p_reject=0.0)
    cs.import_review(run)
    return run, kept


def test_nothing_accepted_nothing_exported(review_run, tmp_path):
    run, _, _ = review_run
    with pytest.raises(ValueError, match="no accepted trajectories"):
        cs.export_sft(run, tmp_path / "sft")


@pytest.mark.parametrize("target", ["sft", "sft.parquet"])
def test_sft_export_round_trip(accepted_run, tmp_path, target):
    run, kept = accepted_run
    ds = cs.load_sft_dataset(cs.export_sft(run, tmp_path / target))
    assert len(ds) == len(kept) and {"messages", "images", "sample_id", "task", "truth"} <= set(ds.column_names)
    for ex in ds:
        rec = kept[ex["sample_id"]]
        msgs = ex["messages"]
        assert ex["images"] == []
        assert [m["role"] for m in msgs] == ["system", "user", "assistant", "tool", "assistant"]
        assert msgs[0]["content"][0]["text"] == system_text(tools=True)
        assert msgs[1]["content"][1]["text"] == rec["prompt"]
        imgs = [p["image"] for m in msgs for p in m["content"] if p["type"] == "image"]
        assert len(imgs) == 2 and imgs[0].size == rec_image_size(run, rec["overview"])
        assert imgs[1].size == rec_image_size(run, rec["turns"][0]["results"][0]["image"])
        call = msgs[2]["tool_calls"][0]["function"]
        assert call["name"] == TOOL_NAME and call["arguments"] == rec["turns"][0]["tool_calls"][0]["arguments"]
        for m in msgs:
            if m["role"] == "assistant" and m.get("tool_calls"):
                assert m["content"][0]["text"].startswith("<think>") and "<tool_call>" not in m["content"][0]["text"]
        text = render_chat(msgs)
        assert "<|im_start|>assistant\n<tool_call>" not in text and text.count("<tool_response>") == 1
        # the rendered assistant turns are the drafted texts
        assert rec["turns"][0]["text"] in text and rec["turns"][1]["text"] in text


def rec_image_size(run, ref):
    from PIL import Image
    with Image.open(run / ref["path"]) as im: return im.size


def test_sharegpt_export(accepted_run, tmp_path):
    run, kept = accepted_run
    out = cs.export_sharegpt(run, tmp_path / "lf", name="coldstart")
    info = json.loads((out / "dataset_info.json").read_text())["coldstart"]
    assert info["file_name"] == "coldstart.json" and info["formatting"] == "sharegpt"
    assert info["columns"] == {"messages": "messages", "images": "images"}
    assert info["tags"]["observation_tag"] == "tool" and info["tags"]["system_tag"] == "system"
    data = json.loads((out / "coldstart.json").read_text())
    assert len(data) == len(kept)
    for ex in data:
        roles = [m["role"] for m in ex["messages"]]
        assert roles[0] == "system" and ex["messages"][0]["content"] == system_text(tools=True)
        # LLaMA-Factory's rule: after the system message, user/observation and assistant alternate, ending with the assistant
        assert all(r in ("user", "tool") for r in roles[1::2]) and all(r == "assistant" for r in roles[2::2]) and roles[-1] == "assistant"
        assert sum(m["content"].count("<image>") for m in ex["messages"]) == len(ex["images"]) == 2
        assert all((out / p).is_file() for p in ex["images"])
        rec = kept[ex["sample_id"]]
        assert ex["messages"][2]["content"] == rec["turns"][0]["text"] and ex["messages"][1]["content"] == "<image>" + rec["prompt"]


def test_trl_collator_trains_only_assistant_turns(accepted_run, tmp_path):
    pytest.importorskip("trl")
    from trl.trainer.sft_trainer import DataCollatorForVisionLanguageModeling
    from speco3.tiny import tiny_processor
    run, kept = accepted_run
    ds = cs.load_sft_dataset(cs.export_sft(run, tmp_path / "sft"))
    proc = tiny_processor()
    batch = DataCollatorForVisionLanguageModeling(proc, assistant_only_loss=True)([ds[0], ds[1]])
    tok = proc.tokenizer
    pad = tok.convert_tokens_to_ids("<|image_pad|>")
    assert int((batch["input_ids"] == pad).sum()) == int(batch["image_grid_thw"].prod(-1).sum()) // 4  # 4 images, merge 2x2
    assert batch["image_grid_thw"].shape[0] == 4
    for i in range(2):
        trained = tok.decode(batch["input_ids"][i][batch["labels"][i] != -100])
        rec = kept[ds[i]["sample_id"]]
        assert "<tool_call>" in trained and "\\boxed{" in trained and "<think>" in trained
        assert "Generated spectral visualization" not in trained and "Answer YES or NO" not in trained
        assert "<|image_pad|>" not in trained


# --- the LLM drafter against a fake server ------------------------------------------------------------------------

class FakeLLM:
    "An OpenAI-style server that drafts like an obedient LLM: zooms where told, answers the label it was given."

    def __init__(self):
        self.requests, fake = [], self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                fake.requests.append(body)
                msgs = body["messages"]
                label = re.search(r"verified answer for this spectrum is (YES|NO)", msgs[0]["content"])
                zoomed = any("<tool_response>" in json.dumps(m["content"]) for m in msgs[2:])
                if label is None: text = "I cannot tell."
                elif not zoomed:
                    text = f"<think>The overview needs a closer look; zoom into H-beta at 4800-4920 Å.</think>\n{call(4800, 4920, 'H-beta')}"
                else: text = f"<think>Around 4861 Å the profile decides it.</think>\n<answer>\\boxed{{{label.group(1)}}}</answer>"
                data = json.dumps({"choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
                                   "usage": {"prompt_tokens": 10, "completion_tokens": 5}}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json"); self.send_header("Content-Length", str(len(data)))
                self.end_headers(); self.wfile.write(data)

            def log_message(self, *a): pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_port}/v1"

    def close(self): self.server.shutdown(); self.server.server_close()


@contextmanager
def fake_llm():
    f = FakeLLM()
    try: yield f
    finally: f.close()


def test_llm_drafter_against_fake_server(drafted, tmp_path):
    _, recs, samples = drafted
    experts = [recs[s.sample_id] for s in samples]
    wd = [s for s in samples if s.task == "wd"]
    with fake_llm() as fake:
        llm = OpenAIPolicy(model="fake-llm", base_url=fake.url, api_key="", backoff=0.01, timeout=5)
        out = cs.draft(wd, tmp_path / "llm", drafter=llm, examples=experts, k=2, style="fast")
    assert [(r["prediction"], r["truth"]) for r in out] == [("YES", "YES"), ("NO", "NO")]
    pol = out[0]["policy"]
    assert pol["name"] == "guided-drafter" and pol["drafter"]["model"] == "fake-llm" and pol["k"] == 2
    assert pol["examples"] == [r["sample_id"] for r in experts] and out[0]["drafter"] == "guided-drafter"
    assert len(fake.requests) == 4
    # requests arrive concurrently, in any order: each episode's system text carries its own label
    systems = [r["messages"][0]["content"] for r in fake.requests]
    assert all(t.startswith(system_text(tools=True)) for t in systems)
    assert sum("answer for this spectrum is YES: it is a white dwarf" in t for t in systems) == 2
    assert sum("answer for this spectrum is NO: it is not a white dwarf" in t for t in systems) == 2
    for sys0 in systems:
        shown = re.findall(r"Example: is it a ([a-z ]+)\?", sys0)
        assert shown == ["white dwarf", "white dwarf"]  # the same task's examples first
        assert experts[2]["turns"][0]["text"].strip() in sys0
    # the drafting block reaches the drafter only: the stored prompt is the plain vetting question
    assert all("verified answer" not in r["prompt"] and "Example:" not in r["prompt"] for r in out)
    kept, _ = cs.qc(out)
    assert len(kept) == 2


def test_guided_drafter_refuses_unlabelled_episodes(samples):
    from speco3.policy import Episode
    inner = ReplayPolicy(["<think>x</think><answer>\\boxed{YES}</answer>"])
    gd = cs.GuidedDrafter(inner)
    eps = [Episode("a", "cv", [{"role": "system", "content": "S"}, {"role": "user", "content": "Q"}], samples[0].spectrum),
           Episode("b", "cv", [{"role": "system", "content": "S"}, {"role": "user", "content": "Q"}], samples[0].spectrum, truth="YES")]
    out = gd.act(eps)
    assert isinstance(out[0], ValueError) and "needs the label" in str(out[0]) and out[1].startswith("<think>")


def test_sharegpt_reads_back_as_the_trl_export(accepted_run, tmp_path):
    pytest.importorskip("datasets")
    run, kept = accepted_run
    trl = cs.load_sft_dataset(cs.export_sft(run, tmp_path / "trl")).with_format(None)
    lf = cs.load_sft_dataset(cs.export_sharegpt(run, tmp_path / "lf")).with_format(None)
    assert len(trl) == len(lf) == len(kept)
    for a, b in zip(trl, lf):
        assert json.loads(a["messages"]) == json.loads(b["messages"]) and a["sample_id"] == b["sample_id"]
        assert [i.tobytes() for i in a["images"]] == [i.tobytes() for i in b["images"]]
    row = cs.load_sft_dataset(tmp_path / "lf" / "speco3_coldstart.json")[0]  # the data file alone, tags from its dataset_info
    assert row["messages"][2]["tool_calls"] and row["images"] == []


def test_sharegpt_bad_rows_name_file_and_row(tmp_path):
    pytest.importorskip("datasets")
    from PIL import Image
    Image.new("RGB", (2, 2)).save(tmp_path / "a.png")
    good = {"conversations": [{"from": "human", "value": "<image>q"}, {"from": "gpt", "value": "a"}], "images": ["a.png"]}
    cases = {"missing key 'value'": {"conversations": [{"from": "human"}], "images": []},
             "unknown tag 'bot'": {"conversations": [{"from": "bot", "value": "a"}], "images": []},
             "2 images for 1 <image> placeholders": dict(good, images=["a.png", "a.png"]),
             "no 'conversations'": {"images": []}}
    for msg, bad in cases.items():
        (tmp_path / "d.jsonl").write_text(json.dumps(good) + "\n" + json.dumps(bad) + "\n")
        with pytest.raises(ValueError, match=f"d.jsonl row 1.*{re.escape(msg)}"): cs.load_sft_dataset(tmp_path / "d.jsonl")
