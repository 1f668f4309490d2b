"""Hostile and broken models, each made in a folder of its own, with what graph-dap must answer.

Each builder writes its model under ``folder`` and returns the path; :data:`CASES` pairs
it with a fragment of the one-line refusal. ``RELIABILITY.md`` lists them with their
messages (``python tests/hostile_models.py`` prints the table).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def _save(folder: Path, nodes: list[onnx.NodeProto], inputs: list[onnx.ValueInfoProto], outputs: list[onnx.ValueInfoProto],
          initializers: list[onnx.TensorProto] | None = None, opsets: dict[str, int] | None = None, name: str = "model",
          ir_version: int = 8) -> Path:  # fmt: skip
    graph = helper.make_graph(nodes, name, inputs, outputs, initializers or [])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid(d, v) for d, v in (opsets or {"": 17}).items()])
    model.ir_version = ir_version
    path = folder / f"{name}.onnx"
    path.write_bytes(model.SerializeToString())
    return path


def _vi(name: str, shape: list[int | str | None] | None = (2,), dtype: int = TensorProto.FLOAT) -> onnx.ValueInfoProto:  # type: ignore[assignment]
    return helper.make_tensor_value_info(name, dtype, shape)


def _relu(folder: Path, **kw: object) -> Path:
    return _save(folder, [helper.make_node("Relu", ["x"], ["y"], name="relu")], [_vi("x")], [_vi("y")], **kw)  # type: ignore[arg-type]


# -- the file itself --------------------------------------------------------------------


def not_protobuf(folder: Path) -> Path:
    path = folder / "text.onnx"
    path.write_text("this is not an ONNX model, just some text\n" * 20)
    return path


def empty_file(folder: Path) -> Path:
    path = folder / "empty.onnx"
    path.write_bytes(b"")
    return path


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        byte, n = n & 0x7F, n >> 7
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


def _field(number: int, payload: bytes) -> bytes:
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def _nested(inner: bytes, depth: int) -> bytes:
    """``inner`` wrapped ``depth`` times in ``_field(4, _field(1, ...))``: each level's two headers, outermost
    first, then ``inner`` (wrapping the bytes level by level copied them at each level: 40 GB for the bomb)."""
    headers = []
    size = len(inner)
    for _ in range(depth):
        elem = _varint(1 << 3 | 2) + _varint(size)  # field 1 (elem_type), length-delimited
        size += len(elem)
        seq = _varint(4 << 3 | 2) + _varint(size)  # field 4 (sequence_type), length-delimited
        size += len(seq)
        headers.append(seq + elem)
    return b"".join(reversed(headers)) + inner


def nesting_bomb(folder: Path, depth: int = 100_000) -> Path:
    """A graph input whose type is a sequence of a sequence of ... 100,000 deep (800 KB of protobuf)."""
    inner = _field(1, _varint(1 << 3) + _varint(TensorProto.FLOAT))  # TypeProto.tensor_type {elem_type: FLOAT}
    inner = _nested(inner, depth)  # TypeProto.sequence_type {elem_type: ...}, depth times
    value_info = _field(1, b"x") + _field(2, inner)  # ValueInfoProto {name, type}
    graph = _field(2, b"bomb") + _field(11, value_info) + _field(12, _field(1, b"x"))  # GraphProto {name, input, output}
    model = _varint(1 << 3) + _varint(8) + _field(7, graph) + _field(8, _field(1, b"") + _varint(2 << 3) + _varint(17))
    path = folder / "bomb.onnx"
    path.write_bytes(model)
    return path


# -- shapes and tensors -----------------------------------------------------------------


def huge_input(folder: Path) -> Path:
    """An input declared float32[1000000,1000000] (4 TB): no inputs given, so graph-dap would have to make it up."""
    nodes = [helper.make_node("Relu", ["x"], ["y"], name="relu")]
    return _save(folder, nodes, [_vi("x", [1_000_000, 1_000_000])], [_vi("y", [1_000_000, 1_000_000])], name="huge_input")


def huge_initializer(folder: Path) -> Path:
    """An initializer declaring 10^12 float32 elements with no data at all."""
    w = onnx.TensorProto(name="w", data_type=TensorProto.FLOAT, dims=[1_000_000, 1_000_000])
    nodes = [helper.make_node("Add", ["x", "w"], ["y"], name="add")]
    return _save(folder, nodes, [_vi("x", [1_000_000, 1_000_000])], [_vi("y")], [w], name="huge_initializer")


def negative_dim_initializer(folder: Path) -> Path:
    w = onnx.TensorProto(name="w", data_type=TensorProto.FLOAT, dims=[2, -3])
    nodes = [helper.make_node("Add", ["x", "w"], ["y"], name="add")]
    return _save(folder, nodes, [_vi("x")], [_vi("y")], [w], name="negative_dim")


def overflowing_dims(folder: Path) -> Path:
    """An initializer of shape [2**62, 2**62]: more elements than an int64 counts."""
    w = onnx.TensorProto(name="w", data_type=TensorProto.FLOAT, dims=[2**62, 2**62], raw_data=b"\0" * 16)
    nodes = [helper.make_node("Add", ["x", "w"], ["y"], name="add")]
    return _save(folder, nodes, [_vi("x")], [_vi("y")], [w], name="overflow")


def overflowing_input(folder: Path) -> Path:
    """An input declared float32[2**62, 4]: its size overflows int64."""
    nodes = [helper.make_node("Relu", ["x"], ["y"], name="relu")]
    return _save(folder, nodes, [_vi("x", [2**62, 4])], [_vi("y")], name="overflow_input")


def short_initializer(folder: Path) -> Path:
    """An initializer declaring float32[1000] holding the bytes of 3 floats."""
    w = onnx.TensorProto(name="w", data_type=TensorProto.FLOAT, dims=[1000], raw_data=np.ones(3, np.float32).tobytes())
    nodes = [helper.make_node("Add", ["x", "w"], ["y"], name="add")]
    return _save(folder, nodes, [_vi("x", [1000])], [_vi("y")], [w], name="short")


# -- names and structure ----------------------------------------------------------------


def duplicate_value(folder: Path) -> Path:
    nodes = [helper.make_node("Relu", ["x"], ["y"], name="a"), helper.make_node("Neg", ["x"], ["y"], name="b")]
    return _save(folder, nodes, [_vi("x")], [_vi("y")], name="duplicate_value")


def duplicate_input(folder: Path) -> Path:
    nodes = [helper.make_node("Relu", ["x"], ["y"], name="a")]
    return _save(folder, nodes, [_vi("x"), _vi("x")], [_vi("y")], name="duplicate_input")


def cycle_through_subgraph(folder: Path) -> Path:
    """Node `branch` (If) reads, inside its then_branch, `b`, which node `after` computes from `branch`'s output."""
    then_g = helper.make_graph([helper.make_node("Identity", ["b"], ["t"], name="inner")], "then", [], [_vi("t")])
    else_g = helper.make_graph([helper.make_node("Identity", ["x"], ["e"], name="inner_else")], "else", [], [_vi("e")])
    nodes = [
        helper.make_node("If", ["c"], ["a"], name="branch", then_branch=then_g, else_branch=else_g),
        helper.make_node("Relu", ["a"], ["b"], name="after"),
    ]
    return _save(folder, nodes, [_vi("x"), _vi("c", [], TensorProto.BOOL)], [_vi("b")], name="cycle")


def subgraph_reads_missing(folder: Path) -> Path:
    then_g = helper.make_graph([helper.make_node("Identity", ["ghost"], ["t"], name="inner")], "then", [], [_vi("t")])
    else_g = helper.make_graph([helper.make_node("Identity", ["x"], ["e"], name="inner_else")], "else", [], [_vi("e")])
    nodes = [helper.make_node("If", ["c"], ["y"], name="branch", then_branch=then_g, else_branch=else_g)]
    return _save(folder, nodes, [_vi("x"), _vi("c", [], TensorProto.BOOL)], [_vi("y")], name="missing")


# -- external data ----------------------------------------------------------------------


def _external(folder: Path, location: str, offset: int = 0, length: int | None = 16, name: str = "external") -> Path:
    w = numpy_helper.from_array(np.ones(4, np.float32), "w")
    w.ClearField("raw_data")
    w.data_location = TensorProto.EXTERNAL
    entries = {"location": location, "offset": str(offset)} | ({"length": str(length)} if length is not None else {})
    for k, v in entries.items():
        w.external_data.add(key=k, value=v)
    nodes = [helper.make_node("Add", ["x", "w"], ["y"], name="add")]
    return _save(folder, nodes, [_vi("x", [4])], [_vi("y", [4])], [w], name=name)


def _outside(folder: Path) -> Path:
    """A data file beside the model's folder (not in it): what a hostile model tries to read."""
    secret = folder.parent / f"{folder.name}-secret.bin"
    secret.write_bytes(np.arange(4, dtype=np.float32).tobytes())
    return secret


def external_dotdot(folder: Path) -> Path:
    return _external(folder, f"../{_outside(folder).name}", name="dotdot")


def external_absolute(folder: Path) -> Path:
    return _external(folder, str(_outside(folder)), name="absolute")


def external_symlink(folder: Path) -> Path:
    os.symlink(_outside(folder), folder / "weights.bin")
    return _external(folder, "weights.bin", name="symlink")


def external_truncated(folder: Path) -> Path:
    (folder / "weights.bin").write_bytes(b"\0" * 10)  # 16 bytes wanted
    return _external(folder, "weights.bin", name="truncated")


def external_missing(folder: Path) -> Path:
    return _external(folder, "weights.bin", name="no_data")


def external_name_too_long(folder: Path) -> Path:
    """External data named with 300 characters: more than a file name may have (found by the worker fuzz, for models)."""
    return _external(folder, "w" * 300 + ".bin", name="long_name")


# -- what onnxruntime supports -----------------------------------------------------------


def opset_too_new(folder: Path) -> Path:
    return _relu(folder, opsets={"": 40}, name="opset40")


def ir_too_new(folder: Path) -> Path:
    return _relu(folder, ir_version=99, name="ir99")


def unknown_domain(folder: Path) -> Path:
    nodes = [helper.make_node("Frobnicate", ["x"], ["y"], name="custom", domain="com.example.secret")]
    return _save(folder, nodes, [_vi("x")], [_vi("y")], opsets={"": 17, "com.example.secret": 1}, name="custom_domain")


def unknown_operator(folder: Path) -> Path:
    nodes = [helper.make_node("Frobnicate", ["x"], ["y"], name="custom")]
    return _save(folder, nodes, [_vi("x")], [_vi("y")], name="unknown_op")


def operator_too_new_for_opset(folder: Path) -> Path:
    """Gelu exists from opset 20; the model imports opset 13."""
    nodes = [helper.make_node("Gelu", ["x"], ["y"], name="gelu")]
    return _save(folder, nodes, [_vi("x")], [_vi("y")], opsets={"": 13}, name="gelu13")


@dataclass(frozen=True)
class Case:
    """One hostile model: how it is made, and a fragment of the refusal it must get."""

    name: str
    build: Callable[[Path], Path]
    expected: str


CASES = [
    Case("not protobuf at all", not_protobuf, "cannot read"),
    Case("an empty file", empty_file, "holds no ONNX graph"),
    Case("protobuf nesting bomb (100,000 levels)", nesting_bomb, "cannot read"),
    Case("input of 10^12 elements, no inputs given", huge_input, "too large to make up"),
    Case("initializer of 10^12 elements, no data", huge_initializer, "but holds no data"),
    Case("initializer with a negative dim", negative_dim_initializer, "negative dimension"),
    Case("initializer with dims overflowing int64", overflowing_dims, "more elements than an int64 counts"),
    Case("input with dims overflowing int64", overflowing_input, "too large to make up"),
    Case("initializer shorter than its shape", short_initializer, "but holds 12 bytes of data, not 4,000"),
    Case("a value produced twice", duplicate_value, "produced twice"),
    Case("a graph input declared twice", duplicate_input, "declared twice"),
    Case("a cycle through a subgraph", cycle_through_subgraph, "cycle"),
    Case("a subgraph reading a value that does not exist", subgraph_reads_missing, "reads 'ghost'"),
    Case("external data at ../", external_dotdot, "outside the model's folder"),
    Case("external data at an absolute path", external_absolute, "outside the model's folder"),
    Case("external data through a symlink out of the folder", external_symlink, "outside the model's folder"),
    Case("truncated external data", external_truncated, "truncated"),
    Case("missing external data", external_missing, "external data file not found"),
    Case("external data named with 300 characters", external_name_too_long, "File name too long"),
    Case("an opset onnxruntime lacks (40)", opset_too_new, "supports 'ai.onnx' up to opset"),
    Case("an IR version onnxruntime lacks (99)", ir_too_new, "reads IR versions up to"),
    Case("an unknown domain", unknown_domain, "domain 'com.example.secret' that onnxruntime does not have"),
    Case("an unknown operator", unknown_operator, "an operator onnxruntime does not know"),
    Case("an operator newer than the model's opset", operator_too_new_for_opset, "not in opset 13"),
]


def make(case: Case, root: Path) -> Path:
    """Build ``case`` in a folder of its own under ``root``."""
    folder = root / case.build.__name__
    folder.mkdir(parents=True, exist_ok=True)
    return case.build(folder)


def _table() -> str:
    """The markdown table of RELIABILITY.md: each case and the line ``graph-dap run`` answers it with."""
    import contextlib
    import io
    import tempfile

    from graph_dap import cli

    rows = ["| model | exit | what graph-dap says |", "| --- | --- | --- |"]
    with tempfile.TemporaryDirectory() as root:
        for case in CASES:
            path = make(case, Path(root))
            err = io.StringIO()
            with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
                code = cli.main(["run", str(path)])
            line = err.getvalue().strip().replace(root, "DIR").replace("|", "\\|")
            rows.append(f"| {case.name} | {code} | `{line}` |")
    return "\n".join(rows)


if __name__ == "__main__":
    print(_table())
