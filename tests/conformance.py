"""ONNX's own conformance cases, read in memory: the node cases (as onnx's test generator makes
them) and the simple, pytorch-operator and pytorch-converted suites that the onnx wheel ships.

Each case is a model, inputs and expected outputs, with the tolerance the suite uses.
"""

from __future__ import annotations

import functools
import os
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import onnxruntime as ort
from onnx import numpy_helper

from graph_dap.runtime.engine.options import session_options

DATA = Path(onnx.__file__).parent / "backend" / "test" / "data"
FILE_SUITES = ("simple", "pytorch-operator", "pytorch-converted")
#: Cases whose bodies graph-dap steps through; their outputs must equal onnxruntime's bit for bit.
CONTROL_FLOW_PREFIXES = ("test_if", "test_loop", "test_scan", "test_sequence_", "test_range_")


@dataclass(frozen=True)
class Case:
    name: str
    model: onnx.ModelProto
    inputs: dict[str, Any]
    expected: list[Any]
    rtol: float = 1e-3
    atol: float = 1e-7

    @property
    def control_flow(self) -> bool:
        return self.name.startswith(CONTROL_FLOW_PREFIXES) and (not self.name.startswith("test_range_") or "expanded" in self.name)


#: Where :func:`node_cases` keeps what onnx's generator made: it runs every case's reference implementation (the 3-D
#: pools alone take seconds), 10-16 s in each pytest worker, for 10 MB that load in 0.05 s.
CACHE = Path(__file__).resolve().parents[1] / ".pytest_cache" / "graph-dap"


@functools.cache
def node_cases() -> dict[str, Case]:
    """onnx's node cases, generated once per onnx and numpy version and kept (written under a temporary name and
    renamed; the workers of one run take turns, so one generates and the others read)."""
    import fcntl
    import pickle
    import platform
    import sys

    key = f"onnx-node-cases-{onnx.__version__}-numpy-{np.__version__}-py{sys.version_info[0]}.{sys.version_info[1]}-{platform.machine()}"
    path = CACHE / f"{key}.pickle"
    try:
        CACHE.mkdir(parents=True, exist_ok=True)
        lock = open(CACHE / f"{key}.lock", "w")  # noqa: SIM115 - held until the cases are in hand
    except OSError:  # a read-only checkout: generate them
        return _generate_node_cases()
    with lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            with open(path, "rb") as f:
                return pickle.load(f)  # written by this function alone
        except (OSError, EOFError, pickle.UnpicklingError, AttributeError, ImportError):
            pass
        cases = _generate_node_cases()
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        try:
            tmp.write_bytes(pickle.dumps(cases, protocol=pickle.HIGHEST_PROTOCOL))
            os.replace(tmp, path)
        except OSError:
            tmp.unlink(missing_ok=True)
        return cases


def _generate_node_cases() -> dict[str, Case]:
    from onnx.backend.test.case import node

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        collected = node.collect_testcases()
    out: dict[str, Case] = {}
    for c in collected:
        if not c.data_sets:
            continue
        inputs, outputs = c.data_sets[0]
        names = [i.name for i in c.model.graph.input if i.name not in {t.name for t in c.model.graph.initializer}]
        out[c.name] = Case(c.name, c.model, dict(zip(names, inputs)), list(outputs), c.rtol, c.atol)
    return out


def file_case_names() -> list[str]:
    return [f"{suite}/{d.name}" for suite in FILE_SUITES for d in sorted((DATA / suite).iterdir()) if (d / "model.onnx").exists()]


def file_case(name: str) -> Case:
    folder = DATA / name
    model = onnx.load(str(folder / "model.onnx"))
    data = folder / "test_data_set_0"
    inits = {t.name for t in model.graph.initializer}
    declared = [v for v in model.graph.input if v.name not in inits]
    inputs = {v.name: _read(data / f"input_{i}.pb", v.type) for i, v in enumerate(declared) if (data / f"input_{i}.pb").exists()}
    expected = [_read(data / f"output_{i}.pb", v.type) for i, v in enumerate(model.graph.output) if (data / f"output_{i}.pb").exists()]
    return Case(name.split("/", 1)[1], model, inputs, expected)


def _read(path: Path, t: onnx.TypeProto) -> Any:
    kind = t.WhichOneof("value")
    message: Any = {"sequence_type": onnx.SequenceProto, "optional_type": onnx.OptionalProto, "map_type": onnx.MapProto}.get(
        kind, onnx.TensorProto
    )()
    message.ParseFromString(path.read_bytes())
    convert = {
        onnx.SequenceProto: numpy_helper.to_list,
        onnx.OptionalProto: numpy_helper.to_optional,
        onnx.MapProto: numpy_helper.to_dict,
    }.get(type(message), numpy_helper.to_array)
    return convert(message)


def plain_run(case: Case) -> list[Any]:
    """onnxruntime's own outputs of the whole model (optimizations off, as graph-dap's engines)."""
    sess = ort.InferenceSession(case.model.SerializeToString(), session_options("none"), providers=["CPUExecutionProvider"])
    return sess.run(None, case.inputs)


def close(got: Any, want: Any, rtol: float, atol: float) -> bool:
    """As onnx's backend test compares: allclose per element, strings equal, sequences item by item."""
    if isinstance(want, list):
        return isinstance(got, list) and len(got) == len(want) and all(close(g, w, rtol, atol) for g, w in zip(got, want))
    if isinstance(want, dict):
        return isinstance(got, dict) and got.keys() == want.keys() and all(close(got[k], want[k], rtol, atol) for k in want)
    if want is None or got is None:
        return want is None and got is None
    g, w = np.asarray(got), np.asarray(want)
    if g.shape != w.shape:
        return False
    if w.dtype.kind in "OUS":
        return [str(x) for x in g.reshape(-1)] == [str(x) for x in w.reshape(-1)]
    if w.dtype.kind in "fc" or g.dtype.kind in "fc":
        return bool(np.allclose(g.astype(np.complex128 if w.dtype.kind == "c" else np.float64), w, rtol=rtol, atol=atol, equal_nan=True))
    return bool(np.array_equal(g, w))


def bit_equal(got: Any, want: Any) -> bool:
    if isinstance(want, list):
        return isinstance(got, list) and len(got) == len(want) and all(bit_equal(g, w) for g, w in zip(got, want))
    if want is None or got is None:
        return want is None and got is None
    g, w = np.asarray(got), np.asarray(want)
    if g.dtype != w.dtype or g.shape != w.shape:
        return False
    if w.dtype.kind in "OUS":
        return g.tolist() == w.tolist()
    return bool(np.array_equal(g.reshape(-1).view(np.uint8), w.reshape(-1).view(np.uint8)))


def float16_ulps(got: Any, want: Any) -> int | None:
    """How many float16 steps apart two float16 tensors are at most; None when they are not both float16."""
    g, w = np.asarray(got), np.asarray(want)
    if g.dtype != np.float16 or w.dtype != np.float16 or g.shape != w.shape:
        return None
    gi, wi = g.view(np.int16).astype(np.int32), w.view(np.int16).astype(np.int32)
    gi = np.where(gi < 0, -(gi & 0x7FFF), gi)
    wi = np.where(wi < 0, -(wi & 0x7FFF), wi)
    return int(np.abs(gi - wi).max()) if g.size else 0


def all_cases() -> Iterator[str]:
    yield from sorted(node_cases())
    yield from file_case_names()
