"""Where a session becomes mixed: a ``launch`` with ``program`` or ``module``; from then on every request goes to
the mixed session's :class:`~graph_dap.adapter.mixed.routes.Router`.

:class:`MixedRequests` is a mixin of :class:`~graph_dap.adapter.server.DebugAdapter`, ahead of the plain handlers:
a plain (``model``) launch goes on to them unchanged.
"""

from __future__ import annotations

import os
from typing import Any

from graph_dap.adapter.mixed.launch import ProgramLaunch, is_program_launch
from graph_dap.adapter.protocol import Message
from graph_dap.adapter.requests import InvalidRequest, Request
from graph_dap.adapter.session_handlers import SessionRequests

#: Set to 1 by a client that starts the adapter for a program launch (the VS Code extension does).
PROGRAM_ENV = "GRAPH_DAP_PROGRAM"
#: debugpy 1.8's exception filters, as its adapter announces them.
PYTHON_FILTERS = (
    {"filter": "raised", "label": "Raised Exceptions", "default": False, "description": "Break whenever any exception is raised."},
    {
        "filter": "uncaught",
        "label": "Uncaught Exceptions",
        "default": True,
        "description": "Break when the process is exiting due to unhandled exception.",
    },
    {"filter": "userUnhandled", "label": "User Uncaught Exceptions", "default": False, "description": "Break when exception escapes into library code."},
)


class MixedRequests(SessionRequests):
    """The entry into mixed mode, and the hand-over of every later request to it."""

    mixed: Any = None  # the MixedSession, once a program is launched
    _router: Any = None
    _initialize_args: dict[str, Any] | None = None

    async def initialize_request(self, request: Request) -> dict[str, Any]:
        self._initialize_args = dict(request.arguments)
        body: dict[str, Any] = await super().initialize_request(request)
        if os.environ.get(PROGRAM_ENV) == "1":
            # The client will launch a program: it lists debugpy's exception filters now (VS Code reads them only here;
            # the capabilities event of a program launch says them to the clients that honour it).
            body["exceptionBreakpointFilters"] = [*body["exceptionBreakpointFilters"], *PYTHON_FILTERS]
        return body

    async def launch_request(self, request: Request) -> None:
        if not is_program_launch(request.arguments):
            await super().launch_request(request)
            return
        if self.client is None:
            raise InvalidRequest("initialize first")
        if self.graph is not None or self.mixed is not None:
            raise InvalidRequest("already launched")
        from graph_dap.adapter.mixed.routes import Router
        from graph_dap.adapter.mixed.session import MixedSession

        launch = ProgramLaunch.parse(request)
        self._drop_spawned()  # the worker started at initialize: the mixed session starts its own
        mixed = MixedSession(
            self.channel, self.client, self._initialize_args or {}, launch, self._spawn_worker, self._later, self._finish
        )
        self.mixed = mixed
        self._router = Router(mixed)
        try:
            await mixed.start()
        except BaseException:
            self.mixed, self._router = None, None
            await mixed.close()
            raise

    async def mixed_request(self, request: Request) -> dict[str, Any] | None:
        """Any request of a mixed session (but initialize), answered by the side it belongs to."""
        body: dict[str, Any] | None = await self._router.handle(request)
        return body

    def _finish(self) -> None:
        self._done = True

    def client_response(self, message: Message) -> None:
        """A response from the client: to a reverse request that debugpy made (``runInTerminal``)."""
        if self.mixed is not None:
            self.mixed.client_response(message)

    async def _shutdown(self) -> None:
        if self.mixed is not None:
            mixed, self.mixed = self.mixed, None
            await mixed.close()
        await super()._shutdown()
