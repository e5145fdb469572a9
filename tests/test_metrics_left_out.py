"""Every metrics file states the rows it left out and why (issue 44, item 6): `speco3 vet` on a table whose unreadable
rows carry no truth writes them into metrics.json by reason, instead of a smaller n that hides them."""
import json
import numpy as np
import pandas as pd
from speco3.cli import main
from speco3.io import to_specvi_row
from speco3.metrics import evaluate, predictions_frame, split_scored
from speco3.spectrum import Spectrum, lamost_wavelength


def rows():
    w = lamost_wavelength()
    out = []
    for i in range(5):
        s = Spectrum(w, 1 + 0.01 * np.sin(w / 50 + i), meta={"id": f"star{i}"})
        r = to_specvi_row(s, "wd", "NO", index=i, prompt="Is this a white dwarf? <image>")
        if i >= 3:   # unreadable: the flux lost pixels on the way
            r["extra_info"]["tools_kwargs"]["spectral_visualization_tool"]["create_kwargs"]["flux"] = [1.0] * 10
        out.append(r)
    return out


def test_vet_metrics_state_the_rows_left_out(tmp_path, capsys):
    table = tmp_path / "test_wd.parquet"
    pd.DataFrame(rows()).to_parquet(table)
    run = tmp_path / "run"
    main(["vet", str(table), "--task", "wd", "--out", str(run), "--policy", "scripted", "--style", "fast", "--quiet"])
    m = json.loads((run / "metrics.json").read_text())
    assert m["summary"]["n"] == 3
    assert m["left_out"]["n"] == 2 and m["left_out"]["by_reason"] == {"unreadable input": 2}
    assert sorted(r["sample_id"] for r in m["left_out"]["rows"]) == ["star3", "star4"]
    assert all("length mismatch" in r["error"] for r in m["left_out"]["rows"])


def test_split_scored_reasons():
    recs = [{"sample_id": "a", "task": "cv", "truth": "YES", "prediction": "NO"},
            {"sample_id": "b", "task": "cv", "status": "read_error", "error": "SpectrumError: b: bad\nsecond line"},
            {"sample_id": "c", "task": "cv", "status": "policy_error", "error": "RemoteError: timeout"},
            {"sample_id": "d", "truth": "NO"}, {"sample_id": "e", "task": "cv", "truth": "maybe"},
            {"sample_id": "f", "task": "gm", "ground_truth": "NO", "prediction": "NO"}]
    keep, left = split_scored(recs)
    assert [r["sample_id"] for r in keep] == ["a", "f"]
    assert left["by_reason"] == {"unreadable input": 1, "policy failed": 1, "no task": 1, "no YES/NO truth": 1}
    assert left["rows"][0]["error"] == "SpectrumError: b: bad second line"   # one line
    ev = evaluate(predictions_frame(keep), tasks=["cv"], n_boot=0, left_out=left)
    assert ev.left_out["n"] == 5 and ev.left_out["by_reason"]["task not evaluated"] == 1
    assert ev.to_dict()["left_out"] == ev.left_out
    none = evaluate(predictions_frame(keep), n_boot=0)
    assert none.left_out == {"n": 0, "by_reason": {}, "rows": []}   # nothing left out is said, too
