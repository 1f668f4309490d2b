"""Running nodes through onnxruntime, one node at a time, sessions cached.

Each node runs as a one-node model built with the concrete types of the values
it is fed, so what the debugger shows is exactly what onnxruntime computes. The
sessions share one global thread pool: per-session pools starve each other.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import onnx
import onnxruntime as ort
from onnx import helper, numpy_helper

from .errors import GraphDapError, NodeExecutionError
from .graph import Graph, Node

_pool_lock = threading.Lock()
_pool_ready = False

OPT_LEVELS = {
    "none": ort.GraphOptimizationLevel.ORT_DISABLE_ALL,
    "basic": ort.GraphOptimizationLevel.ORT_ENABLE_BASIC,
    "extended": ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED,
    "all": ort.GraphOptimizationLevel.ORT_ENABLE_ALL,
}


def ensure_global_thread_pool() -> None:
    """Create onnxruntime's process-wide thread pool once (before any session uses it)."""
    global _pool_ready
    with _pool_lock:
        if _pool_ready:
            return
        try:
            ort.set_global_thread_pool_sizes(0, 1)
        except Exception:  # already set by someone else in this process
            pass
        try:
            # One CPU arena for every session: each session's own arena would keep its own peak.
            info = ort.OrtMemoryInfo("Cpu", ort.OrtAllocatorType.ORT_ARENA_ALLOCATOR, 0, ort.OrtMemType.DEFAULT)
            ort.create_and_register_allocator(info, None)
        except Exception:  # registered already
            pass
        _pool_ready = True


def session_options(opt_level: str = "none") -> ort.SessionOptions:
    """Options every graph-dap session uses: the global pool, quiet logs, the given optimization level."""
    ensure_global_thread_pool()
    so = ort.SessionOptions()
    so.use_per_session_threads = False
    so.log_severity_level = 3
    so.graph_optimization_level = OPT_LEVELS[opt_level]
    so.add_session_config_entry("session.use_env_allocators", "1")
    return so


def check_providers(providers: Sequence[str] | None) -> list[str]:
    """The providers to use, checked against what this onnxruntime build offers."""
    available = ort.get_available_providers()
    if not providers:
        return ["CPUExecutionProvider"]
    out = []
    for p in providers:
        name = p if p.endswith("ExecutionProvider") else f"{p}ExecutionProvider"
        match = next((a for a in available if a.lower() == name.lower()), None)
        if match is None:
            raise GraphDapError(f"execution provider '{p}' is not available here (available: {', '.join(available)})")
        out.append(match)
    if "CPUExecutionProvider" not in out:
        out.append("CPUExecutionProvider")
    return out


def type_proto_of(value: Any) -> onnx.TypeProto:
    """The ONNX type of a run-time value: a tensor with its concrete shape, or a sequence."""
    if isinstance(value, list):
        elem = np.asarray(value[0]).dtype if value else np.dtype(np.float32)
        return helper.make_sequence_type_proto(
            helper.make_tensor_type_proto(helper.np_dtype_to_tensor_dtype(elem), None)
        )
    a = np.asarray(value)
    return helper.make_tensor_type_proto(helper.np_dtype_to_tensor_dtype(a.dtype), list(a.shape))


def _signature(value: Any) -> tuple[Any, ...]:
    if isinstance(value, list):
        return ("seq", str(value[0].dtype) if value else "?")
    a = np.asarray(value)
    return (a.dtype.str, a.shape)


class NodeRunner:
    """Runs single nodes of one graph; sessions cached by (node, input signature)."""

    def __init__(self, graph: Graph, providers: Sequence[str] | None = None, opt_level: str = "none") -> None:
        self.graph = graph
        self.providers = check_providers(providers)
        self.opt_level = opt_level
        self._sessions: dict[tuple[Any, ...], ort.InferenceSession] = {}
        self.sessions_built = 0

    def one_node_model(self, node: Node, feeds: Mapping[str, Any], constants: Mapping[str, Any]) -> onnx.ModelProto:
        """A model holding only ``node``: inputs typed from ``feeds``, ``constants`` embedded.

        Weights are embedded as the whole model embeds them, so that onnxruntime
        takes the same kernels (it pre-packs constant weights) and the values match.
        """
        m = self.graph.model
        inputs = [helper.make_value_info(name, type_proto_of(feeds[name])) for name in node.all_inputs if name in feeds]
        inits = [_tensor_proto(name, constants[name]) for name in node.all_inputs if name not in feeds]
        outputs = [helper.make_value_info(o, onnx.TypeProto()) for o in node.outputs if o]
        g = helper.make_graph([node.proto], f"node_{node.order}", inputs, outputs, inits)
        model = helper.make_model(g, opset_imports=list(m.opset_import), ir_version=max(m.ir_version, 4))
        model.functions.extend(m.functions)
        return model

    def _session(self, node: Node, feeds: Mapping[str, Any], constants: Mapping[str, Any], version: int) -> ort.InferenceSession:
        key = (node.order, version) + tuple(_signature(feeds[n]) if n in feeds else n for n in node.all_inputs)
        sess = self._sessions.get(key)
        if sess is None:
            model = self.one_node_model(node, feeds, constants)
            try:
                sess = ort.InferenceSession(
                    model.SerializeToString(), session_options(self.opt_level), providers=self.providers
                )
            except Exception as e:
                raise NodeExecutionError(node.id, node.op_type, _ort_message(e)) from None
            self._sessions[key] = sess
            self.sessions_built += 1
        return sess

    def run(
        self,
        node: Node,
        feeds: Mapping[str, Any],
        constants: Mapping[str, Any] | None = None,
        version: int = 0,
        run_options: ort.RunOptions | None = None,
    ) -> dict[str, Any]:
        """Outputs of ``node`` by output name; each input is in ``feeds`` or ``constants``."""
        constants = constants or {}
        sess = self._session(node, feeds, constants, version)
        names = [o for o in node.outputs if o]
        try:
            results = sess.run(names, {n: feeds[n] for n in node.all_inputs if n in feeds}, run_options)
        except Exception as e:
            raise NodeExecutionError(node.id, node.op_type, _ort_message(e)) from None
        return dict(zip(names, results))


def _tensor_proto(name: str, value: Any) -> onnx.TensorProto:
    if isinstance(value, onnx.TensorProto):
        return value
    return numpy_helper.from_array(np.asarray(value), name)


def _ort_message(e: BaseException) -> str:
    text = str(e).strip()
    # onnxruntime prefixes messages with "[ONNXRuntimeError] : 2 : INVALID_ARGUMENT : "
    if text.startswith("[ONNXRuntimeError]"):
        parts = text.split(" : ", 3)
        text = parts[-1] if len(parts) == 4 else text
    return text.splitlines()[0] if len(text) > 2000 else text
