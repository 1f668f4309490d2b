"""Dumps: every computed value of a run in a ``.npz``, written while the run goes.

A dump is ``run.npz`` (one ``.npy`` member per value, keyed by value name, so
``numpy.load`` and ``load("run.npz", "name")`` read it) plus ``run.npz.json``: the
model's and the inputs' hashes, the providers and options, and the node that
produced each value (with its path inside control flow). The values inside If
branches, Loop and Scan bodies and function calls are written too, as a debugger
stepping in shows them; inside a loop each iteration's under ``name@ITERATION``.
Types an ``.npy`` cannot name are stored as described in :mod:`.archive` and read
back as they were by :meth:`Dump.get`. Values are written as soon as they are
computed and dropped once no later node reads them, so memory stays at the run's
working set. The archive is written under a temporary name in the same folder and
renamed at the end: an interrupted dump leaves no file under the final name.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import secrets
import time
import zipfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import onnx

from graph_dap import log as _log
from graph_dap.errors import DumpError
from graph_dap.files import ARCHIVE_ERRORS, temporary_beside, write_text_atomic
from graph_dap.kinds import OptLevel
from graph_dap.runtime.engine.nodes import NodeRunner
from graph_dap.runtime.graph import Graph, Node
from graph_dap.runtime.inputs import Dims, InputsArg, resolve_inputs
from graph_dap.runtime.loading import load_graph
from graph_dap.runtime.selection import Selection
from graph_dap.runtime.stops import PathStep, node_ref
from graph_dap.runtime.tools.archive import decode, encode, member_key, special
from graph_dap.runtime.tools.stream import NodeStream

__all__ = ["Dump", "DumpResult", "NodeStream", "dump_model", "inputs_hash", "model_hash", "open_dump"]

FORMAT = "graph-dap-dump"
VERSION = 1
_log_ = _log.get_logger(__name__)


# -- hashes --------------------------------------------------------------------------


def model_hash(graph: Graph) -> str:
    """sha256 of the model file (or of the serialized model when it has no file)."""
    h = hashlib.sha256()
    if graph.path is not None and graph.path.is_file():
        with open(graph.path, "rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                h.update(chunk)
    else:
        h.update(graph.model.SerializeToString())
    return "sha256:" + h.hexdigest()


def inputs_hash(inputs: Mapping[str, Any]) -> str:
    """sha256 over each input's name, dtype, shape and bytes, in name order."""
    h = hashlib.sha256()
    for name in sorted(inputs):
        a = np.ascontiguousarray(inputs[name])
        kind = a.dtype.str if a.dtype.kind != "V" else str(a.dtype)  # bfloat16, float8, int4 all read "<V..."
        h.update(f"{name}\0{kind}\0{a.shape}\0".encode())
        h.update(a.tobytes() if not a.dtype.hasobject else repr(a.tolist()).encode())
    return "sha256:" + h.hexdigest()


# -- writing -------------------------------------------------------------------------


def _value_key(name: str, path: tuple[PathStep, ...] | None, used: set[str]) -> str:
    """A value's archive key: its name; inside loops ``name@ITERATIONS`` (outermost first, comma-separated);
    a name written again (a function called twice) gets ``#N``."""
    iterations = [str(step.iteration) for step in path or () if step.iteration is not None]
    key = f"{name}@{','.join(iterations)}" if iterations else name
    base, n = key, 1
    while key in used:
        n += 1
        key = f"{base}#{n}"
    return key


@dataclass(frozen=True, slots=True)
class DumpResult:
    """What a dump wrote."""

    path: Path
    meta_path: Path
    values: int
    bytes: int
    skipped: tuple[str, ...]
    seconds: float

    def to_dict(self) -> dict[str, Any]:
        return {
            "path": str(self.path),
            "meta": str(self.meta_path),
            "values": self.values,
            "bytes": self.bytes,
            "skipped": list(self.skipped),
            "seconds": round(self.seconds, 3),
        }


def meta_path_of(path: str | os.PathLike[str]) -> Path:
    """Where the JSON side file of a dump lives: ``run.npz.json`` beside ``run.npz``."""
    p = Path(path)
    return p.with_name(p.name + ".json")


def dump_model(
    model: str | os.PathLike[str] | onnx.ModelProto | Graph,
    out: str | os.PathLike[str],
    inputs: InputsArg = None,
    *,
    dims: Dims | None = None,
    providers: Sequence[str] | None = None,
    opt_level: str = OptLevel.NONE,
    values: Sequence[str] = (),
    on_value: Callable[[Node, str, int], None] | None = None,
    on_progress: Callable[[int, int], None] | None = None,
) -> DumpResult:
    """Run ``model`` node by node and write every computed value (or those ``values`` select) to ``out``.

    Graph inputs are always stored too (a compare against the dump reuses them).
    ``values``: globs over value names or the id of the node producing them, ``op:TYPE`` or ``module:PATH``
    (see :class:`~graph_dap.runtime.selection.Selection`); one that selects nothing is a DumpError.
    ``on_value(node, name, bytes)`` is called after each value is written.
    """
    started = time.monotonic()
    graph = model if isinstance(model, Graph) else load_graph(model)
    feeds = resolve_inputs(graph, inputs, dims)
    runner = NodeRunner(graph, providers, opt_level)
    target = Path(out)
    if target.suffix.lower() != ".npz":
        raise DumpError(f"a dump is an .npz archive; give --out a name ending in .npz (got {target})")
    if not target.parent.is_dir():
        raise DumpError(f"folder not found for the dump: {target.parent}")
    patterns = tuple(values)
    selection = Selection.checked(graph, patterns, "--values", DumpError)  # (a dump of the inputs alone would hide a mistake)

    def selected(node: Node, name: str) -> bool:
        return selection.value(name, node)

    dump_id = secrets.token_hex(8)
    entries: list[dict[str, Any]] = []
    skipped: list[str] = []
    total_bytes = 0
    fd, tmp_name = temporary_beside(target)
    tmp = Path(tmp_name)
    meta_path = meta_path_of(target)
    wrote_meta = False
    try:
        with os.fdopen(fd, "wb") as raw:
            with zipfile.ZipFile(raw, "w", compression=zipfile.ZIP_STORED, allowZip64=True) as zf:
                used: set[str] = set()

                def write(name: str, value: Any, producer: Node | None, path: tuple[PathStep, ...] | None = None) -> int:
                    ref = None if producer is None else node_ref(producer, path)
                    encoded = encode(value)
                    if isinstance(encoded, str):
                        skipped.append(name)
                        entries.append({"name": name, "key": None, "producer": ref, "skipped": encoded})
                        return 0
                    stored, kind, size = encoded
                    label = _value_key(name, path, used)
                    used.add(label)
                    key = member_key(label, len(entries))
                    with zf.open(key + ".npy", "w", force_zip64=True) as member:
                        np.lib.format.write_array(member, stored, allow_pickle=False)
                    shape = list(np.shape(value)) if not isinstance(value, (list, dict)) else [len(value)]
                    entry = {"name": name, "key": key, "producer": ref, "dtype": kind, "shape": shape, "bytes": size}
                    if label != name:
                        entry["as"] = label  # inside a loop: name@ITERATION
                    entries.append(entry)
                    return size

                def written(node: Node, path: tuple[PathStep, ...] | None, outs: Mapping[str, Any]) -> None:
                    nonlocal total_bytes
                    for name in node.outputs:
                        if name and name in outs and selected(node, name):
                            n = write(name, outs[name], node, path)
                            total_bytes += n
                            if on_value is not None:
                                on_value(node, name, n)

                for name, value in feeds.items():
                    total_bytes += write(name, value, None)
                stream = NodeStream(graph, feeds, runner, on_inner=written)
                total = len(graph.nodes)
                for node, outs in stream:
                    written(node, None, outs)
                    if _log_.level >= _log.TRACE:
                        _log_.trace("node %s: %d values live", node.id, len(stream.live_values()))
                    if on_progress is not None:
                        on_progress(node.order + 1, total)
                zf.comment = f"{FORMAT} {dump_id}".encode()
            raw.flush()
            os.fsync(raw.fileno())
        meta = {
            "format": FORMAT,
            "version": VERSION,
            "id": dump_id,
            "model": {"path": str(graph.path) if graph.path else None, "hash": model_hash(graph), "graph": graph.name},
            "inputs": {"hash": inputs_hash(feeds), "names": list(feeds)},
            "providers": list(runner.providers),
            "options": {"opt_level": opt_level, "engine": "one-node onnxruntime sessions", "dims": dict(dims or {})},
            "selection": list(patterns),
            "values": entries,
        }
        # The side file first: a dump under its final name always has its metadata beside it.
        write_text_atomic(meta_path, json.dumps(meta, indent=1))
        wrote_meta = True
        mode = _file_mode()
        os.chmod(meta_path, mode)
        os.chmod(tmp, mode)  # temporary files are private; the dump is an ordinary file
        os.replace(tmp, target)
    except BaseException as error:
        for leftover in (tmp, meta_path) if wrote_meta else (tmp,):  # nothing partial under a final name
            try:
                leftover.unlink()
            except FileNotFoundError:
                pass
        if isinstance(error, OSError):
            full = " (the disk is full)" if error.errno == errno.ENOSPC else ""
            raise DumpError(f"cannot write the dump {target}: {error.strerror or error}{full}") from None
        raise
    seconds = time.monotonic() - started
    _log_.info("dump %s: %d values, %d bytes in %.2fs", target, len(entries) - len(skipped), total_bytes, seconds)
    return DumpResult(target, meta_path, len(entries) - len(skipped), total_bytes, tuple(skipped), seconds)


def _file_mode() -> int:
    """The mode a new file gets here (0o666 less the umask), read without changing the umask."""
    umask = 0o022
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("Umask:"):
                    umask = int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    return 0o666 & ~umask


# -- reading -------------------------------------------------------------------------


class Dump:
    """A dump opened for reading; arrays are read one at a time, when asked for."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        if not self.path.is_file():
            raise DumpError(f"dump not found: {self.path}")
        try:
            self._npz = np.load(self.path, allow_pickle=False)
        except ARCHIVE_ERRORS as e:
            raise DumpError(f"cannot read {self.path} as an .npz archive: {e}") from None
        if not hasattr(self._npz, "files"):
            raise DumpError(f"{self.path} holds one array, not an .npz archive of values")
        self.meta: dict[str, Any] = {}
        self.note = ""
        meta_path = meta_path_of(self.path)
        comment = self._npz.zip.comment.decode("utf-8", "replace")
        if meta_path.is_file():
            try:
                meta = json.loads(meta_path.read_text(encoding="utf-8"))
            except (OSError, ValueError) as e:
                meta, self.note = {}, f"side file {meta_path} is unreadable ({e}); using the archive's names"
            if meta and comment and meta.get("id") and comment != f"{FORMAT} {meta.get('id')}":
                meta, self.note = {}, f"side file {meta_path} belongs to another dump; using the archive's names"
            self.meta = meta
        self._keys: dict[str, str] = {}
        self._producers: dict[str, dict[str, Any] | None] = {}
        self._kinds: dict[str, str] = {}  # values stored as something else (see archive), with their type
        for entry in self.meta.get("values", []):
            key = entry.get("key")
            names = [entry["name"], entry["as"]] if entry.get("as") else [entry["name"]]
            for name in names:  # a value inside a loop: its first iteration's by name, each by its key
                if name in self._keys or (key is None and name in self._producers):
                    continue
                if key is not None:
                    self._keys[name] = key
                    if special(str(entry.get("dtype"))):
                        self._kinds[name] = str(entry["dtype"])
                self._producers[name] = entry.get("producer")
        if not self.meta:
            self._keys = {k: k for k in self._npz.files}

    def __enter__(self) -> Dump:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def close(self) -> None:
        self._npz.close()

    @property
    def names(self) -> list[str]:
        """The value names the dump holds, in the order they were written."""
        return list(self._keys)

    def has(self, name: str) -> bool:
        return name in self._keys

    def get(self, name: str) -> Any:
        """The array of value ``name`` (a map or a sequence of maps: as onnxruntime gives them); a value
        inside a loop is ``name@ITERATION``, its first iteration's also ``name``."""
        key = self._keys.get(name)
        if key is None:
            raise DumpError(f"the dump {self.path} has no value '{name}'")
        a = np.asarray(self._npz[key])
        kind = self._kinds.get(name)
        if kind is None:
            return a
        try:
            return decode(a, kind)
        except ValueError as e:
            raise DumpError(f"the dump {self.path}: '{name}' {e}") from None

    def producer(self, name: str) -> dict[str, Any] | None:
        """``{"name", "op_type", "index"}`` of the node that produced ``name`` (None for inputs)."""
        return self._producers.get(name)

    @property
    def input_names(self) -> list[str]:
        return list(self.meta.get("inputs", {}).get("names", []))

    def inputs_for(self, graph: Graph) -> dict[str, np.ndarray]:
        """The dump's values for ``graph``'s inputs (those it holds)."""
        return {v.name: self.get(v.name) for v in graph.inputs if self.has(v.name)}

    def describe(self) -> str:
        model = self.meta.get("model", {})
        bits = [f"dump {self.path}"]
        if model.get("path"):
            bits.append(f"of {Path(model['path']).name}")
        if self.meta.get("providers"):
            bits.append(f"on {','.join(self.meta['providers'])}")
        return " ".join(bits)


def open_dump(path: str | os.PathLike[str]) -> Dump:
    """Open a dump written by :func:`dump_model` (or any .npz keyed by value name)."""
    return Dump(path)
