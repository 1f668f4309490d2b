"""``python -m graph_dap.adapter``: the debug adapter on stdio, or on TCP with ``--port``."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from graph_dap.adapter.access import TOKEN_ENV, TOKEN_KEY, is_loopback


def main(argv: Sequence[str] | None = None) -> int:
    """``graph-dap adapter [--port N [--host H] [--token T]]``: DAP on stdio, or TCP clients one after another.

    Listening on an address other than loopback needs a token (``--token`` or
    ``GRAPH_DAP_ADAPTER_TOKEN``), which clients give as the launch argument ``adapterToken``.
    """
    parser = argparse.ArgumentParser(prog="graph-dap adapter", description="The graph-dap debug adapter (DAP).")
    parser.add_argument("--port", type=int, help="serve DAP clients over TCP on this port (0: pick one and print it)")
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on with --port (default 127.0.0.1)")
    parser.add_argument(
        "--token",
        help=f"with --port: secret that clients must give as the launch argument '{TOKEN_KEY}' (or set {TOKEN_ENV}); "
        "required when --host is not a loopback address",
    )
    args = parser.parse_args(list(sys.argv[1:] if argv is None else argv))
    if args.port is None:
        if args.token:
            print("graph-dap adapter: --token needs --port (on stdio no one else can connect)", file=sys.stderr)
            return 2
        # The worker first: its imports (numpy, onnx, onnxruntime) run beside this process's own
        # instead of after the client's initialize (only the one client on stdio can reach it).
        from graph_dap.worker import spawn

        try:
            worker = spawn.start()
        except OSError:
            worker = None  # spawned again at initialize, which says why it cannot start
        from graph_dap.adapter.transports import serve_stdio

        serve_stdio(worker)
        return 0
    from graph_dap.adapter.transports import serve_tcp

    token = args.token or os.environ.get(TOKEN_ENV) or None
    if token is None and not is_loopback(args.host):
        print(
            f"graph-dap adapter: --host {args.host} is not a loopback address: give --token TOKEN (or set {TOKEN_ENV}), "
            f"which clients then put in '{TOKEN_KEY}'",
            file=sys.stderr,
        )
        return 2
    try:
        serve_tcp(args.host, args.port, token)
    except OSError as error:
        print(f"graph-dap adapter: cannot listen on {args.host}:{args.port}: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
