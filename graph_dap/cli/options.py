"""The ``graph-dap`` command line's arguments: the parser of every command, and what checks its values."""

from __future__ import annotations

import argparse
import enum
from collections.abc import Sequence
from typing import Any

from graph_dap.kinds import OptLevel

EXIT_COMPLETED, EXIT_STOPPED, EXIT_USAGE = 0, 1, 2
EXIT_DIVERGED = 1
EXIT_INTERRUPTED, EXIT_TERMINATED = 130, 143


class Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        raise UsageError(f"{self.prog}: {message}")


class UsageError(Exception):
    """Bad usage (an unknown option, a bad value, options that do not go together): one line, exit 2."""


def parse_dims(items: Sequence[str], shapes: Sequence[str] = ()) -> dict[str, int | tuple[int, ...]]:
    """``--dim NAME=N`` items and ``--shape INPUT=D0,D1,...`` items, as ``resolve_inputs`` takes them."""
    out: dict[str, int | tuple[int, ...]] = {}
    for item in items:
        name, sep, n = item.partition("=")
        if not sep or not name or not n.strip().isdigit():
            raise UsageError(f"--dim expects NAME=N with N a non-negative integer, got '{item}'")
        out[name.strip()] = int(n)
    for item in shapes:
        name, sep, text = item.partition("=")
        parts = [p.strip() for p in text.split(",")] if text.strip() else []
        if not sep or not name.strip() or not all(p.isdigit() for p in parts):
            raise UsageError(f"--shape expects INPUT=D0,D1,... with non-negative integers (INPUT= for a scalar), got '{item}'")
        out[name.strip()] = tuple(int(p) for p in parts)
    return out


def parse_filters(text: str | None) -> list[str]:
    if not text:
        return []
    return [f.strip() for f in text.split(",") if f.strip()]


class Grouping(enum.StrEnum):
    """What a row of ``compare`` or ``profile`` is (``--by``)."""

    VALUE = "value"
    NODE = "node"
    LINE = "line"  # of the model's Python source
    MODULE = "module"  # a module scope of the model's source


COMPARE_BY = (Grouping.VALUE, Grouping.MODULE)
PROFILE_BY = (Grouping.NODE, Grouping.LINE, Grouping.MODULE)
_SHAPE_HELP = "the whole shape of a made-up input (dimensions without a name, or -1); repeatable"


def build_parser() -> argparse.ArgumentParser:
    p = Parser(prog="graph-dap", description="Debug ONNX models: break, step, inspect tensors.")
    sub = p.add_subparsers(dest="command", metavar="COMMAND", parser_class=Parser)

    run = sub.add_parser("run", help="run a model under the debugger and report the first break")
    run.add_argument("model", help="path to the .onnx model")
    run.add_argument("--inputs", help=".npz (keys = input names), .npy (one input) or a folder of input_N.pb")
    run.add_argument("--dim", action="append", default=[], metavar="NAME=N", help="size of a symbolic dimension")
    run.add_argument("--shape", action="append", default=[], metavar="INPUT=D0,D1,...", help=_SHAPE_HELP)
    run.add_argument(
        "--break",
        dest="breaks",
        action="append",
        default=[],
        metavar="SPEC",
        help="node id, value name, op:TYPE, a glob on node ids, FILE.py:LINE (a line of the model's Python source) "
        "or module:PATH (where the run enters a module of it, e.g. module:model.layers.8)",
    )
    run.add_argument("--break-on", default="error", metavar="FILTERS", help="comma list of nan, inf, error (default: error)")
    run.add_argument(
        "--inf-exclude",
        action="append",
        default=[],
        metavar="PATTERN",
        help="node glob or op:TYPE whose Inf the inf filter ignores (attention masks built from a constant are recognized without it)",
    )
    run.add_argument(
        "--nan-exclude",
        action="append",
        default=[],
        metavar="PATTERN",
        help="node glob or op:TYPE whose NaN the nan filter ignores (the Softmax of a row a -inf mask covers is recognized without it)",
    )
    run.add_argument("--provider", action="append", default=[], metavar="NAME", help="onnxruntime execution provider")
    run.add_argument(
        "--opt-level",
        choices=OptLevel.values(),
        default=OptLevel.ALL.value,
        metavar="LEVEL",
        help="onnxruntime's graph optimizations for the runs between stops (none, basic, extended, all; default all, "
        "as a plain InferenceSession); values shown at a stop are computed without them",
    )
    run.add_argument(
        "--set",
        dest="sets",
        action="append",
        default=[],
        metavar="NAME=FILE.npy",
        help="replace value NAME by the array in FILE.npy when it is computed (an input or initializer: at the start)",
    )
    run.add_argument(
        "--set-from",
        dest="set_from",
        action="append",
        default=[],
        metavar="DUMP.npz[:NAME,...]",
        help="replace values by those of a dump (every value it holds, or the names given)",
    )
    run.add_argument(
        "--repeat",
        type=positive_int,
        default=1,
        metavar="N",
        help="run the model N times and report each run's time and whether the outputs were identical",
    )
    run.add_argument("--json", action="store_true", help="print one JSON object on stdout")

    for name, (text, _) in DELEGATED.items():
        sub.add_parser(name, help=text, add_help=False)
    _scan_parser(sub)
    _graph_parser(sub)
    sub.add_parser(
        "run-script",
        help="run a Python program and report the first run call that meets a break (see graph-dap run-script --help)",
        add_help=False,
    )
    sub.add_parser("capture", help="record every run call of a program for replay (see graph-dap capture --help)", add_help=False)
    lst = sub.add_parser("listing", help="print the model's graph listing")
    lst.add_argument("model")
    lst.add_argument("--out", help="write it to this file instead of stdout")

    dump = sub.add_parser(
        "dump",
        help="run a model and write every computed value to an .npz",
        description="Run the model node by node and write every computed value (or those --values selects) to an .npz "
        "keyed by value name, while the run goes: memory stays at the run's working set. The graph inputs are stored too, "
        "and the values inside If branches, Loop and Scan bodies and function calls (inside a loop, each iteration's as "
        "NAME@ITERATION). A JSON side file (OUT.npz.json) records the model's and inputs' hashes, the providers and options, "
        "and the node that produced each value. The archive is renamed into place at the end: an interrupted dump leaves "
        "no file under OUT.npz.",
    )
    _model_options(dump)
    dump.add_argument(
        "--values",
        action="append",
        default=[],
        metavar="GLOB",
        help="only values whose name (or producing node id) matches the glob, op:TYPE, or module:PATH "
        "(the values made in a module of the model's source, e.g. module:model.layers.8); repeatable",
    )
    dump.add_argument("--out", required=True, metavar="OUT.npz", help="the archive to write")
    dump.add_argument("--json", action="store_true", help="print what was written as one JSON object")

    cmp_ = sub.add_parser(
        "compare",
        help="compare a run with a reference value by value and name the first divergence (exit 1 when one differs)",
        description="Run the model and a reference in lockstep, node by node, and compare every value both have. "
        "The first divergence is the earliest node whose outputs break the tolerance while all its compared inputs "
        "are within it: where a difference starts, not where it propagates. "
        "Exit status: 0 when every compared value is within tolerance, 1 when some value is not, 2 on bad usage.",
    )
    _model_options(cmp_)
    ref = cmp_.add_mutually_exclusive_group(required=True)
    ref.add_argument(
        "--reference", metavar="DUMP.npz", help="a dump written by graph-dap dump (its inputs are used unless --inputs)"
    )
    ref.add_argument("--against-provider", metavar="NAME", help="the same model on another execution provider")
    ref.add_argument("--against-model", metavar="OTHER.onnx", help="another model; values are matched by name")
    ref.add_argument(
        "--against-opt-level",
        choices=OptLevel.values(),
        metavar="LEVEL",
        help="the model at another onnxruntime optimization level (none, basic, extended, all); "
        "an optimized side runs whole and only the values its graph still names are compared",
    )
    cmp_.add_argument(
        "--opt-level",
        choices=OptLevel.values(),
        metavar="LEVEL",
        help="optimization level of the run being checked (default: none, i.e. node by node; all with --against-opt-level); "
        "against a quantized model's float model: also read each group from the kernels onnxruntime runs at this level",
    )
    cmp_.add_argument("--atol", type=_non_negative, default=None, metavar="A", help="absolute tolerance (default 1e-5)")
    cmp_.add_argument("--rtol", type=_non_negative, default=None, metavar="R", help="relative tolerance (default 1e-4)")
    cmp_.add_argument(
        "--fail-if",
        action="append",
        default=[],
        metavar="COND",
        help="fail a value when METRIC<X or METRIC>X holds (e.g. cosine<0.999, snr<40, max_abs>1e-3) "
        "instead of the atol/rtol rule; repeatable, any one fails",
    )
    cmp_.add_argument(
        "--metric",
        default="max_abs,max_rel,mse,cosine,snr",
        metavar="LIST",
        help="metrics to show: any of max_abs, max_rel, mse, cosine, snr (default: all)",
    )
    cmp_.add_argument("--failed", action="store_true", help="list only the values out of tolerance")
    cmp_.add_argument(
        "--values",
        action="append",
        default=[],
        metavar="GLOB",
        help="list only these values: a glob over value names or node ids, op:TYPE, or module:PATH (module:model.layers.8); repeatable",
    )
    cmp_.add_argument(
        "--by",
        choices=[g.value for g in COMPARE_BY],
        default=Grouping.VALUE.value,
        help="value: a row per value (default); module: the metrics aggregated per module scope of the model's source",
    )
    cmp_.add_argument("--json", action="store_true", help="print {rows, first_divergence, ...} as one JSON object")
    quant = cmp_.add_argument_group(
        "quantized models",
        "with --against-model, when one of the two models is quantized (QDQ, QOperator, dynamic, MatMulNBits): tensors are "
        "paired by graph structure, each group of nodes between paired tensors gets its accumulated, local and "
        "quantization-only error, and the rule is an SQNR threshold (default snr<20)",
    )
    quant.add_argument(
        "--structure",
        action="store_true",
        help="pair by graph structure even when neither model is quantized (a re-export, a converter's or optimizer's rewrite)",
    )
    quant.add_argument("--show-pairs", action="store_true", help="print which float tensor stands for which quantized value, and why the others are unpaired")
    quant.add_argument("--pairs", metavar="FILE", help="pairs to use where the structure cannot tell: JSON {FLOAT: QUANT} or lines 'FLOAT QUANT'")
    quant.add_argument("--order", choices=("local", "graph"), default="local", help="rank the groups by local error (default) or list them in graph order")
    quant.add_argument("--top", type=count, default=0, metavar="K", help="print only the K first groups (0: all, the default)")
    quant.add_argument(
        "--sensitivity",
        action="store_true",
        help="also run the model with one group at a time kept in float and rank the groups by the output SQNR each recovers",
    )
    quant.add_argument(
        "--target-snr",
        type=float,
        default=None,
        metavar="DB",
        help="with --sensitivity: the output SQNR to reach; prints the nodes_to_exclude for quantize_static that reach it",
    )
    quant.add_argument(
        "--sensitivity-data",
        metavar="SOURCE",
        help="with --sensitivity: inputs over which each output SQNR is measured, their energies added (a folder or glob of "
        ".npz/.npy files or ONNX test-data folders, as scan's --inputs; default: --inputs alone)",
    )
    quant.add_argument("--report", metavar="DIR", help="write DIR/report.html: the SQNR per group as a chart, the weights, the sensitivity")
    # --opt-level LEVEL (above) with a quantized model: also compare the kernels onnxruntime runs at that level, group by group

    prof = sub.add_parser(
        "profile",
        help="time every node of the model (onnxruntime's own profiling) and list the slowest first",
        description="Run the whole model under onnxruntime's profiler (SessionOptions.enable_profiling) and map each "
        "kernel's time back to its node: median over --repeat runs after one warm-up, share of the total, bytes produced. "
        "With --opt-level above none, the nodes are those of onnxruntime's optimized graph, each with the original "
        "nodes it came from.",
    )
    _model_options(prof)
    prof.add_argument("--repeat", type=positive_int, default=3, metavar="N", help="timed runs (default 3), after one warm-up")
    prof.add_argument(
        "--opt-level",
        choices=OptLevel.values(),
        default=None,
        metavar="LEVEL",
        help="onnxruntime optimization level (default none: the model's own nodes; all with --fused)",
    )
    prof.add_argument(
        "--fused",
        action="store_true",
        help="also list onnxruntime's optimized graph: each of its nodes with the original nodes it came from",
    )
    prof.add_argument("--top", type=count, default=25, metavar="K", help="rows to print, slowest first (0: all; default 25)")
    prof.add_argument(
        "--by",
        choices=[g.value for g in PROFILE_BY],
        default=Grouping.NODE.value,
        help="node (default), or the times per line of the model's Python source or per module scope "
        "(a fused node's time split over its original nodes')",
    )
    prof.add_argument(
        "--depth",
        type=positive_int,
        default=None,
        metavar="N",
        help="with --by module: module paths cut to N components (--depth 3: model.layers.8, a total per layer)",
    )
    prof.add_argument(
        "--nodes",
        action="append",
        default=[],
        metavar="GLOB",
        help="list only these nodes: a glob over node ids, op:TYPE, or module:PATH (module:model.layers.8); repeatable",
    )
    prof.add_argument("--chrome-trace", metavar="OUT.json", help="also write the runs as a Chrome/Perfetto trace")
    prof.add_argument("--save-optimized", metavar="OUT.onnx", help="also write onnxruntime's optimized model (with --opt-level)")
    prof.add_argument("--json", action="store_true", help='print {"total_ms", "nodes": [...], ...} as one JSON object')
    return p


def _graph_parser(sub: Any) -> argparse.ArgumentParser:
    """The ``graph`` subcommand's options (run by :mod:`graph_dap.cli.graph`)."""
    p = sub.add_parser(
        "graph",
        help="write the model's graph as one self-contained HTML page (the VS Code graph view's renderer)",
        description="Write the model's graph as one HTML page that needs no network: nodes laid out in layers, "
        "collapsed by module scope, If/Loop/Scan bodies and functions nested, search, minimap, pan and zoom, "
        "export as SVG or PNG. Each --overlay colours the nodes by the numbers of a tool's JSON: "
        "graph-dap compare --json, graph-dap profile --json, or a scan's scan.json.",
    )
    p.add_argument("model", help="path to the .onnx model")
    p.add_argument("--out", metavar="GRAPH.html", help="the page to write")
    p.add_argument("--overlay", action="append", default=[], metavar="FILE.json", help="a tool's JSON to colour the nodes by; repeatable")
    p.add_argument("--json", action="store_true", help='print {"graph": ..., "overlays": [...]} (what the VS Code view reads) instead')
    return p


def _scan_parser(sub: Any) -> argparse.ArgumentParser:
    """The ``scan`` subcommand's options, on the CLI's subparsers."""
    p = sub.add_parser(
        "scan",
        help="run a model on every input of a data set, watched; report which inputs fail and where each first goes wrong",
        description="Run the model on every input of a data set with the NaN/Inf watch (and, with --reference, a comparison), "
        "on a pool of local worker processes or on Ray. For each input: clean, nan, inf, error, mismatch, invalid (it does not fit "
        "the model) or crash (it kills its worker), with the first bad node. DIR/scan.json is rewritten as results arrive "
        "(--resume skips the inputs it holds); DIR/failing/<id>.npz keeps each failing input; DIR/report.html shows it all. "
        "Exit status: 0 when every input ran clean, 1 when one failed, 2 on bad usage.",
    )
    p.add_argument("model", help="path to the .onnx model")
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument(
        "--inputs",
        metavar="SOURCE",
        help="a folder of .npz/.npy files or ONNX test-data folders, a glob ('data/**/*.npz'), or one .npz with --sample-axis",
    )
    src.add_argument("--inputs-from", metavar="MODULE:FUNCTION", help="a Python function returning an iterable of feed dicts (or (id, dict) pairs)")
    p.add_argument("--sample-axis", type=int, default=None, metavar="K", help="one .npz: each slice along axis K of its arrays is one input")
    p.add_argument("--batch", type=positive_int, default=1, metavar="N", help="with --sample-axis: N slices per run (default 1)")
    p.add_argument("--break-on", default=None, metavar="FILTERS", help="comma list of nan, inf, error, mismatch (default: nan,inf,error; +mismatch with --reference)")
    p.add_argument("--inf-exclude", action="append", default=[], metavar="PATTERN", help="node glob or op:TYPE whose Inf is expected")
    p.add_argument("--nan-exclude", action="append", default=[], metavar="PATTERN", help="node glob or op:TYPE whose NaN is expected")
    p.add_argument("--reference", metavar="REF", help="compare each input's outputs with provider:NAME, opt_level:LEVEL or model:OTHER.onnx")
    p.add_argument(
        "--tolerance",
        action="append",
        default=[],
        metavar="SPEC",
        help="with --reference: atol=A, rtol=R or a condition like cosine<0.999 (comma-separated or repeated; default atol=1e-5,rtol=1e-4)",
    )
    p.add_argument("--metric", default=None, metavar="NAME", help="how the worst inputs are ranked: max_abs, max_rel, mse, cosine or snr")
    p.add_argument("--dim", action="append", default=[], metavar="NAME=N", help="size of a symbolic dimension")
    p.add_argument("--provider", action="append", default=[], metavar="NAME", help="onnxruntime execution provider")
    p.add_argument("--workers", type=positive_int, default=None, metavar="N", help="worker processes (default: cores / threads per run)")
    p.add_argument("--threads", type=positive_int, default=1, metavar="N", help="onnxruntime threads per run, per worker (default 1)")
    p.add_argument("--ray", nargs="?", const="local", default=None, metavar="ADDRESS", help="run on Ray: a local one, or the cluster at ADDRESS")
    p.add_argument("--ship", action="store_true", help="with --ray: put the model and the inputs in Ray's object store (paths need not be shared)")
    p.add_argument("--shard-size", type=positive_int, default=8, metavar="N", help="with --ray: inputs per task (default 8)")
    p.add_argument("--out", metavar="DIR", help="where scan.json, failing/ and report.html go (default: ./<model>-scan)")
    p.add_argument("--resume", action="store_true", help="skip the inputs DIR/scan.json already holds")
    p.add_argument("--json", action="store_true", help="print one JSON object per line as the scan goes (start, result, incident, saved), the summary last")
    return p


def _model_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("model", help="path to the .onnx model")
    p.add_argument("--inputs", help=".npz (keys = input names), .npy (one input) or a folder of input_N.pb")
    p.add_argument("--dim", action="append", default=[], metavar="NAME=N", help="size of a symbolic dimension")
    p.add_argument("--shape", action="append", default=[], metavar="INPUT=D0,D1,...", help=_SHAPE_HELP)
    p.add_argument("--provider", action="append", default=[], metavar="NAME", help="onnxruntime execution provider")


def _int_at_least(text: str, least: int, what: str) -> int:
    try:
        n = int(text)
    except ValueError:
        n = least - 1
    if n < least:
        raise argparse.ArgumentTypeError(f"expected {what}, got '{text}'")
    return n


def positive_int(text: str) -> int:
    return _int_at_least(text, 1, "a positive integer")


def count(text: str) -> int:
    """A count of rows: 0 or more (a negative one would cut rows from the end)."""
    return _int_at_least(text, 0, "a count, 0 or more")


def _non_negative(text: str) -> float:
    try:
        x = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a non-negative number, got '{text}'") from None
    if not x >= 0:
        raise argparse.ArgumentTypeError(f"expected a non-negative number, got '{text}'")
    return x

# Subcommands with parsers of their own: the DAP server and the runtime worker.


DELEGATED = {
    "adapter": ("serve DAP on stdio, or over TCP with --port (see graph-dap adapter --help)", "graph_dap.adapter.__main__"),
    "worker": (
        "run a runtime worker for an adapter, e.g. on a GPU box (see graph-dap worker --help)",
        "graph_dap.worker.server",
    ),
    "lsp": ("serve the language server of graph listings on stdio, or over TCP with --tcp (see graph-dap lsp --help)", "graph_dap.lsp.__main__"),
}
