"""``python -m graph_dap.adapter``: the debug adapter on stdio, or on TCP with ``--port``."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence


def main(argv: Sequence[str] | None = None) -> int:
    """``graph-dap adapter [--port N] [--host H]``: DAP on stdio, or TCP clients one after another."""
    parser = argparse.ArgumentParser(prog="graph-dap adapter", description="The graph-dap debug adapter (DAP).")
    parser.add_argument("--port", type=int, help="serve DAP clients over TCP on this port (0: pick one and print it)")
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on with --port (default 127.0.0.1)")
    args = parser.parse_args(list(sys.argv[1:] if argv is None else argv))
    from .server import serve_stdio, serve_tcp

    if args.port is None:
        serve_stdio()
    else:
        serve_tcp(args.host, args.port)
    return 0


if __name__ == "__main__":
    sys.exit(main())
