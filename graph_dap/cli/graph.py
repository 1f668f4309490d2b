"""``graph-dap graph``: the model as a picture, in one self-contained HTML page (or as the graph view's JSON)."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from graph_dap.cli.options import EXIT_COMPLETED, UsageError


def add_parser(sub: Any) -> None:
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


def run(args: argparse.Namespace) -> int:
    from graph_dap.runtime import load_graph
    from graph_dap.runtime.tools.graphview.data import graph_data
    from graph_dap.runtime.tools.graphview.overlays import read_overlay
    from graph_dap.runtime.tools.graphview.page import write_page

    if not args.out and not args.json:
        raise UsageError("graph-dap graph: give --out GRAPH.html (the page) or --json")
    graph = load_graph(args.model)
    overlays = [read_overlay(f, graph) for f in args.overlay]
    data = graph_data(graph)
    if args.json:
        json.dump({"graph": data, "overlays": overlays}, sys.stdout, separators=(",", ":"))
        sys.stdout.write("\n")
    if args.out:
        size = write_page(args.out, data, overlays)
        print(f"wrote {args.out}: {len(data['nodes'])} nodes, {len(overlays)} overlay{'s' if len(overlays) != 1 else ''}, {size / 1e6:.2f} MB",
              file=sys.stderr if args.json else sys.stdout)
    return EXIT_COMPLETED
