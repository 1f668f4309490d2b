"""A tensor's quantization: scale, zero point, axis or block, and the integer type; quantizing and dequantizing with it.

The arithmetic is ONNX's QuantizeLinear/DequantizeLinear: ``q = saturate(round_half_even(x / scale) + zp)``
and ``x' = (q - zp) * scale``, per tensor, per channel along ``axis``, or per block of ``block_size``
elements along ``axis``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from graph_dap.runtime import dtypes, passes

__all__ = ["CHUNK", "CHUNKED_FROM", "QuantParams"]

#: Elements a pass takes at a time (a round trip here, a value against its reference in :func:`.errors.measure`): a
#: chunk of each operand and of the result stay in a core's cache, so each value is read from memory once, not once
#: per pass. Only values of ``CHUNKED_FROM`` elements or more go so: a smaller one stays in the last-level cache
#: anyway, and the calls per chunk cost more than they save (measured on measure: 3.3M elements 6.7 -> 3.8 ms, 1.6M
#: 2.4 -> 1.8 ms, 0.4M 0.30 -> 0.45 ms).
CHUNK = 1 << 16
CHUNKED_FROM = 1 << 20
_NUMPY_INTS = frozenset({"uint8", "int8", "uint16", "int16", "int32"})  # the types numpy writes itself (not int4)


@dataclass(frozen=True, slots=True, eq=False)
class QuantParams:
    """How one tensor is quantized. ``scale`` and ``zero_point`` are per tensor (size 1), per channel along
    ``axis`` (1-D) or per block of ``block_size`` along ``axis`` (the tensor's rank)."""

    scale: np.ndarray
    zero_point: np.ndarray
    dtype: str  # the integer type: uint8, int8, uint16, int16, int4, uint4, int32
    axis: int | None = None
    block_size: int = 0

    @classmethod
    def make(cls, scale: Any, zero_point: Any | None, axis: int | None = None, block_size: int = 0, dtype: str | None = None) -> QuantParams:
        """From a DequantizeLinear's inputs: no zero point means uint8 with zero point 0 (ONNX's default)."""
        s = np.asarray(scale, dtype=np.float32)
        if zero_point is None:
            kind = dtype or "uint8"
            zp = np.zeros(s.shape, dtypes.dtype_of(kind))
        else:
            zp = np.asarray(zero_point)
            kind = dtype or str(zp.dtype)
        per_tensor = s.size == 1 and block_size == 0
        return cls(s.reshape(()) if per_tensor else s, zp.reshape(()) if per_tensor else zp, kind, None if per_tensor else axis, block_size)

    @property
    def per_tensor(self) -> bool:
        return self.axis is None

    @property
    def qrange(self) -> tuple[int, int]:
        """The smallest and largest integer of the type."""
        if self.dtype == "int4":
            return -8, 7
        if self.dtype == "uint4":
            return 0, 15
        info = np.iinfo(np.dtype(self.dtype))
        return int(info.min), int(info.max)

    def describe(self) -> str:
        """``scale 0.0123 zp 128 (uint8)``, ``per channel (axis 0, 16): scale 0.001..0.02``, or per block."""
        if self.per_tensor:
            return f"scale {float(self.scale):.4g} zp {int(self.zero_point)} ({self.dtype})"
        how = f"per block of {self.block_size} (axis {self.axis})" if self.block_size else f"per channel (axis {self.axis}, {self.scale.size})"
        return f"{how}: scale {float(self.scale.min()):.3g}..{float(self.scale.max()):.3g} ({self.dtype})"

    def to_dict(self) -> dict[str, Any]:
        if self.per_tensor:
            return {"scale": float(self.scale), "zero_point": int(self.zero_point), "dtype": self.dtype}
        return {
            "axis": self.axis,
            "block_size": self.block_size,
            "channels": int(self.scale.size),
            "scale_min": float(self.scale.min()),
            "scale_max": float(self.scale.max()),
            "dtype": self.dtype,
        }

    # -- broadcasting ---------------------------------------------------------------

    def _expand(self, v: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
        """``v`` (per tensor, channel or block) shaped to broadcast against a tensor of ``shape``."""
        if self.axis is None:
            return v
        axis = self.axis % len(shape)
        if self.block_size:
            v = np.repeat(v, self.block_size, axis=axis)
            return np.take(v, np.arange(shape[axis]), axis=axis)
        out = [1] * len(shape)
        out[axis] = -1
        return v.reshape(out)

    def scale_for(self, shape: tuple[int, ...]) -> np.ndarray:
        return self._expand(self.scale, shape)

    # -- the arithmetic ---------------------------------------------------------------

    def _scaled(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
        """``x / scale`` (a new float32 array), and scale and zero point shaped to broadcast against it (None: the zero
        point is 0 everywhere). The zero point is added after rounding, as onnxruntime's QuantizeLinear adds it: rounding
        ``x / scale + zp`` in float32 lands one step away on values a hair under a half."""
        shape = tuple(np.shape(x))
        s = self._expand(self.scale, shape)
        zp = self._expand(self.zero_point.astype(np.float32), shape) if self.zero_point.any() else None
        with np.errstate(all="ignore"):
            t = np.asarray(np.divide(np.asarray(x, np.float32), s, dtype=np.float32))  # a 0-d result stays an array
        return t, s, zp

    def quantize(self, x: np.ndarray) -> np.ndarray:
        """QuantizeLinear: round half to even, add the zero point, saturate; in the integer type."""
        t, _, zp = self._scaled(x)
        lo, hi = self.qrange
        np.rint(t, out=t)
        if zp is not None:
            t += zp
        np.clip(t, lo, hi, out=t)
        return t.astype(dtypes.dtype_of(self.dtype))

    def dequantize(self, q: np.ndarray) -> np.ndarray:
        """DequantizeLinear, in float32."""
        shape = tuple(np.shape(q))
        s = self._expand(self.scale, shape)
        zp = self._expand(self.zero_point.astype(np.float32), shape)
        out = dtypes.numeric(np.asarray(q)).astype(np.float32)
        out -= zp
        out *= s
        return out

    def round_trip(self, x: np.ndarray) -> np.ndarray:
        """``dequantize(quantize(x))``: the value a consumer reads after this tensor's own Q/DQ pair."""
        return self.round_trip_clipped(x)[0]

    def round_trip_clipped(self, x: np.ndarray) -> tuple[np.ndarray, int]:
        """The round trip, and how many elements were clipped (beyond the range by more than half a step)."""
        _, trip, clipped, _ = self.measured_round_trip(x, integers=False)
        return trip, clipped

    def quantized_round_trip(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray, int]:
        """``quantize(x)``, ``dequantize`` of it (the round trip) and the count of clipped elements, in one pass of each."""
        q, trip, clipped, _ = self.measured_round_trip(x, integers=True)
        assert q is not None
        return q, trip, clipped

    def measured_round_trip(self, x: np.ndarray, integers: bool) -> tuple[np.ndarray | None, np.ndarray, int, passes.Sums | None]:
        """The integers (when ``integers``; else None), the round trip, the count clipped, and, where the round trip
        was computed in one pass with its own error (:mod:`.passes`), the sums of ``trip - x`` (else None)."""
        if self.axis is None and self.dtype in _NUMPY_INTS and np.asarray(x).dtype == np.float32:
            zp = float(self.zero_point)
            lo, hi = self.qrange
            done = passes.round_trip(x, float(self.scale), zp, lo - zp, hi - zp, self.dtype if integers else None)
            if done is not None:
                return done.ints, done.value, done.clipped, done.error
        return (*self._round_trip(x, integers), None)

    def _round_trip(self, x: np.ndarray, integers: bool) -> tuple[np.ndarray | None, np.ndarray, int]:
        if self.axis is None and self.dtype in _NUMPY_INTS and np.size(x) >= CHUNKED_FROM and np.asarray(x).dtype == np.float32:
            done = self._round_trip_chunked(np.asarray(x), integers)
            if done is not None:
                return done
        t, s, zp = self._scaled(x)
        lo, hi = self.qrange
        np.rint(t, out=t)  # the integer less its zero point: the range is shifted instead of adding it twice
        low, high = (lo - zp, hi - zp) if zp is not None else (lo, hi)
        least, most = (float(t.min()), float(t.max())) if t.size else (0.0, 0.0)
        inside = bool(np.all(low <= least) and np.all(most <= high))  # NaN: not inside (np.clip keeps it)
        clipped = 0
        if not inside:  # two reductions; counting and clipping only where some clip (or NaN)
            clipped = int(np.count_nonzero(t < low)) + int(np.count_nonzero(t > high))
            np.clip(t, low, high, out=t)
        q = None
        if integers:
            q = (t + zp if zp is not None else t).astype(dtypes.dtype_of(self.dtype))
            if math.isnan(least):  # NaN has no integer: the round trip is the integer's (as onnxruntime's)
                return q, self.dequantize(q), clipped
            t += 0.0  # -0.0 (rint of -0.3) becomes the 0.0 that dequantize writes
        t *= s
        return q, t, clipped

    def _round_trip_chunked(self, x: np.ndarray, integers: bool) -> tuple[np.ndarray | None, np.ndarray, int] | None:
        """:meth:`_round_trip` per tensor, a cache-sized chunk at a time: every pass of a chunk reads it from the core's
        cache, and ``x`` is read from memory once. None where ``x`` holds a NaN (the whole-array way handles it)."""
        flat = x.reshape(-1)
        out = np.empty(flat.shape, np.float32)
        q = np.empty(flat.shape, dtypes.dtype_of(self.dtype)) if integers else None
        zp = float(self.zero_point)
        lo, hi = self.qrange
        low, high = lo - zp, hi - zp
        clipped = 0
        with np.errstate(all="ignore"):
            for i in range(0, flat.size, CHUNK):
                t = out[i : i + CHUNK]
                np.divide(flat[i : i + CHUNK], self.scale, out=t)
                np.rint(t, out=t)
                least, most = float(t.min()), float(t.max())
                if math.isnan(least):
                    return None
                if least < low or most > high:
                    clipped += int(np.count_nonzero(t < low)) + int(np.count_nonzero(t > high))
                    np.clip(t, low, high, out=t)
                if q is not None:
                    np.add(t, zp, out=q[i : i + CHUNK], casting="unsafe")
                    t += 0.0  # -0.0 (rint of -0.3) becomes the 0.0 that dequantize writes
                t *= self.scale
        return None if q is None else q.reshape(x.shape), out.reshape(x.shape), clipped

    def clipped(self, x: np.ndarray) -> int:
        """How many elements of ``x`` lie outside the representable range (by more than half a step): clipped, not rounded."""
        return self.round_trip_clipped(x)[1]

    def max_steps(self, diff: np.ndarray) -> float:
        """The largest ``|diff|`` in quantization steps (each element divided by its own scale)."""
        a = np.asarray(diff)
        if a.size == 0:
            return 0.0
        if self.axis is None:
            return float(max(a.max(), -a.min())) / float(self.scale)
        axis = self.axis % a.ndim
        moved = np.moveaxis(a, axis, 0).reshape(a.shape[axis], -1)
        per = np.maximum(moved.max(axis=1), -moved.min(axis=1))
        if self.block_size:
            per = np.moveaxis(np.abs(a) / self._expand(self.scale, a.shape), axis, 0).reshape(a.shape[axis], -1).max(axis=1)
            return float(per.max())
        with np.errstate(all="ignore"):
            return float(np.max(per / self.scale.reshape(-1)))
