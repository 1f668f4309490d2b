"""Where a scan's inputs come from, one work item at a time, and how a worker turns an item into feeds.

A source enumerates :class:`WorkItem` s lazily: the files of a folder or a glob
(``.npz``, ``.npy``, ONNX test-data folders), the slices of one archive along a
sample axis, or what a user's generator yields. An item names its input (a path,
a range of samples) rather than holding it, except for a generator's feeds; the
worker that runs it reads it (:class:`ItemLoader`), so the driver never holds the
data set.
"""

from __future__ import annotations

import enum
import glob
import importlib
import os
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from graph_dap.errors import InputError
from graph_dap.runtime.graph import Graph
from graph_dap.runtime.inputs import Dims, resolve_inputs
from graph_dap.runtime.tools.scan.npz import SliceReader

INPUT_SUFFIXES = (".npz", ".npy")
_GLOB_CHARS = "*?["


class ItemKind(enum.StrEnum):
    """Where a :class:`WorkItem`'s input is."""

    FILE = "file"  # an .npz, .npy or test-data folder at ``path``
    SAMPLES = "samples"  # samples ``start..stop-1`` along ``axis`` of the archive at ``path``
    ARRAYS = "arrays"  # ``feeds`` given: a generator's dict, or on Ray a reference to it in the object store


@dataclass(frozen=True, slots=True)
class WorkItem:
    """One run of a scan: which input, and where it is (``kind``)."""

    index: int
    id: str
    kind: ItemKind
    label: str
    path: str | None = None
    start: int = 0
    stop: int = 0
    axis: int = 0
    feeds: Any = None


class InputSource:
    """A data set of inputs: ``items()`` yields them in a fixed order, with ids that stay the same across runs."""

    kind = ""

    def __init__(self, spec: str) -> None:
        self.spec = spec
        self.total: int | None = None
        self.import_path: str | None = None  # a folder workers must import from (a generator's package)

    def items(self) -> Iterator[WorkItem]:
        raise NotImplementedError

    def describe(self) -> dict[str, Any]:
        return {"spec": self.spec, "kind": self.kind, "total": self.total}


def is_input_path(path: Path) -> bool:
    """A file graph-dap reads as one input (.npz, .npy), or a folder in the ONNX test-data layout."""
    if path.is_dir():
        return any(path.glob("input_*.pb"))
    return path.suffix.lower() in INPUT_SUFFIXES


class FileSource(InputSource):
    """Every input file or test-data folder under a folder, or matching a glob; ids are their paths from ``root``."""

    kind = "files"

    def __init__(self, spec: str, paths: list[Path], root: Path) -> None:
        super().__init__(spec)
        self.paths = paths
        self.root = root
        self.total = len(paths)

    def items(self) -> Iterator[WorkItem]:
        for i, p in enumerate(self.paths):
            rel = p.relative_to(self.root) if p.is_relative_to(self.root) else Path(p.name)
            ident = rel.with_suffix("").as_posix() if p.suffix.lower() in INPUT_SUFFIXES else rel.as_posix()
            yield WorkItem(i, ident, ItemKind.FILE, rel.as_posix(), str(p))


class SampleSource(InputSource):
    """The slices of one archive along a sample axis, ``batch`` of them per run."""

    kind = "samples"

    def __init__(self, spec: str, path: Path, axis: int, batch: int) -> None:
        super().__init__(spec)
        self.path = path
        self.axis = axis
        self.batch = batch
        self.samples = sample_count(path, axis)
        self.total = -(-self.samples // batch)

    def items(self) -> Iterator[WorkItem]:
        width = len(str(max(self.samples - 1, 0)))
        for i, start in enumerate(range(0, self.samples, self.batch)):
            stop = min(start + self.batch, self.samples)
            ident = f"sample_{start:0{width}d}" if stop - start == 1 else f"samples_{start:0{width}d}-{stop - 1:0{width}d}"
            label = f"sample {start}" if stop - start == 1 else f"samples {start}..{stop - 1}"
            yield WorkItem(i, ident, ItemKind.SAMPLES, f"{label} of {self.path.name}", str(self.path), start, stop, self.axis)

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "sample_axis": self.axis, "batch": self.batch, "samples": self.samples}


class GeneratorSource(InputSource):
    """What ``pkg.module:function()`` yields: feed dicts (ids ``item_000000``...), or ``(id, feeds)`` pairs."""

    kind = "generator"

    def __init__(self, spec: str) -> None:
        super().__init__(spec)
        self.function = import_target(spec)
        module = sys.modules[self.function.__module__]
        top = sys.modules.get(module.__name__.split(".")[0], module)
        where = getattr(top, "__file__", None)
        if where:
            base = Path(where).parent
            self.import_path = str(base.parent if Path(where).name == "__init__.py" else base)

    def items(self) -> Iterator[WorkItem]:
        try:
            produced = self.function()
            iterator = iter(produced)
        except TypeError:
            raise InputError(f"--inputs-from {self.spec}: the function must return an iterable of feed dicts") from None
        seen: set[str] = set()
        for i, got in enumerate(iterator):
            if isinstance(got, tuple) and len(got) == 2 and isinstance(got[0], str):
                ident, feeds = got
            else:
                ident, feeds = f"item_{i:06d}", got
            if not isinstance(feeds, Mapping):
                raise InputError(
                    f"--inputs-from {self.spec}: item {i} is a {type(feeds).__name__}; expected a dict of input name -> array "
                    "(or an (id, dict) pair)"
                )
            if ident in seen:
                raise InputError(f"--inputs-from {self.spec}: the id '{ident}' came twice; ids name inputs across resumed scans")
            seen.add(ident)
            yield WorkItem(i, ident, ItemKind.ARRAYS, f"item {i} of {self.spec}" if ident.startswith("item_") else ident, feeds=dict(feeds))


def import_target(spec: str) -> Any:
    """``pkg.module:function``, imported (the current folder first on the path, as ``python -m`` does)."""
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise InputError(f"--inputs-from expects MODULE:FUNCTION (e.g. mydata.loader:samples), got '{spec}'")
    if os.getcwd() not in sys.path and "" not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        module = importlib.import_module(module_name)
    except ImportError as e:
        raise InputError(f"--inputs-from {spec}: cannot import '{module_name}': {e}") from None
    function = getattr(module, attr, None)
    if not callable(function):
        raise InputError(f"--inputs-from {spec}: module '{module_name}' has no function '{attr}'")
    return function


def sample_count(path: Path, axis: int) -> int:
    """How many samples an archive (or one .npy) holds along ``axis``."""
    if path.suffix.lower() == ".npy":
        array = _npy(path)
        if array.ndim <= axis:
            raise InputError(f"{path}: the array has {array.ndim} dimensions, no sample axis {axis}")
        return int(array.shape[axis])
    reader = SliceReader(path, axis)
    try:
        return reader.length()
    finally:
        reader.close()


def _npy(path: Path) -> np.ndarray:
    try:
        return np.load(path, mmap_mode="r", allow_pickle=False)
    except (OSError, ValueError) as e:
        raise InputError(f"cannot read {path}: {e}") from None


def open_source(
    inputs: str | None = None,
    inputs_from: str | None = None,
    *,
    sample_axis: int | None = None,
    batch: int = 1,
    exclude: str | os.PathLike[str] | None = None,
) -> InputSource:
    """The source a scan's options name: a folder, a glob, one archive (with a sample axis), or a generator.

    ``exclude``: a folder whose files are never inputs (the scan's own output folder).
    """
    if (inputs is None) == (inputs_from is None):
        raise InputError("give the inputs as one of --inputs SOURCE (a folder, a glob, an .npz) or --inputs-from MODULE:FUNCTION")
    if batch < 1:
        raise InputError(f"--batch must be at least 1, got {batch}")
    if inputs_from is not None:
        if sample_axis is not None or batch != 1:
            raise InputError("--sample-axis and --batch apply to one archive given with --inputs, not to --inputs-from")
        return GeneratorSource(inputs_from)
    assert inputs is not None
    skip = Path(exclude).resolve() if exclude is not None else None
    if sample_axis is not None:
        path = Path(inputs)
        if not path.is_file() or path.suffix.lower() not in INPUT_SUFFIXES:
            raise InputError(f"--sample-axis needs one .npz (or .npy) whose arrays share a sample axis, got {inputs}")
        if sample_axis < 0:
            raise InputError(f"--sample-axis must be 0 or more, got {sample_axis}")
        return SampleSource(inputs, path, sample_axis, batch)
    if batch != 1:
        raise InputError("--batch groups slices of one archive: it needs --sample-axis")
    if any(c in inputs for c in _GLOB_CHARS):
        matches = [Path(m) for m in sorted(glob.glob(inputs, recursive=True))]
        paths = [p.resolve() for p in matches if is_input_path(p) and not _inside(p, skip)]
        if not paths:
            raise InputError(f"no inputs match {inputs} (expected .npz or .npy files or ONNX test-data folders)")
        return FileSource(inputs, paths, Path(_fixed_prefix(inputs)).resolve())
    path = Path(inputs)
    if not path.exists():
        raise InputError(f"inputs not found: {inputs}")
    if path.is_file() or is_input_path(path):
        return FileSource(inputs, [path.resolve()], path.resolve().parent)
    paths = list(_walk(path.resolve(), skip))
    if not paths:
        raise InputError(f"no inputs in {inputs}: expected .npz or .npy files or ONNX test-data folders (input_0.pb, ...)")
    return FileSource(inputs, paths, path.resolve())


def _walk(root: Path, skip: Path | None) -> Iterator[Path]:
    """Input files and test-data folders under ``root``, in sorted order (a test-data folder is not entered)."""
    for entry in sorted(root.iterdir(), key=lambda p: p.name):
        if _inside(entry, skip) or entry.name.startswith("."):
            continue
        if entry.is_dir():
            if is_input_path(entry):
                yield entry.resolve()
            else:
                yield from _walk(entry, skip)
        elif entry.suffix.lower() in INPUT_SUFFIXES:
            yield entry.resolve()


def _inside(path: Path, folder: Path | None) -> bool:
    return folder is not None and path.resolve().is_relative_to(folder)


def _fixed_prefix(pattern: str) -> str:
    """The folder part of a glob before its first wildcard: ids are paths from there."""
    parts = Path(pattern).parts
    fixed: list[str] = []
    for part in parts:
        if any(c in part for c in _GLOB_CHARS):
            break
        fixed.append(part)
    if len(fixed) == len(parts):
        fixed = fixed[:-1]
    return str(Path(*fixed)) if fixed else "."


# -- the worker's side: an item's feeds ---------------------------------------------------


class ItemLoader:
    """Reads items into checked feeds for one graph (archives kept open for forward reads of their slices)."""

    def __init__(self, graph: Graph, dims: Dims | None = None) -> None:
        self.graph = graph
        self.dims = dict(dims or {})
        self._readers: dict[tuple[str, int], SliceReader] = {}

    def load(self, item: WorkItem) -> dict[str, Any]:
        """The item's feeds, checked against the model's inputs (an :class:`InputError` says what is wrong)."""
        if item.kind is ItemKind.FILE:
            return resolve_inputs(self.graph, item.path, self.dims)
        if item.kind is ItemKind.SAMPLES:
            return resolve_inputs(self.graph, self._samples(item), self.dims)
        if not isinstance(item.feeds, Mapping):
            raise InputError(f"{item.label}: expected a dict of input name -> array, got {type(item.feeds).__name__}")
        return resolve_inputs(self.graph, item.feeds, self.dims)

    def _samples(self, item: WorkItem) -> dict[str, Any]:
        assert item.path is not None
        path = Path(item.path)
        if path.suffix.lower() == ".npy":
            if len(self.graph.inputs) != 1:
                raise InputError(f"a .npy holds one array, but the model has {len(self.graph.inputs)} inputs; give a .npz keyed by input name")
            index = [slice(None)] * _npy(path).ndim
            index[item.axis] = slice(item.start, item.stop)
            raw = {self.graph.inputs[0].name: np.array(_npy(path)[tuple(index)])}
        else:
            key = (item.path, item.axis)
            reader = self._readers.get(key)
            if reader is None:
                reader = self._readers[key] = SliceReader(path, item.axis)
            raw = reader.read(item.start, item.stop)
        return {name: self._batched(name, a, item.axis) for name, a in raw.items()}

    def _batched(self, name: str, a: np.ndarray, axis: int) -> np.ndarray:
        """Samples (along ``axis``) as one feed: stacked on a batch axis when a sample is one rank short, else concatenated."""
        stacked = np.moveaxis(a, axis, 0)
        k, rest = stacked.shape[0], stacked.shape[1:]
        info = next((v for v in self.graph.inputs if v.name == name), None)
        rank = None if info is None or info.shape is None else len(info.shape)
        if rank is None:  # the model does not say: one sample as it is, several stacked
            return np.ascontiguousarray(stacked[0] if k == 1 else stacked)
        if len(rest) == rank - 1:
            return np.ascontiguousarray(stacked)
        if len(rest) == rank and rank > 0:
            return np.ascontiguousarray(stacked.reshape((k * rest[0], *rest[1:])))
        raise InputError(
            f"a sample of '{name}' has shape {list(rest)}; the model's input '{name}' has rank {rank}: a sample must have "
            f"rank {rank} (samples are concatenated) or {rank - 1} (they get a batch axis)"
        )

    def close(self) -> None:
        for r in self._readers.values():
            r.close()
        self._readers.clear()
