"""The one-pass C kernels (runtime/passes) against numpy's passes, which they replace where they can."""

from __future__ import annotations

import math
import os

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from graph_dap.runtime import passes
from graph_dap.runtime.tensor import TensorSummary, summarize
from graph_dap.runtime.tools.metrics import ArrayComparison, Tolerance, compare_arrays
from graph_dap.runtime.tools.quant.errors import measure
from graph_dap.runtime.tools.quant.params import QuantParams

native = pytest.mark.skipif(not passes.available(), reason="the C kernels are not built")

SIZES = [0, 1, 15, 16, 17, 4095, 4097, 70_001, passes.SPLIT_FROM + 37]


def test_the_kernels_are_built() -> None:
    """The install compiles them (setup.py); a silent fallback to numpy would make compare slower unnoticed."""
    if os.environ.get(passes.DISABLE_ENV, "") not in ("", "0"):
        pytest.skip(f"{passes.DISABLE_ENV} is set")
    assert passes.available()


@native
@pytest.mark.parametrize("n", SIZES)
def test_diff_sums_are_numpys(n: int) -> None:
    rng = np.random.default_rng(n)
    b = rng.standard_normal(n).astype(np.float32) * 3
    a = (b + rng.standard_normal(n).astype(np.float32) * 0.01).astype(np.float32)
    s = passes.diff_sums(a, b)
    assert s is not None and s.size == n
    d = a.astype(np.float64) - b.astype(np.float64)
    np.testing.assert_allclose(s.noise, d @ d, rtol=1e-5)
    np.testing.assert_allclose(s.signal, b.astype(np.float64) @ b, rtol=1e-5)
    np.testing.assert_allclose(s.cross, d @ b, rtol=1e-3, atol=1e-6 * math.sqrt(max(d @ d, 1e-30) * (b.astype(np.float64) @ b)))
    if n:
        diff = a - b  # float32, as the kernel takes it
        assert s.high == float(diff.max()) and s.low == float(diff.min())


@native
def test_diff_sums_take_what_they_can() -> None:
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    b = np.zeros((4, 3), np.float32)
    assert passes.diff_sums(a.T, b) is not None  # not contiguous: copied
    assert passes.diff_sums(a.astype(np.float64), b) is None
    assert passes.diff_sums(a, np.zeros(5, np.float32)) is None
    s = passes.diff_sums(np.array([1.0, np.nan], np.float32), np.zeros(2, np.float32))
    assert s is not None and math.isnan(s.noise)  # non-finite: the caller measures another way


def _params(dtype: str, scale: float, zp: int) -> QuantParams:
    return QuantParams.make(np.float32(scale), np.array(zp, dtype=dtype))


CASES = [("uint8", 0.02, 128), ("int8", 0.013, 0), ("int8", 0.05, -3), ("uint16", 0.0007, 30000), ("int16", 0.001, 0)]


@native
@pytest.mark.parametrize("dtype,scale,zp", CASES)
@pytest.mark.parametrize("n", [0, 1, 33, 4097, passes.SPLIT_FROM + 5])
def test_round_trip_is_numpys_bit_for_bit(dtype: str, scale: float, zp: int, n: int) -> None:
    rng = np.random.default_rng(n + abs(zp))
    p = _params(dtype, scale, zp)
    lo, hi = p.qrange
    span = (hi - lo) * scale
    x = (rng.uniform(-0.7, 0.7, n) * span).astype(np.float32)  # some beyond the range: clipped
    if n > 8:  # ties (half a step: to even), -0.3 of a step (rint gives -0.0), infinities
        x[:6] = np.array([0.5, 1.5, -2.5, -0.3, np.inf, -np.inf], np.float32) * np.float32(scale)
    for integers in (False, True):
        want = p._round_trip(x, integers)
        ints, trip, clipped, sums = p.measured_round_trip(x, integers)
        assert sums is not None
        assert clipped == want[2]
        np.testing.assert_array_equal(trip, want[1])
        assert np.array_equal(np.signbit(trip), np.signbit(want[1]))  # -0.0 where numpy's has it
        if integers:
            assert ints is not None and want[0] is not None and ints.dtype == want[0].dtype
            np.testing.assert_array_equal(ints, want[0])
        else:
            assert ints is None
        finite = np.isfinite(x)
        if finite.all() and n:
            d = trip.astype(np.float64) - x
            np.testing.assert_allclose(sums.noise, d @ d, rtol=1e-5)
            assert sums.high == float((trip - x).max()) and sums.low == float((trip - x).min())


@native
def test_round_trip_leaves_nan_and_other_types_to_numpy() -> None:
    p = _params("uint8", 0.1, 10)
    x = np.array([0.3, np.nan, 2.0], np.float32)  # NaN has no integer: numpy's way writes the one onnxruntime does
    assert passes.round_trip(x, 0.1, 10.0, -10.0, 245.0, "uint8") is None
    with np.errstate(invalid="ignore"):
        ints, trip, clipped, sums = p.measured_round_trip(x, integers=True)
    assert sums is None and ints is not None
    with np.errstate(invalid="ignore"):
        np.testing.assert_array_equal(ints, p._round_trip(x, True)[0])
    assert passes.round_trip(np.zeros(3, np.float64), 0.1, 0.0, 0.0, 255.0, None) is None
    assert passes.round_trip(np.zeros(3, np.float32), 0.1, 0.0, -8.0, 7.0, "int4") is None
    assert passes.round_trip(np.zeros(3, np.float32), 0.1, 0.0, -(2.0**31), 2.0**31 - 1, "int32") is None  # its range is not float32's


@native
@settings(max_examples=60, deadline=None)
@given(
    x=hnp.arrays(np.float32, st.integers(0, 300), elements=st.floats(-1e4, 1e4, width=32)),
    scale=st.floats(2.0**-13, 8.0, width=32),
    case=st.sampled_from(CASES),
)
def test_round_trip_property(x: np.ndarray, scale: float, case: tuple[str, float, int]) -> None:
    dtype, _, zp = case
    p = _params(dtype, scale, zp)
    for integers in (False, True):
        want = p._round_trip(x, integers)
        ints, trip, clipped, _ = p.measured_round_trip(x, integers)
        assert clipped == want[2]
        np.testing.assert_array_equal(trip, want[1])
        if integers:
            np.testing.assert_array_equal(ints, want[0])


@native
@pytest.mark.parametrize("per_tensor", [True, False])
def test_measure_is_the_same_either_way(monkeypatch: pytest.MonkeyPatch, per_tensor: bool) -> None:
    rng = np.random.default_rng(5)
    ref = rng.standard_normal((2, 8, 30, 30)).astype(np.float32)
    value = (ref + rng.standard_normal(ref.shape).astype(np.float32) * 0.05).astype(np.float32)
    params = _params("int8", 0.03, 0) if per_tensor else QuantParams.make(np.full(8, 0.03, np.float32), np.zeros(8, np.int8), axis=1)
    fast = measure(value, ref, params)
    monkeypatch.setattr(passes, "_lib", None)
    slow = measure(value, ref, params)
    assert fast.size == slow.size and fast.max_abs == slow.max_abs and fast.steps == pytest.approx(slow.steps, rel=1e-6)
    for k in ("snr", "mse", "cosine", "signal", "noise"):
        assert getattr(fast, k) == pytest.approx(getattr(slow, k), rel=1e-5), k
    bad = value.copy()
    bad[0, 0, 0, 0] = np.inf
    assert math.isinf(measure(bad, ref, params).max_abs)  # as numpy's way says it


@native
@pytest.mark.parametrize("kind", ["qdq", "qoperator"])
def test_compare_is_the_same_either_way(tmp_path, monkeypatch: pytest.MonkeyPatch, kind: str) -> None:
    """Every group's three errors and its clipping, with the C kernels and with numpy's passes alone."""
    from quant_models import cnn, quantize, samples

    from graph_dap.runtime.tools.quant.analysis import compare_quantized

    f = cnn(tmp_path / "float.onnx")
    q = quantize(f, tmp_path / f"{kind}.onnx", kind)
    x = samples(1)[0]
    fast = compare_quantized(q, f, x)
    monkeypatch.setattr(passes, "_lib", None)
    slow = compare_quantized(q, f, x)
    assert len(fast.groups) == len(slow.groups) >= 5
    for a, b in zip(fast.groups, slow.groups):
        assert a.group.name == b.group.name and a.clipped == b.clipped
        for which in ("accumulated", "local", "quant_only"):
            ea, eb = getattr(a, which), getattr(b, which)
            assert (ea is None) == (eb is None), which
            if ea is not None:
                assert ea.snr == pytest.approx(eb.snr, abs=1e-4), (a.group.name, which)
                assert ea.max_abs == eb.max_abs and ea.steps == pytest.approx(eb.steps, rel=1e-6), (a.group.name, which)


def _compare_both_ways(monkeypatch: pytest.MonkeyPatch, a: np.ndarray, b: np.ndarray, tol: Tolerance) -> tuple[ArrayComparison, ArrayComparison]:
    fast = compare_arrays(a, b, tol)
    with monkeypatch.context() as m:
        m.setattr(passes, "_lib", None)
        slow = compare_arrays(a, b, tol)
    return fast, slow


@native
@pytest.mark.parametrize("n", [1, 7, 9, 4097, passes.SPLIT_FROM + 11])
def test_compare_arrays_is_the_same_either_way(monkeypatch: pytest.MonkeyPatch, n: int) -> None:
    rng = np.random.default_rng(n)
    b = rng.standard_normal(n).astype(np.float32)
    a = (b + rng.standard_normal(n).astype(np.float32) * 1e-4).astype(np.float32)
    b[:: max(n // 5, 1)] = 0.0  # |a-b|/|b| infinite where the reference is 0 and the run is not
    a[:: max(n // 7, 1)] = b[:: max(n // 7, 1)]  # and 0 where they are equal
    for tol in (Tolerance(), Tolerance(1e-4, 0.0), Tolerance(0.0, 0.0), Tolerance.make(fail_if=["snr<60"])):
        assert passes.compare(a, b, tol.atol, tol.rtol) is not None
        fast, slow = _compare_both_ways(monkeypatch, a, b, tol)
        assert (fast.passed, fast.mismatches, fast.size, fast.note) == (slow.passed, slow.mismatches, slow.size, slow.note)
        assert fast.metrics["max_abs"] == slow.metrics["max_abs"] and fast.metrics["max_rel"] == slow.metrics["max_rel"]
        for k in ("mse", "cosine", "snr"):
            assert fast.metrics[k] == pytest.approx(slow.metrics[k], rel=1e-9, abs=1e-12), k


@native
def test_compare_arrays_counts_the_tolerance_as_numpy_does_at_its_edge(monkeypatch: pytest.MonkeyPatch) -> None:
    b = np.array([1.0, 2.0, -4.0, 0.0, 1e-3], np.float32)
    a = b + np.array([1e-5, 2e-4, -4e-4, 1e-5, 0.0], np.float32)  # about atol + rtol |b|, rounded as float32 left it
    for atol, rtol in ((1e-5, 1e-4), (0.0, 1e-4), (1e-5, 0.0)):
        fast, slow = _compare_both_ways(monkeypatch, a.astype(np.float32), b, Tolerance(atol, rtol))
        assert fast.mismatches == slow.mismatches and fast.passed == slow.passed


@native
def test_compare_arrays_leaves_what_it_cannot_take_to_numpy(monkeypatch: pytest.MonkeyPatch) -> None:
    b = np.linspace(-1, 1, 50, dtype=np.float32)
    for a in (b.copy(), b.astype(np.float64), b.astype(np.float16)):
        a = a.copy()
        a.flat[3] = np.nan
        a.flat[5] = np.inf
        fast, slow = _compare_both_ways(monkeypatch, a, b if a.dtype == np.float32 else b.astype(a.dtype), Tolerance())
        assert (fast.passed, fast.mismatches) == (slow.passed, slow.mismatches)
        assert str(fast.metrics) == str(slow.metrics)  # NaN cosine, -inf SNR: one side non-finite
    assert passes.compare(b.astype(np.float64), b.astype(np.float64), 0.0, 0.0) is None
    nan = b.copy()
    nan[0] = np.nan
    assert passes.compare(nan, b, 0.0, 0.0) is None


@native
def test_compare_arrays_takes_float16_in_one_pass_as_numpy_does(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(16)
    ref = rng.standard_normal(5000).astype(np.float32)
    run = ref.astype(np.float16)  # a model converted to float16 against its float original
    taken = []
    real = passes.compare
    monkeypatch.setattr(passes, "compare", lambda *args: taken.append(real(*args)) or taken[-1])
    for a, b in ((run, ref), (run, ref.astype(np.float16)), (ref, run)):
        before = len(taken)
        fast, slow = _compare_both_ways(monkeypatch, a, b, Tolerance())
        assert taken[before] is not None  # the one pass took it (numpy's passes took the second call)
        assert (fast.passed, fast.mismatches, fast.note) == (slow.passed, slow.mismatches, slow.note)
        assert fast.metrics["max_abs"] == slow.metrics["max_abs"] and fast.metrics["max_rel"] == slow.metrics["max_rel"]
        assert fast.metrics["snr"] == pytest.approx(slow.metrics["snr"], rel=1e-9)


def _summaries_both_ways(monkeypatch: pytest.MonkeyPatch, a: np.ndarray) -> tuple[TensorSummary, TensorSummary]:
    fast = summarize(a)
    with monkeypatch.context() as m:
        m.setattr(passes, "_lib", None)
        slow = summarize(a)
    return fast, slow


@native
@pytest.mark.parametrize("n", [1, 9, 4096, 4097, 70_001, passes.SPLIT_FROM + 3])
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_a_summary_is_the_same_either_way(monkeypatch: pytest.MonkeyPatch, n: int, dtype: type) -> None:
    rng = np.random.default_rng(n)
    a = (rng.standard_normal(n) * 3 + 1000 * (n % 2)).astype(dtype)  # odd sizes: a mean far from 0 beside a small spread
    if n > 20:
        a[[2, 5, 11]] = [np.nan, np.inf, -np.inf]
        a[[3, 4]] = [0.0, -0.0]
    assert passes.summary(a.astype(np.float32)) is not None
    fast, slow = _summaries_both_ways(monkeypatch, a)
    assert (fast.nan, fast.posinf, fast.neginf, fast.zeros, fast.min, fast.max) == (slow.nan, slow.posinf, slow.neginf, slow.zeros, slow.min, slow.max)
    assert fast.mean == pytest.approx(slow.mean, rel=1e-12, abs=1e-12) and fast.std == pytest.approx(slow.std, rel=1e-9)
    assert fast.text() == slow.text()
    want = a[np.isfinite(a)].astype(np.float64)
    assert fast.mean == pytest.approx(want.mean(), rel=1e-12) and fast.std == pytest.approx(want.std(), rel=1e-9)


@native
def test_a_summary_of_no_finite_value_or_one_value_is_the_same_either_way(monkeypatch: pytest.MonkeyPatch) -> None:
    for a in (np.full(10, np.nan, np.float32), np.array([np.inf, -np.inf], np.float32), np.full(5000, 2.5, np.float32), np.zeros(0, np.float32), np.float32(7.0)):
        fast, slow = _summaries_both_ways(monkeypatch, np.asarray(a))
        assert fast == slow
