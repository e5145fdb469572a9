"""The reasoning audit on odd input: records without text, malformed tool calls, spectra that do not cover a feature."""
import numpy as np
import pytest
from speco3.spectrum import Spectrum
from speco3.audit import audit, claims, claim_precision, evidence

W = np.geomspace(3700, 9100, 3909)
FLAT = Spectrum(W, np.ones_like(W))


def test_records_without_text_or_with_broken_calls():
    assert audit({"sample_id": "a"}, FLAT) == []
    assert audit({"sample_id": "a", "turns": None, "text": None}, FLAT) == []
    rec = {"sample_id": "a", "turns": [{"text": "Hα is in emission.", "tool_calls": [{"arguments": {"wavelength_range": "6500-6600"}},
                                                                                     {"arguments": None}, "not a call"]}]}
    rows = audit(rec, FLAT)
    assert [(r["verdict"], r["zoomed"]) for r in rows] == [("contradicted", False)]   # a flat spectrum has no line
    with pytest.raises(ValueError, match="needs a trajectory record"): audit(["Hα is in emission."], FLAT)


def test_a_feature_outside_the_data_is_undetermined():
    blue = Spectrum(np.linspace(3700, 6000, 2000), np.ones(2000))        # no Hα, no TiO
    facts = evidence(blue)
    assert facts[("Ha", "emission")] is None and facts[("TiO", "present")] is None
    assert [r["verdict"] for r in audit({"sample_id": "b", "text": "Strong TiO. Hα is in emission."}, blue)] == ["undetermined"] * 2


def test_text_of_any_kind():
    assert claims("") == [] and claims(None) == []
    assert claims("HALPHA EMISSION!!!") == []                              # not a name the reader knows: no guess
    assert claim_precision([{"sample_id": "a", "verdict": "undetermined"}])["claims"] == 1
