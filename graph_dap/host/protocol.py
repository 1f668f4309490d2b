"""What a program under graph-dap (the host, :mod:`graph_dap.host`) and the adapter say to each other.

One msgpack object per message over a TCP connection to 127.0.0.1 that the host opens
(the address comes in its command line, the token in :data:`TOKEN_ENV`):

- host -> adapter, first: ``{"hello": Hello}``; a wrong token gets the connection closed.
- host -> adapter, calls: ``{"id": int, "call": "model" | "run", "args": ModelLoaded | RunCall}``,
  answered by ``{"id": int, "result": ModelAck | RunResult}``.
- adapter -> host, at any time: ``{"push": "config", "body": Config}`` (what applies to
  runs now) and ``{"push": "suspend", "body": Suspend}`` (a debugged call's graph has
  stopped: the calling thread waits in the Python debugger until its result comes).

Every message is a frozen dataclass here, encoded and checked by the worker's codec.
No numpy: the adapter imports this module.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from graph_dap.kinds import BreakFilter, OptLevel, RunAction
from graph_dap.worker.codec import decode, encode

__all__ = [
    "HOST_VERSION",
    "TOKEN_ENV",
    "CallName",
    "Config",
    "Hello",
    "ModelAck",
    "ModelLoaded",
    "PyFrame",
    "Push",
    "RunCall",
    "RunResult",
    "Suspend",
    "decode",
    "encode",
]

#: Changes whenever a message changes shape: a host of another version is refused.
HOST_VERSION = 1


class CallName(enum.StrEnum):
    """The host's calls to the adapter (a message's ``call``)."""

    MODEL = "model"  # args ModelLoaded, answered by ModelAck
    RUN = "run"  # args RunCall, answered by RunResult


class Push(enum.StrEnum):
    """What the adapter pushes to the host (a message's ``push``)."""

    CONFIG = "config"  # body Config
    SUSPEND = "suspend"  # body Suspend
#: The environment variable that hands the host its token.
TOKEN_ENV = "GRAPH_DAP_HOST_TOKEN"


@dataclass(frozen=True, slots=True)
class Hello:
    """The host's first message: its token, and which process it is."""

    token: str
    version: int
    pid: int
    python: str


@dataclass(frozen=True, slots=True)
class Config:
    """What applies to the program's runs now.

    ``stop_every``: every run stops at its entry (``stopOnSessionRun``); ``every_run``:
    every run goes through graph-dap (a ``reference`` compares each one); ``filters``:
    of nan, inf, error; ``inf_exclude``/``nan_exclude``: the nodes whose Inf/NaN the watch leaves alone;
    ``armed``: the models (by key) that have a graph breakpoint.
    """

    stop_every: bool = False
    every_run: bool = False
    filters: tuple[BreakFilter, ...] = ()
    inf_exclude: tuple[str, ...] = ()
    armed: tuple[str, ...] = ()
    nan_exclude: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class ModelLoaded:
    """The program created an InferenceSession: its model (``path`` a file the adapter can load) and options."""

    key: str  # the model's identity: its resolved path, or ``sha256:...`` of its bytes
    path: str
    name: str  # how to show it: the file's name, or ``model (bytes, sha256 1a2b3c4d)``
    providers: tuple[str, ...]
    opt_level: OptLevel


@dataclass(frozen=True, slots=True)
class ModelAck:
    """The adapter has the model (its listing is written); ``message`` says why it cannot debug it, if it cannot."""

    debuggable: bool
    message: str = ""


@dataclass(frozen=True, slots=True)
class PyFrame:
    """One frame of the calling thread's Python stack."""

    path: str
    line: int
    function: str


@dataclass(frozen=True, slots=True)
class RunCall:
    """A ``run`` call handed to graph-dap: ``feeds`` is an ``.npz`` of its inputs, ``why`` what made it debugged."""

    call: int  # the call's number for its model, from 1
    key: str
    feeds: str
    thread: str  # the calling thread's name
    dap_thread: int  # its thread id in the Python debugger's DAP (0: not under the Python debugger)
    stack: tuple[PyFrame, ...]  # innermost first
    why: str  # breakpoint, nan, inf, error, every
    error: str = ""  # for ``error``: onnxruntime's message


@dataclass(frozen=True, slots=True)
class Suspend:
    """The graph of call ``request`` has stopped: its thread waits in the Python debugger."""

    request: int


@dataclass(frozen=True, slots=True)
class RunResult:
    """How a debugged call ends: ``outputs`` (an ``.npz`` to return), ``plain`` (run it in onnxruntime as it is),
    or ``raise`` (the graph failed: raise onnxruntime's error, or ``message``)."""

    action: RunAction
    outputs: str = ""
    message: str = ""
