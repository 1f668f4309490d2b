"""This process's stdout as a protocol's private stream (the adapter's DAP, the worker's msgpack).

A leaf: :func:`take_over_stdout` keeps the stream for the protocol and sends stray
prints from anywhere in the process (a library, a ``print`` left in) to stderr, where
they cannot corrupt it.
"""

from __future__ import annotations

import os
import sys


def take_over_stdout() -> int:
    """A new descriptor for stdout, for the protocol alone; descriptor 1 then writes to stderr."""
    protocol_out = os.dup(sys.stdout.fileno())
    sys.stdout.flush()
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    return protocol_out


def write_all(fd: int, data: bytes) -> None:
    """Write every byte of ``data`` to ``fd`` (``os.write`` may take part of it); OSError as ``os.write`` raises it."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]
