"""Mixed mode's door: what the adapter that answered ``initialize`` hands a program launch to.

:class:`MixedDoor` is the :class:`~graph_dap.adapter.core.Programs` that the transports
(:mod:`graph_dap.adapter.transports`) give the plain adapter: at ``initialize`` it lists
debugpy's exception filters (when the client said it will launch a program); at a
``launch`` with ``program`` or ``module`` it starts a :class:`~.session.MixedSession`
on the adapter's channel, and from then on every request goes to its :class:`~.routes.Router`.
"""

from __future__ import annotations

import os
from typing import Any

from graph_dap.adapter.core import Handover
from graph_dap.adapter.mixed.launch import ProgramLaunch
from graph_dap.adapter.mixed.routes import Router
from graph_dap.adapter.mixed.session import MixedSession
from graph_dap.adapter.protocol import Message
from graph_dap.adapter.requests import Request

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


class MixedDoor:
    """Program launches, for a plain adapter to hand over."""

    def initialize(self, body: dict[str, Any]) -> None:
        if os.environ.get(PROGRAM_ENV) == "1":
            # The client will launch a program: it lists debugpy's exception filters now (VS Code reads them only here;
            # the capabilities event of a program launch says them to the clients that honour it).
            body["exceptionBreakpointFilters"] = [*body["exceptionBreakpointFilters"], *PYTHON_FILTERS]

    async def launch(self, request: Request, handover: Handover) -> MixedProgram:
        launch = ProgramLaunch.parse(request)
        handover.drop_worker()  # the worker started at initialize: the mixed session starts its own
        h = handover
        session = MixedSession(h.channel, h.client, h.initialize, launch, h.spawn_worker, h.later, h.end)
        try:
            await session.start()
        except BaseException:
            await session.close()
            raise
        return MixedProgram(session)


class MixedProgram:
    """A started mixed session: the requests go to its router."""

    def __init__(self, session: MixedSession) -> None:
        self.session = session
        self.router = Router(session)

    async def handle(self, request: Request) -> dict[str, Any] | None:
        return await self.router.handle(request)

    def client_response(self, message: Message) -> None:
        self.session.client_response(message)

    async def close(self) -> None:
        await self.session.close()
