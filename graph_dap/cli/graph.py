"""``graph-dap graph``: the model as a picture, in one self-contained HTML page (or as the graph view's JSON).

Its options are in :mod:`graph_dap.cli.options`.
"""

from __future__ import annotations

import argparse
import json
import sys

from graph_dap.cli.options import EXIT_COMPLETED, UsageError


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
