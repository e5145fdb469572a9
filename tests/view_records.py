"""Hand-made run folders for the report tests and `bench/report.py`: records of every outcome, tiny PNGs, no policy."""
import io, json
from pathlib import Path
from PIL import Image

from speco3.tasks import PAPER_TASKS
KINDS = ("NO", "NO", "NO", "YES", "cannot_judge", "no_answer", "read_error")  # most candidates are NOs, as in a survey


def _png(colour):
    buf = io.BytesIO(); Image.new("RGB", (60, 20), colour).save(buf, format="PNG"); return buf.getvalue()


def record(i, kind, task):
    "Record i of `kind` (YES, NO, cannot_judge, no_answer, read_error) for `task`, with image paths under images/s<i>/."
    rec = dict(sample_id=f"s{i:05d}", task=task, policy={"name": "fake"}, status="answered", prediction=None,
               truth="YES" if i % 2 else "NO", turns=[], n_tool_calls=0)
    if kind in ("YES", "NO", "no_answer"):
        call = {"name": "spectral_visualization_tool", "arguments": {"wavelength_range": [6480, 6650], "label": "Hα 6563 Å"}}
        rec.update(prediction=kind if kind != "no_answer" else None, status="answered" if kind != "no_answer" else "no_answer",
                   n_tool_calls=1, overview={"path": f"images/s{i:05d}/overview.png"},
                   turns=[{"text": "<think>zoom</think>", "tool_calls": [call],
                           "results": [{"text": "zoomed", "ok": True, "window": [6480.0, 6650.0],
                                        "image": {"path": f"images/s{i:05d}/turn0_call0.png"}}]},
                          {"text": f"<answer>\\boxed{{{kind}}}</answer>", "tool_calls": [], "results": []}])
    elif kind == "cannot_judge":
        rec.update(status="cannot_judge", cannot_judge=[f"S/N {i % 5}.1 is below the floor of 5 for the {task} question"])
    else: rec.update(status="read_error", error=f"OSError: s{i:05d}.fits: no such file", truth=None)
    return rec


def fake_run(folder, n):
    "A run folder of `n` records cycling through KINDS and PAPER_TASKS; returns the records."
    folder = Path(folder)
    pngs = [_png(c) for c in ("white", "lightblue")]
    recs = [record(i, KINDS[i % len(KINDS)], PAPER_TASKS[i % len(PAPER_TASKS)]) for i in range(n)]
    for r in recs:
        refs = [r.get("overview")] + [x["image"] for t in r["turns"] for x in t["results"]]
        for k, ref in enumerate(x for x in refs if x):
            p = folder / ref["path"]; p.parent.mkdir(parents=True, exist_ok=True); p.write_bytes(pngs[k % 2])
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "trajectories.jsonl").write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in recs), encoding="utf-8")
    return recs
