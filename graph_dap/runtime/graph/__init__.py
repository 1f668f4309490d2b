"""The graph model: scopes of nodes in run order, their ids, values, producers and consumers.

A :class:`Graph` is built once from an ONNX model and never changes; everything a
debugger needs to name (a node, a value, its producer) is looked up here. Names
follow onnx_ir: ``node.op_type``, ``node.inputs``, ``graph.producer(value)``.

A model is a tree of :class:`Scope` s: the main graph, and for every If, Loop and Scan
node the graphs of its attributes (``then_branch``, ``else_branch``, ``body``), and for
every call of a model-local function its body at that call site. A node's ``path``
names the scopes it is nested in, outermost first; ``Graph`` answers for the main
scope as before and finds nodes of every scope by id.

``model`` holds the nodes, scopes and the graph; ``types`` what the model declares about
values (element types, shapes, attributes); ``order`` how nodes are read from the protobuf
(run order, shared names, what subgraphs read from outside).
"""

from graph_dap.runtime.graph.model import CONTROL_FLOW_OPS, Graph, Lookup, Node, Scope, ScopeStep
from graph_dap.runtime.graph.types import Dim, ValueInfo, attribute_value, dtype_name, value_info

__all__ = [
    "CONTROL_FLOW_OPS",
    "Dim",
    "Graph",
    "Lookup",
    "Node",
    "Scope",
    "ScopeStep",
    "ValueInfo",
    "attribute_value",
    "dtype_name",
    "value_info",
]
