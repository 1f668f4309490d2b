"""Each dequantized weight against its float weight: per tensor and per channel or block, in SQNR and quantization steps.

Where the quantized model keeps a weight: an integer initializer read by a DequantizeLinear
(per tensor, per channel with ``axis``, per block with ``block_size``); an input of a QOperator op
with its scale and zero point (QLinearConv's int32 bias, scaled by input scale x weight scale);
ConvInteger/MatMulInteger's weight with the ``{name}_scale`` initializer dynamic quantization
writes; MatMulNBits' packed 2/4/8-bit blocks.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from graph_dap.runtime.tools.quant.errors import Error, measure
from graph_dap.runtime.tools.quant.pairing import Pairing, WeightPair
from graph_dap.runtime.tools.quant.params import QuantParams
from graph_dap.runtime.tools.quant.view import ModelView

__all__ = ["WeightErrors", "compare_weights", "dequantized_weight"]

_NBITS = {4: "uint4", 8: "uint8"}  # MatMulNBits' integer types by bits


@dataclass(frozen=True, slots=True)
class WeightErrors:
    """One weight: its error over the tensor, its worst channel or block, its quantization."""

    float_name: str
    quant_name: str
    node: str  # the quantized node that reads it ('' when paired by name)
    shape: tuple[int, ...]
    error: Error
    params: QuantParams | None
    worst_part_snr: float  # the worst channel's or block's SQNR (the tensor's when per tensor)
    worst_part: int  # its index (-1: per tensor)
    clipped: float  # share of the float values outside the quantized range

    @property
    def granularity(self) -> str:
        if self.params is None:
            return "float"
        return "block" if self.params.block_size else ("tensor" if self.params.per_tensor else "channel")

    def to_dict(self) -> dict[str, Any]:
        return {
            "float": self.float_name,
            "quant": self.quant_name,
            "node": self.node,
            "shape": list(self.shape),
            "granularity": self.granularity,
            **self.error.to_dict(),
            "worst_part_snr": self.worst_part_snr if math.isfinite(self.worst_part_snr) else str(self.worst_part_snr),
            "worst_part": self.worst_part,
            "clipped": self.clipped,
            "quantization": None if self.params is None else self.params.to_dict(),
        }


def _nbits(view: ModelView, node: Any, float_shape: tuple[int, ...]) -> tuple[np.ndarray, QuantParams] | None:
    """MatMulNBits' packed weight as integers [K, N] and its per-block params."""
    attrs = node.attributes
    k, n, bits, block = int(attrs["K"]), int(attrs["N"]), int(attrs.get("bits", 4)), int(attrs["block_size"])
    if bits not in _NBITS:
        return None
    packed = view.constant(node.inputs[1])
    scales = view.constant(node.inputs[2])
    if packed is None or scales is None:
        return None
    blocks = (k + block - 1) // block
    per = 8 // bits
    raw = packed.reshape(n, -1).astype(np.uint8)
    values = np.stack([(raw >> (bits * i)) & ((1 << bits) - 1) for i in range(per)], axis=-1).reshape(n, -1)[:, : blocks * block]
    zp_in = view.constant(node.inputs[3]) if len(node.inputs) > 3 and node.inputs[3] else None
    if zp_in is None:
        zp = np.full((n, blocks), 1 << (bits - 1), np.uint8)
    elif zp_in.dtype.kind == "f":
        return None  # float zero points (a GPTQ variant): not this arithmetic
    else:
        zraw = zp_in.reshape(n, -1).astype(np.uint8)
        zp = np.stack([(zraw >> (bits * i)) & ((1 << bits) - 1) for i in range(per)], axis=-1).reshape(n, -1)[:, :blocks]
    params = QuantParams.make(scales.reshape(n, blocks).T.copy(), zp.T.copy(), axis=0, block_size=block, dtype=_NBITS[bits])
    q = values.T[:k].copy()
    return q.reshape(float_shape) if int(np.prod(float_shape)) == q.size else q, params


def dequantized_weight(pairing: Pairing, w: WeightPair) -> tuple[np.ndarray, QuantParams | None, np.ndarray | None] | None:
    """The weight as the quantized model uses it (float), its params and its integers; None when it cannot be read."""
    qv = pairing.quant_view
    float_shape = tuple(pairing.float_view.constant(w.float_name).shape)  # type: ignore[union-attr]
    if w.node is None or w.node.spec is None:
        c = qv.constant(w.quant_name)
        if c is not None:
            return np.asarray(c, np.float32), None, None
        p = qv.graph.producer(w.quant_name)
        if p is None or p.op_type != "DequantizeLinear":
            return None
        q = qv.integers(p.inputs[0])
        params = None if q is None else qv.quant_params(p, 1, 2, dtype=str(q.dtype))
        if q is None or params is None:
            return None
        return params.dequantize(q), params, q
    node = w.node.node
    q = qv.constant(node.inputs[w.position])
    if q is None:
        return None
    if node.op_type == "MatMulNBits":
        got = _nbits(qv, node, float_shape)
        if got is None:
            return None
        ints, params = got
        return params.dequantize(ints), params, ints
    if w.slot is None:  # QLinearConv's bias: int32 at input scale x weight scale, zero point 0
        xs, ws = qv.constant(node.inputs[1]), qv.constant(node.inputs[4])
        if xs is None or ws is None:
            return None
        bias_scale = (np.asarray(xs, np.float32) * np.asarray(ws, np.float32)).reshape(-1)
        params = QuantParams.make(bias_scale, np.zeros(bias_scale.shape, np.int32), axis=0)
        return params.dequantize(q), params, q
    slot = w.slot
    if slot.scale >= 0:
        params = qv.quant_params(node, slot.scale, slot.zero_point, axis=slot.axis if slot.axis is not None else 0, dtype=str(q.dtype))
    else:  # dynamic quantization keeps the weight's scale apart, as {float name}_scale
        scale = qv.constant(f"{w.float_name}_scale")
        zp = qv.constant(node.inputs[slot.zero_point]) if slot.zero_point < len(node.inputs) and node.inputs[slot.zero_point] else None
        params = None if scale is None else QuantParams.make(scale, zp, axis=slot.axis if slot.axis is not None else 0, dtype=str(q.dtype))
    if params is None:
        return None
    return params.dequantize(q), params, q


def _parts(params: QuantParams | None, f: np.ndarray, d: np.ndarray) -> tuple[float, int]:
    """The worst SQNR over channels (or blocks) and its index."""
    if params is None or params.per_tensor or f.ndim == 0:
        return (measure(f + d, f).snr, -1)
    axis = params.axis % f.ndim  # type: ignore[operator]
    fa, da = np.moveaxis(f, axis, 0), np.moveaxis(d, axis, 0)
    if params.block_size:
        size = fa.shape[0]
        blocks = (size + params.block_size - 1) // params.block_size
        pad = blocks * params.block_size - size
        fa = np.pad(fa, [(0, pad)] + [(0, 0)] * (fa.ndim - 1)).reshape(blocks, params.block_size, -1)
        da = np.pad(da, [(0, pad)] + [(0, 0)] * (da.ndim - 1)).reshape(blocks, params.block_size, -1)
        sig = np.einsum("bkn,bkn->bn", fa, fa).reshape(-1)
        noise = np.einsum("bkn,bkn->bn", da, da).reshape(-1)
    else:
        fa, da = fa.reshape(fa.shape[0], -1), da.reshape(da.shape[0], -1)
        sig = np.einsum("ck,ck->c", fa, fa)
        noise = np.einsum("ck,ck->c", da, da)
    with np.errstate(all="ignore"):
        snr = np.where(noise == 0, np.inf, 10 * np.log10(np.where(sig == 0, 1e-300, sig) / np.where(noise == 0, 1, noise)))
    i = int(np.argmin(snr))
    return float(snr[i]), i


def compare_weights(pairing: Pairing) -> tuple[list[WeightErrors], list[str]]:
    """Every paired weight compared; and the weights that could not be read back, with why."""
    out: list[WeightErrors] = []
    skipped: list[str] = []
    for w in pairing.weights:
        f = pairing.float_view.constant(w.float_name)
        got = dequantized_weight(pairing, w)
        if f is None or got is None:
            skipped.append(f"{w.float_name}: its quantized form ({w.quant_name}) has no constant scale or layout graph-dap reads")
            continue
        dq, params, _ = got
        f32 = np.asarray(f, np.float32)
        if dq.size != f32.size:
            skipped.append(f"{w.float_name}: {dq.size} quantized values for {f32.size} float ones")
            continue
        dq = dq.reshape(f32.shape)
        d = dq - f32
        err = measure(dq, f32, params)
        worst, index = _parts(params, f32, d)
        clipped = params.clipped(f32) / max(f32.size, 1) if params is not None else 0.0
        node = w.node.node.id if w.node is not None else ""
        out.append(WeightErrors(w.float_name, w.quant_name, node, tuple(f32.shape), err, params, worst, index, clipped))
    return out, skipped
