"""The data of a model's initializers, held once: in the model's protobuf, or mapped from its external data files.

A model's weights can exceed protobuf's 2 GB and are then in external data files beside it.
graph-dap never copies them: :meth:`Weights.array` maps a tensor's bytes from its file
(read-only, ``numpy.memmap``: pages are read when something looks at them, and the kernel
can drop them again), and the models graph-dap builds for onnxruntime (segments, single
nodes) keep the original reference (:meth:`Weights.reference`), so that onnxruntime reads
the file itself, exactly as it does for the whole model (it maps it and pre-packs the same
weights). A value set by the user is a new array, never the mapped one: sessions then embed it.

External data is never read from outside the model's folder (``..``, absolute paths and
symlinks leading out are refused), and a tensor whose bytes the file does not hold is refused.
"""

from __future__ import annotations

import mmap
import os
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import onnx
from onnx import external_data_helper, numpy_helper

from graph_dap.errors import ModelError
from graph_dap.files import path_problem
from graph_dap.runtime import dtypes
from graph_dap.runtime.tensor import TensorSummary, numel, summarize, summarize_chunks

#: The session option naming the folder that external data locations are relative to, for a model given as bytes.
FOLDER_OPTION = "session.model_external_initializers_file_folder_path"


@dataclass(frozen=True, slots=True)
class External:
    """Where one tensor's bytes are: a file inside the model's folder, an offset and a length."""

    file: Path
    offset: int
    length: int


def uses_external_data(tensor: onnx.TensorProto) -> bool:
    return tensor.data_location == onnx.TensorProto.EXTERNAL


def locate(tensor: onnx.TensorProto, root: Path) -> External:
    """Where ``tensor``'s external data is, checked: inside ``root``, a file that holds all of its bytes."""
    try:
        info = external_data_helper.ExternalDataInfo(tensor)
    except (ValueError, TypeError) as e:  # a negative or non-numeric offset or length
        raise ModelError(f"tensor '{tensor.name}': bad external data reference: {e}") from None
    location = info.location
    if not location:
        raise ModelError(f"tensor '{tensor.name}' is marked as external data but names no file")
    target = (root / location).resolve()
    if os.path.isabs(location) or not target.is_relative_to(root):
        raise ModelError(
            f"tensor '{tensor.name}' points at external data '{location}' outside the model's folder {root}; "
            "external data must live beside the model"
        )
    problem = path_problem(target)  # Path.is_file raises for a name the system refuses (over 255 bytes)
    if problem not in (None, "not found"):
        raise ModelError(f"tensor '{tensor.name}': cannot open the external data file {str(target)[:300]}: {problem}")
    if not target.is_file():
        raise ModelError(f"tensor '{tensor.name}': external data file not found: {target}")
    size = target.stat().st_size
    offset = int(info.offset or 0)
    want = _nbytes(tensor)
    length = int(info.length) if info.length else (want if want is not None else size - offset)
    if want is not None and length != want:
        raise ModelError(f"tensor '{tensor.name}': external data length {length} does not match its type ({want} bytes expected)")
    if offset < 0 or offset + length > size:
        raise ModelError(
            f"tensor '{tensor.name}': external data {location} holds {size:,} bytes, "
            f"but the tensor's data is at bytes {offset:,} to {offset + length:,} (a truncated file?)"
        )
    return External(target, offset, length)


_PIECE = 1 << 20  # bytes read at a time when summarizing external data (its float64 temporaries stay small)


def _pieces(where: External, kind: np.dtype[Any]) -> Iterator[np.ndarray]:
    """The tensor's bytes at ``where`` as consecutive flat arrays of ``kind``, read into one reused buffer."""
    step = max(kind.itemsize, _PIECE - _PIECE % kind.itemsize)
    buffer = bytearray(step)
    with open(where.file, "rb") as f:
        f.seek(where.offset)
        left = where.length
        while left > 0:
            view = memoryview(buffer)[: min(step, left)]
            filled = 0
            while filled < len(view):
                got = f.readinto(view[filled:])
                if not got:
                    raise ModelError(f"external data {where.file} ended early (a file changed while it was read?)")
                filled += got
            left -= filled
            yield np.frombuffer(view, kind)


def _graphs(graph: onnx.GraphProto) -> list[onnx.GraphProto]:
    """``graph`` and every subgraph in it."""
    out = [graph]
    for node in graph.node:
        for a in node.attribute:
            if a.type == onnx.AttributeProto.GRAPH:
                out += _graphs(a.g)
            elif a.type == onnx.AttributeProto.GRAPHS:
                for g in a.graphs:
                    out += _graphs(g)
    return out


def _nbytes(tensor: onnx.TensorProto) -> int | None:
    """Bytes of a tensor's data as stored (int4/uint4: two per byte); None for strings."""
    if tensor.data_type == onnx.TensorProto.STRING:
        return None
    kind = onnx.helper.tensor_dtype_to_np_dtype(tensor.data_type)
    n = numel(tensor.dims)
    if str(kind) in dtypes.PACKED:
        return (n + 1) // 2
    return n * kind.itemsize


def release_pages(value: Any) -> None:
    """Let the kernel take back the pages of a mapped weight that this process has read (they stay in the page cache,
    and are read again if something looks again): a weight read once to derive something from it (a bound of the
    watch) need not stay in the process's memory. A no-op for an array that is not mapped."""
    base = value
    while base is not None and not isinstance(base, np.memmap):
        base = getattr(base, "base", None)
    mapping = getattr(base, "_mmap", None)
    if mapping is not None and hasattr(mapping, "madvise") and hasattr(mmap, "MADV_DONTNEED"):
        try:
            mapping.madvise(mmap.MADV_DONTNEED)
        except (OSError, ValueError):  # (a closed or foreign mapping: it keeps its pages)
            pass


class Weights:
    """The initializers' data of one model, external data mapped from files inside ``folder``."""

    def __init__(self, model: onnx.ModelProto, folder: Path | None) -> None:
        self.folder = folder.resolve() if folder is not None else None
        self._lock = threading.Lock()
        self._protos: dict[int, onnx.TensorProto] = {}  # id of an array handed out -> the proto it maps
        self._arrays: dict[tuple[str, str, int], np.ndarray] = {}  # (name, location, offset) -> its array
        self._summaries: dict[str, TensorSummary] = {}  # the model's own data: it never changes
        self._summarizing: dict[str, threading.Event] = {}  # summaries being made, by name
        self.external: dict[str, External] = {}
        self._tensors = [t for g in _graphs(model.graph) for t in g.initializer]
        for tensor in external_data_helper._get_all_tensors(model):
            if uses_external_data(tensor):
                if self.folder is None:
                    raise ModelError(
                        f"tensor '{tensor.name}' is in external data, but the model was given without the file it was "
                        "read from; load it from its path"
                    )
                self.external[tensor.name] = locate(tensor, self.folder)

    @property
    def total_bytes(self) -> int:
        """The bytes of every initializer's data (as arrays: int4 one byte per element)."""
        total = 0
        for tensor in self._tensors:
            kind = onnx.helper.tensor_dtype_to_np_dtype(tensor.data_type)
            total += numel(tensor.dims) * (kind.itemsize if not kind.hasobject else 8)
        return total

    @property
    def has_external(self) -> bool:
        """Whether any tensor's data is in an external file (sessions then need :data:`FOLDER_OPTION`)."""
        return bool(self.external)

    @property
    def data_folder(self) -> Path | None:
        """The folder a session over this model given as bytes must read its external data from (None: none needed)."""
        return self.folder if self.external else None

    def array(self, tensor: onnx.TensorProto) -> np.ndarray:
        """The data of ``tensor`` as an array: mapped read-only from its file when external (once), else from the proto."""
        if not uses_external_data(tensor):
            return numpy_helper.to_array(tensor)
        info = external_data_helper.ExternalDataInfo(tensor)
        key = (tensor.name, info.location, int(info.offset or 0))
        with self._lock:
            a = self._arrays.get(key)
            if a is None:
                a = self._arrays[key] = self._map(tensor)
                self._protos[id(a)] = tensor
            return a

    def summary(self, tensor: onnx.TensorProto) -> TensorSummary:
        """The summary of an initializer's data, computed once. External data is read from its file a piece at a time
        into one small buffer, not through the mapping: the whole model's weights summarized (a debugger's
        Initializers scope) would otherwise all become pages of this process (its memory would double)."""
        while True:
            with self._lock:
                done = self._summaries.get(tensor.name)
                busy = self._summarizing.get(tensor.name)
                if done is None and busy is None:
                    self._summarizing[tensor.name] = threading.Event()  # (another thread asking waits for this one)
            if done is not None:
                return done
            if busy is None:
                break
            busy.wait()
        try:
            found = self._summarize(tensor)
        finally:
            with self._lock:
                self._summarizing.pop(tensor.name).set()
        return found

    def known(self, tensor: onnx.TensorProto) -> TensorSummary | None:
        """The summary of an initializer's data when it is made already (None: :meth:`summary` would read the data)."""
        with self._lock:
            return self._summaries.get(tensor.name)

    def summarize_all(self) -> None:
        """Summarize every external initializer (in their files' order) that is not yet: what a debugger does in the
        background once a client looks at the scopes, so that opening the Initializers scope finds them done."""
        for tensor in sorted((t for t in self._tensors if t.name in self.external), key=lambda t: (str(self.external[t.name].file), self.external[t.name].offset)):
            self.summary(tensor)

    def _summarize(self, tensor: onnx.TensorProto) -> TensorSummary:
        kind = onnx.helper.tensor_dtype_to_np_dtype(tensor.data_type)
        where = self.external.get(tensor.name) if uses_external_data(tensor) else None
        if where is None or kind.hasobject or dtypes.is_extra(kind) or str(kind) in dtypes.PACKED or where.length == 0:
            found = summarize(self.array(tensor))
        else:
            found = summarize_chunks(str(kind), tuple(int(d) for d in tensor.dims), _pieces(where, kind.newbyteorder("<")))
        with self._lock:
            self._summaries[tensor.name] = found
        return found

    def reference(self, value: Any) -> onnx.TensorProto | None:
        """The original external-data tensor when ``value`` is the array :meth:`array` mapped for it (else None)."""
        return self._protos.get(id(value)) if isinstance(value, np.ndarray) else None

    def _map(self, tensor: onnx.TensorProto) -> np.ndarray:
        where = self.external.get(tensor.name)
        if where is None:
            assert self.folder is not None
            where = locate(tensor, self.folder)
        kind = onnx.helper.tensor_dtype_to_np_dtype(tensor.data_type)
        if kind.hasobject:
            raise ModelError(f"tensor '{tensor.name}': string tensors cannot be read from external data")
        shape = tuple(int(d) for d in tensor.dims)
        name = str(kind)
        if where.length == 0 or name in dtypes.PACKED:
            # nothing to map, or bytes that are not the array's (nibbles, two per byte): read and convert
            with open(where.file, "rb") as f:
                f.seek(where.offset)
                raw = np.frombuffer(f.read(where.length), np.uint8)
            return dtypes.unpack4(raw, name, shape) if name in dtypes.PACKED else np.zeros(shape, kind)
        stored = dtypes.bits(np.empty(0, kind)).dtype.newbyteorder("<")
        mapped = np.asarray(np.memmap(where.file, dtype=stored, mode="r", offset=where.offset, shape=shape or (1,))).reshape(shape)
        return dtypes.from_bits(mapped, name) if dtypes.is_extra(kind) else mapped
