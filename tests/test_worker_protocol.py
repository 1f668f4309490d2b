"""The worker's messages: one definition for both sides, checked on decoding, errors that keep their kind."""

from __future__ import annotations

import asyncio
import socket
import threading
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest
from models import chain_files, init, make_model, reference, tensor, zipmap_model
from onnx import helper

from graph_dap import errors
from graph_dap.errors import ExpressionError, GraphDapError, ProtocolError, UnknownNameError, ValueNotFoundError, error_of_kind
from graph_dap.worker import protocol as p
from graph_dap.worker.client import WorkerClient
from graph_dap.worker.server import serve
from graph_dap.worker.service import WorkerService, error_kind


def test_messages_survive_encoding() -> None:
    stop = p.StopInfo(
        "end",
        p.NodeRef("conv1", "conv1", "Conv", 0, (p.PathStep("loop", "body", 3),)),
        None,
        "scale1",
        details={"ort_message": "x"},
        breakpoint_ids=(2, 3),
        repeat=p.Repeat(2, 2, (1.5, 2.0), 1.75, True, "ran 2 of 2 times"),
        comparison=("compared 4 values",),
    )
    view = p.TensorView("a", "int64", (2, 3), (2, 3), (), (1, 1), ((1, 2, 3), (4, 5, 6)), 1, 6, 3.5, 0, 0, 0, p.Histogram((1.0, 6.0), (6,)))
    args = p.LoadArgs("m.onnx", {"x": [[1.0, 2.0]]}, {"n": 2}, ("CPUExecutionProvider",), tolerance=p.Tolerance(fail_if=("cosine<0.99",)))
    source = p.NodeSourceInfo(
        "node_softmax",
        "python",
        (p.SourceFrameInfo("Attention.forward", "/h/m.py", 18, "forward", "att = F.softmax(att)", False, "h.0.attn", "m.Attention", ("node_softmax",)),
         p.SourceFrameInfo("TinyModel.forward", "/h/m.py", 41, "forward", module="", cls="m.TinyModel")),
    )  # fmt: skip
    for message in (stop, view, args, p.RunArgs(p.RunCommand.GOTO, "relu1"), p.MemoryRead(b"\x00\x01", 8, 2), source):
        assert p.decode(type(message), p.encode(message)) == message
        assert p.encode(message, type(message)) == p.encode(message)  # the typed encoder writes the same
    assert p.encode(p.RunArgs(p.RunCommand.STEP)) == {"command": "step", "target": None, "iterations": 1}


def test_numbers_are_taken_as_their_type_says() -> None:
    assert p.decode(p.Histogram, {"edges": [0, 1.5], "counts": [3]}) == p.Histogram((0.0, 1.5), (3,))
    assert type(p.decode(p.Histogram, {"edges": [0, 1.5], "counts": [3]}).edges[0]) is float
    cells = p.decode(tuple[tuple[int | float | str, ...], ...], [[1, 2.5, "nan"]])
    assert cells == ((1, 2.5, "nan"),) and type(cells[0][0]) is int


_SUMMARY = {"name": "x", "text": "", "type": "tensor(float)", "dtype": "float32", "shape": [1], "size": 1}


@pytest.mark.parametrize(
    ("kind", "data", "said"),
    [
        (p.LoadArgs, {"model": "m.onnx", "dims": {"n": "2"}}, "LoadArgs.dims['n']: expected int or tuple[int, ...], got str '2'"),
        (p.LoadArgs, {"dims": {}}, "LoadArgs: missing field 'model' of LoadArgs"),
        (p.RunArgs, {"command": "fly"}, "RunArgs.command: expected one of 'start', "),
        (p.ChildrenArgs, {"name": "x", "count": True}, "ChildrenArgs.count: expected an integer, got bool True"),
        (p.StopInfo, {"reason": "end", "node": {"id": "n", "name": "n"}, "current": None, "last_node": None}, "StopInfo.node: missing field 'op_type'"),
        (p.Summary, {"name": "x", "text": "", "type": "", "dtype": "", "shape": [1], "size": 1, "color": 1}, "unknown field 'color'"),
        (p.SUMMARIES.result, [5], "tuple[Summary, ...][0]: expected a map of Summary, got int 5"),
        (p.Summary, {**_SUMMARY, "stats": [["min", "0"], ["max", 1]]}, "Summary.stats[1][1]: expected a string, got int 1"),
        (p.Histogram, {"edges": [0.5, "1"], "counts": []}, "Histogram.edges[1]: expected a number, got str '1'"),
        (tuple[tuple[int | float | str, ...], ...], [[1, 2.5], [3, None]], "[1][1]: expected int or float or str, got null"),
    ],
)
def test_decoding_says_what_is_wrong(kind: Any, data: Any, said: str) -> None:
    with pytest.raises(ProtocolError) as raised:
        p.decode(kind, data)
    assert said in str(raised.value)


def test_every_call_has_its_handler() -> None:
    calls = WorkerService(lambda message: None).calls
    for name, method in p.METHODS.items():
        assert callable(calls.get(name)), name
        assert isinstance(method.args, type)
    assert set(calls) == set(p.METHODS)


def test_every_error_class_crosses_with_its_kind() -> None:
    classes = [c for c in vars(errors).values() if isinstance(c, type) and issubclass(c, GraphDapError)]
    assert len(classes) > 10
    for cls in classes:
        made = error_of_kind(cls.__name__, "what went wrong")
        assert type(made) is cls and str(made) == "what went wrong"
    assert type(error_of_kind("NoSuchKind", "m")) is GraphDapError

    class Local(ValueNotFoundError):
        pass

    assert error_kind(Local("m")) == "ValueNotFoundError"  # the nearest class the other side knows


def test_bad_calls_are_answered_with_their_kind(capsys: pytest.CaptureFixture[str]) -> None:
    service = WorkerService(lambda message: None)
    assert service.handle({"id": 1, "method": "fly"})["error"] == {"kind": "ProtocolError", "message": "unknown worker method 'fly'"}
    bad = service.handle({"id": 2, "method": "children", "args": {"name": 3}})["error"]
    assert bad == {"kind": "ProtocolError", "message": "the arguments of children.name: expected a string, got int 3"}
    assert service.handle({"id": 3, "method": "values"})["error"] == {"kind": "NotLoadedError", "message": "no model is loaded"}

    def broken(_: p.NoArgs) -> None:
        raise ZeroDivisionError("a bug of ours")

    service.calls["values"] = broken
    reply = service.handle({"id": 4, "method": "values"})["error"]
    assert reply["kind"] == "InternalError" and "ZeroDivisionError('a bug of ours')" in reply["message"]
    assert "Traceback" in capsys.readouterr().err


def _with_worker(body: Callable[[WorkerClient], Awaitable[None]]) -> None:
    """Run ``body`` with a client of a worker served in this process, over a socket pair."""
    ours, theirs = socket.socketpair()
    server = threading.Thread(target=serve, args=(theirs.recv, theirs.sendall), daemon=True)
    server.start()

    async def session() -> None:
        reader, writer = await asyncio.open_connection(sock=ours)
        client = WorkerClient(reader, writer, None, "the worker in this process")
        try:
            await body(client)
        finally:
            await client.close()

    asyncio.run(asyncio.wait_for(session(), 60))
    server.join(10)
    theirs.close()
    assert not server.is_alive()


def test_typed_calls_and_errors_raised_by_type(tmp_path: Path) -> None:
    model, inputs, feeds = chain_files(tmp_path)
    truth = reference(model, feeds)

    async def body(worker: WorkerClient) -> None:
        graph = await worker.load(p.LoadArgs(str(model), str(inputs), write_listing=False))
        assert [n.id for n in graph.nodes] == ["conv", "relu", "add", "mul", "sigmoid", "side"]
        stop = await worker.run(p.RunArgs(p.RunCommand.START))
        assert stop.reason == "entry" and stop.current == "conv"
        stop = await worker.run(p.RunArgs(p.RunCommand.STEP))
        assert stop.reason == "step" and stop.current == "relu" and stop.last_node == "conv"
        assert "c" in (await worker.values()).computed
        (summary,) = await worker.summaries(p.SummariesArgs(("c",)))
        assert summary.shape == (1, 4, 8, 8) and dict(summary.stats)["max"] == f"{truth['c'].max():.7g}"
        page = await worker.children(p.ChildrenArgs("c", (0, 1, 2)))
        assert page.total == 8 and [c.scalar for c in page.items] == [f"{v:.7g}" for v in truth["c"][0, 1, 2]]
        memory = await worker.read_memory(p.ReadMemoryArgs("c", 4, 8))
        assert memory.data == truth["c"].tobytes()[4:12] and memory.size == truth["c"].nbytes
        value = await worker.evaluate(p.EvaluateArgs("c.sum()"))
        assert float(value.text) == pytest.approx(float(truth["c"].sum()), rel=1e-5)
        view = await worker.tensor_view(p.TensorViewArgs("c", (0, 1)))
        assert np.array_equal(np.array(view.data, np.float32), truth["c"][0, 1])

        with pytest.raises(ValueNotFoundError, match="no value named 'nope'"):
            await worker.tensor_view(p.TensorViewArgs("nope"))
        with pytest.raises(UnknownNameError, match="unknown value 'nope'"):
            await worker.evaluate(p.EvaluateArgs("nope + 1"))
        with pytest.raises(ExpressionError):
            await worker.evaluate(p.EvaluateArgs("__import__('os')"))
        (later,) = await worker.summaries(p.SummariesArgs(("y",)))
        assert not later.available and "sigmoid (Sigmoid) has not run" in later.text
        with pytest.raises(ValueNotFoundError, match="not computed yet"):
            await worker.evaluate(p.EvaluateArgs("y"))
        stop = await worker.run(p.RunArgs(p.RunCommand.CONTINUE))
        assert stop.reason == "end" and stop.node is None
        y, side = await worker.outputs()
        assert y.name == "y" and y.text.startswith("float32[1,4,8,8]") and side.name == "side"

    _with_worker(body)


def test_outputs_are_the_runs_own(tmp_path: Path) -> None:
    """The outputs are as the user's own optimized run computed them (no second run of the model with the
    original nodes). Here the two differ: the Conv folded with its BatchNormalization (a scale of 1e30)
    computes inf - inf = NaN where the original nodes give 0."""
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], name="conv"), helper.make_node("BatchNormalization", ["c", "g", "b", "m", "v"], ["y"], name="bn")]
    inits = [init("w", np.array([[[[1.0]], [[-1.0]]]], np.float32)), init("g", np.array([1e30], np.float32))]
    inits += [init("b", np.zeros(1, np.float32)), init("m", np.zeros(1, np.float32)), init("v", np.ones(1, np.float32))]
    model, inputs = tmp_path / "folded.onnx", tmp_path / "x.npz"
    onnx.save(make_model(nodes, [tensor("x", [1, 2, 2, 2])], [tensor("y", [1, 1, 2, 2])], inits), str(model))
    np.savez(inputs, x=np.full((1, 2, 2, 2), 1e10, np.float32))

    async def body(worker: WorkerClient) -> None:
        await worker.load(p.LoadArgs(str(model), str(inputs), write_listing=False, opt_level="all"))
        await worker.run(p.RunArgs(p.RunCommand.START))
        assert (await worker.run(p.RunArgs(p.RunCommand.CONTINUE))).reason == "end"
        (as_run,) = await worker.outputs()
        assert dict(as_run.stats)["nan"] == "4"  # what the user's own optimized run gives

    _with_worker(body)


def test_a_sequence_of_maps_and_strings_cross_as_converters_write_them(tmp_path: Path) -> None:
    """skl2onnx's ZipMap output: the outputs' summaries, a map's items by key, evaluated by key; string
    labels as ``string``; a declared shape that symbolic inference wrote as an expression shows ``?``."""
    model = zipmap_model(["cat", "dog", "bird"])
    model.graph.output[0].type.tensor_type.shape.dim[0].dim_param = "floor(floor(height/2 - 1/2)/2) + 1"
    path, inputs = tmp_path / "zip.onnx", tmp_path / "x.npz"
    onnx.save(model, str(path))
    x = np.array([[1.0, 2.0, 0.5], [0.1, 0.2, 3.0]], np.float32)
    np.savez(inputs, x=x)
    truth = reference(path, {"x": x})

    async def body(worker: WorkerClient) -> None:
        await worker.load(p.LoadArgs(str(path), str(inputs), write_listing=False))
        await worker.run(p.RunArgs(p.RunCommand.START))
        label, probs = await worker.summaries(p.SummariesArgs(("label", "probs")))
        assert label.text == "int64[?] not computed yet (argmax (ArgMax) has not run)"  # not the expression
        assert probs.type == "seq(map(string,tensor(float)))" and probs.text.startswith("seq(map(string,float32)) not computed yet")
        assert (await worker.run(p.RunArgs(p.RunCommand.CONTINUE))).reason == "end"
        _, out = await worker.outputs()
        assert out.kind == "sequence" and out.size == 2 and out.text.startswith("seq(map(string,float32)) len=2 [{'bird': ")  # onnxruntime sorts the keys
        assert (await worker.evaluate(p.EvaluateArgs("probs"))).value == "probs"
        (first,) = (await worker.children(p.ChildrenArgs("probs", (), 0, 1))).items
        assert first.summary is not None and first.summary.kind == "map" and first.summary.type == "map(string,tensor(float))"
        items = (await worker.children(p.ChildrenArgs("probs", (1,), 0, 0))).items
        assert [(c.key, c.scalar) for c in items] == [(repr(k), f"{v:.7g}") for k, v in truth["probs"][1].items()]
        dog = await worker.evaluate(p.EvaluateArgs("probs[1]['dog']"))
        assert float(dog.text) == pytest.approx(truth["probs"][1]["dog"])
        with pytest.raises(ExpressionError, match="the map has no key 'cow'"):
            await worker.evaluate(p.EvaluateArgs("probs[1]['cow']"))

    _with_worker(body)
