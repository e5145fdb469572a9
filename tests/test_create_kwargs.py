"""Fuzzing the tool's input (issue 44, item 6): malformed `create_kwargs` — wrong types, lengths, NaN, nesting, bad
redshifts — always give one-line `SpectrumError`s that say which key is wrong, never a raw TypeError/ValueError;
well-formed variants (lists, tuples, arrays, ints) still build a tool."""
import math
import numpy as np
import pytest
from speco3.spectrum import SpectrumError
from speco3.tool import SpectralVisualizationTool

N = 40
WAVE = np.linspace(4000, 7000, N).tolist()
FLUX = (1 + 0.1 * np.sin(np.arange(N))).tolist()
GOOD = {"wavelength": WAVE, "flux": FLUX, "redshift": 0.1}

NOT_A_LIST = ["abc", b"abc", {"a": 1}, {1, 2}, 3, 3.5, True, None, np.float64(2.0), object()]
NOT_A_NUMBER = [None, "x", "4000", b"1", {"a": 1}, [1.0], 1j, object(), True]
NOT_A_REDSHIFT = ["0.1", b"0.1", [0.1], {"z": 0.1}, True, float("nan"), float("inf"), -1, -5.0, 1j, object()]


def malformed(rng):
    "One malformed create_kwargs, drawn at random, and the key its error should name (None: any)."
    ck = {k: list(v) if isinstance(v, list) else v for k, v in GOOD.items()}
    kind = rng.integers(12)
    key = ["wavelength", "flux"][rng.integers(2)]
    i = int(rng.integers(N))
    if kind == 0: ck[key] = NOT_A_LIST[rng.integers(len(NOT_A_LIST))]
    elif kind == 1: ck[key][i] = NOT_A_NUMBER[rng.integers(len(NOT_A_NUMBER))]
    elif kind == 2: ck[key] = ck[key][: int(rng.integers(1, N))]; key = None           # lengths differ
    elif kind == 3: ck[key] = [ck[key][: N // 2], ck[key][N // 2:]]                      # nested
    elif kind == 4: ck["wavelength"][i] = [math.nan, math.inf, -math.inf][rng.integers(3)]; key = "wavelength"
    elif kind == 5:                                                                      # unsorted or repeated
        j = (i + 1) % N; ck["wavelength"][i], ck["wavelength"][j] = ck["wavelength"][j], ck["wavelength"][i]; key = None
    elif kind == 6: ck["wavelength"][0] = -float(rng.integers(0, 100)); key = "wavelength"
    elif kind == 7: ck["flux"] = [math.nan] * N; key = None                              # nothing usable
    elif kind == 8: ck["redshift"] = NOT_A_REDSHIFT[rng.integers(len(NOT_A_REDSHIFT))]; key = "redshift"
    elif kind == 9:
        key = ["mask", "ivar"][rng.integers(2)]
        ck[key] = [[2] * N, ["x"] * N, [None] * N, [1] * (N - 1), "abc", 7, [-1] * N][rng.integers(7)]
        if key == "ivar" and ck[key] in ([2] * N, [-1] * N): ck[key] = [1] * (N + 1)   # those are valid ivars
    elif kind == 10: ck = [None, [], "ck", 3, [("wavelength", WAVE)]][rng.integers(5)]; key = None
    else: ck.pop(key); ck["meta"] = "x" if rng.integers(2) else ck.get("meta"); key = None
    return ck, key


def test_fuzz_malformed_create_kwargs():
    rng = np.random.default_rng(44)
    seen = set()
    for n in range(400):
        ck, key = malformed(rng)
        with pytest.raises(SpectrumError) as e:
            SpectralVisualizationTool.from_create_kwargs(ck)
        msg = str(e.value)
        assert "\n" not in msg and msg.startswith("create_kwargs"), (ck, msg)
        if key: assert key in msg, (key, msg)
        seen.add(msg.split(":")[1][:25])
    assert len(seen) >= 10   # the draws reach many different checks, not one


@pytest.mark.parametrize("meta", ["x", [1], 3])
def test_meta_must_be_a_dict(meta):
    with pytest.raises(SpectrumError, match="meta must be a dict"):
        SpectralVisualizationTool.from_create_kwargs({**GOOD, "meta": meta})


@pytest.mark.parametrize("change", [
    {}, {"redshift": None}, {"redshift": 0}, {"redshift": np.float32(0.2)}, {"wavelength": tuple(WAVE)},
    {"wavelength": np.array(WAVE)}, {"flux": [int(x * 10) for x in FLUX]}, {"flux": np.array(FLUX, "f4")},
    {"mask": [0] * N}, {"mask": [False] * (N - 1) + [True]}, {"ivar": [1] * N}, {"ivar": None},
    {"title": "kept in meta"}, {"flux": FLUX[:-1] + [math.nan]},
])
def test_well_formed_variants_still_work(change):
    tool = SpectralVisualizationTool.from_create_kwargs({**GOOD, **change})
    assert len(tool.spectrum) == N and tool.execute([4000, 5000]).ok
