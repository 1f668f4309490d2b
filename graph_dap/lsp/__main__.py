"""``graph-dap lsp``: the language server of graph listings on stdio, or on TCP with ``--tcp``."""

from __future__ import annotations

import argparse
import asyncio
import sys
import threading
from collections.abc import Sequence

DEFAULT_PORT = 2087


def main(argv: Sequence[str] | None = None) -> int:
    """``graph-dap lsp [--tcp [--host H] [--port N]]``: LSP on stdio, or one client over TCP (for debugging the server)."""
    parser = argparse.ArgumentParser(prog="graph-dap lsp", description="The language server of graph-dap's graph listings (.onnxtxt).")
    parser.add_argument("--stdio", action="store_true", help="serve on stdin/stdout (the default)")
    parser.add_argument("--tcp", action="store_true", help="serve one client over TCP instead")
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on with --tcp (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"port to listen on with --tcp (default {DEFAULT_PORT}; 0 picks one)")
    args = parser.parse_args(list(sys.argv[1:] if argv is None else argv))
    if args.tcp and args.stdio:
        print("graph-dap lsp: give --stdio or --tcp, not both", file=sys.stderr)
        return 2
    if not 0 <= args.port <= 65535:
        print(f"graph-dap lsp: --port must be 0-65535, got {args.port}", file=sys.stderr)
        return 2
    from graph_dap.lsp.features import create_server
    from graph_dap.lsp.versions import one_malloc_arena

    one_malloc_arena()
    server = create_server()
    if not args.tcp:
        server.start_io()
        return 0
    try:
        asyncio.run(_serve_tcp(server, args.host, args.port))
    except OSError as error:
        print(f"graph-dap lsp: cannot listen on {args.host}:{args.port}: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    return 0


async def _serve_tcp(server: object, host: str, port: int) -> None:
    """Listen, serve the first client to connect until it leaves, then stop."""
    from pygls.io_ import run_async

    done = asyncio.Event()
    stop = threading.Event()

    async def connection(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        protocol = server.protocol  # type: ignore[attr-defined]
        protocol.set_writer(writer)
        try:
            await run_async(stop_event=stop, reader=reader, protocol=protocol, error_handler=server.report_server_error)  # type: ignore[attr-defined]
        finally:
            writer.close()
            done.set()

    listener = await asyncio.start_server(connection, host, port)
    bound = listener.sockets[0].getsockname()
    print(f"graph-dap lsp listening on {bound[0]}:{bound[1]}", file=sys.stderr, flush=True)
    async with listener:
        await done.wait()


if __name__ == "__main__":
    sys.exit(main())
