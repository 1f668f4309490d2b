"""``python -m graph_dap.adapter.mixed.debugpy_shim``: debugpy's own adapter, with TCP_NODELAY on its sockets.

debugpy's adapter talks to the debuggee's pydevd over TCP without TCP_NODELAY, and
Nagle's algorithm then holds each small message back (~44 ms a request, measured). This
sets the option on every socket the adapter accepts or creates, then runs
``debugpy.adapter``'s ``main`` unchanged. (The debuggee's end is set by graph-dap's host.)
"""

from __future__ import annotations

import socket
import sys
from typing import Any


def _nodelay(sock: socket.socket) -> None:
    try:
        if sock.family in (socket.AF_INET, socket.AF_INET6):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    except OSError:
        pass


def main() -> None:
    """Patch debugpy's socket helpers, then run its adapter on stdio."""
    from debugpy.common import sockets

    serve, new_sock = sockets.serve, sockets._new_sock

    def serve_nodelay(name: str, handler: Any, *args: Any, **kwargs: Any) -> Any:
        def accepted(sock: socket.socket) -> Any:
            _nodelay(sock)
            return handler(sock)

        return serve(name, accepted, *args, **kwargs)

    def new_sock_nodelay(*args: Any, **kwargs: Any) -> socket.socket:
        sock: socket.socket = new_sock(*args, **kwargs)
        _nodelay(sock)
        return sock

    sockets.serve = serve_nodelay
    sockets._new_sock = new_sock_nodelay
    from debugpy.adapter import __main__ as adapter_main

    sys.argv = [sys.argv[0]]
    adapter_main.main()


if __name__ == "__main__":
    main()
