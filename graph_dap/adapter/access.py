"""Who may drive the adapter over TCP: anyone on loopback, or a client that shows the token.

DAP has no authentication handshake, so the token travels in the launch (or attach)
configuration as ``adapterToken``. Until a client has shown it, the adapter answers
``initialize`` and refuses everything else; a wrong token ends the connection.
"""

from __future__ import annotations

import hmac
import ipaddress
import socket
from typing import TYPE_CHECKING

from graph_dap.adapter.requests import Request, UserError

if TYPE_CHECKING:
    import asyncio  # (not imported here: the adapter's __main__ reads this module before it starts the worker)

TOKEN_ENV = "GRAPH_DAP_ADAPTER_TOKEN"
TOKEN_KEY = "adapterToken"
TOKEN_NEEDED = f'this adapter requires a token: add "{TOKEN_KEY}" to the launch configuration'
#: Seconds a client has, from connecting, to show the token before the connection is closed.
AUTH_TIMEOUT = 30.0


class WrongToken(UserError):
    """A launch or attach with another token: answered with this error, then the connection closes."""


def is_loopback(host: str) -> bool:
    """Whether every address ``host`` stands for is a loopback one (``""`` means all interfaces)."""
    if not host:
        return False
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        pass
    try:
        found = socket.getaddrinfo(host, None, proto=socket.IPPROTO_TCP)
    except OSError:
        return False
    return bool(found) and all(ipaddress.ip_address(str(a[4][0]).split("%")[0]).is_loopback for a in found)


class TokenGate:
    """Lets a session's requests through once its client has shown the token (at once without one)."""

    def __init__(self, token: str | None) -> None:
        self._token = token.encode() if token else None
        self.open = self._token is None

    def admit(self, request: Request) -> None:
        """Open the gate for a launch or attach with the token; otherwise raise the error to answer.

        ``initialize`` always passes (it says nothing and starts nothing before the gate opens).
        """
        if self.open or request.command == "initialize":
            return
        given = request.arguments.get(TOKEN_KEY) if request.command in ("launch", "attach") else None
        if given is None or given == "":
            raise UserError(TOKEN_NEEDED)
        assert self._token is not None
        if not isinstance(given, str) or not hmac.compare_digest(given.encode(), self._token):
            raise WrongToken(f'wrong "{TOKEN_KEY}": the adapter closes the connection')
        self.open = True


class Turn:
    """A TCP session's turn: taken when its client is admitted, held until the session ends (one session at a time)."""

    def __init__(self, lock: asyncio.Lock | None) -> None:
        self._lock = lock
        self._held = False

    async def take(self) -> None:
        """Wait for the sessions before this one to end (at once without a lock, or when held already)."""
        if self._lock is not None and not self._held:
            await self._lock.acquire()
            self._held = True

    def release(self) -> None:
        if self._lock is not None and self._held:
            self._lock.release()
            self._held = False
