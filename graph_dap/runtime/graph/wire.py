"""A model's variants as bytes for onnxruntime, each weight serialized once per model.

A comparison runs variants of one model: all of it with more outputs, some of its nodes renamed.
Copying the model and serializing the copy copies every weight twice per variant (upb's serializer
also grows its buffer as it goes). protobuf's wire format concatenates instead: an embedded
message given twice is merged and a repeated field's entries add up. So a variant is the bytes
of its *skeleton* (the model without its initializers: nodes, inputs, outputs, a few KB) followed
by the bytes of the initializers it reads, serialized once and kept for the next variant.
"""

from __future__ import annotations

from collections.abc import Iterable

import onnx

__all__ = ["ModelWire", "field_head"]

_GRAPH_FIELD = 7  # ModelProto.graph
_INITIALIZER_FIELD = 5  # GraphProto.initializer


def _varint(n: int) -> bytes:
    out = bytearray()
    while n > 0x7F:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def field_head(number: int, size: int) -> bytes:
    """The tag and length of a length-delimited field (a message, bytes or a string) of ``size`` bytes."""
    return _varint(number << 3 | 2) + _varint(size)


def _copy_except(src: object, dst: object, skip: str) -> None:
    """Every set field of message ``src`` but ``skip`` into ``dst`` (repeated fields extended, messages copied)."""
    for fd, value in src.ListFields():  # type: ignore[attr-defined]
        if fd.name == skip:
            continue
        target = getattr(dst, fd.name)
        if hasattr(value, "extend"):
            target.extend(value)
        elif hasattr(value, "CopyFrom"):
            target.CopyFrom(value)
        else:
            setattr(dst, fd.name, value)


class ModelWire:
    """``model``'s initializers as wire bytes (made on first use), and skeletons to build variants from."""

    def __init__(self, model: onnx.ModelProto) -> None:
        self.model = model
        self._chunks: dict[str, tuple[bytes, bytes]] | None = None  # name: the field's head, the tensor's bytes

    def skeleton(self) -> onnx.ModelProto:
        """A new ModelProto that is the model less its main graph's initializers, to change at will."""
        out = onnx.ModelProto()
        _copy_except(self.model, out, "graph")
        _copy_except(self.model.graph, out.graph, "initializer")
        return out

    def _initializer_chunks(self) -> dict[str, tuple[bytes, bytes]]:
        if self._chunks is None:
            self._chunks = {}
            for t in self.model.graph.initializer:
                data = t.SerializeToString()
                self._chunks[t.name] = (field_head(_INITIALIZER_FIELD, len(data)), data)
        return self._chunks

    def to_bytes(self, skeleton: onnx.ModelProto, initializers: Iterable[str] | None = None) -> bytes:
        """``skeleton``'s bytes with the model's initializers ``initializers`` (None: all of them) in its main graph:
        one copy of each weight, into the result."""
        chunks = self._initializer_chunks()
        parts = [chunks[n] for n in (chunks if initializers is None else dict.fromkeys(initializers))]
        size = sum(len(h) + len(d) for h, d in parts)
        return b"".join([skeleton.SerializeToString(), field_head(_GRAPH_FIELD, size), *(x for part in parts for x in part)])
