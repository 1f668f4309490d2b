"""Work started in the background and not awaited: kept referenced until it is done.

A leaf. The event loop holds only weak references to its tasks: one that nothing else
holds may be garbage-collected before it ends (asyncio's documentation says to keep a
reference), so :func:`background` keeps each in a set until it is done.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import Any, TypeVar

T = TypeVar("T")

_running: set[asyncio.Future[Any]] = set()


def background(work: Awaitable[T]) -> asyncio.Future[T]:
    """Run ``work`` without waiting for it; the task is kept until it is done (and returned, for those who look)."""
    task = asyncio.ensure_future(work)
    _running.add(task)
    task.add_done_callback(_running.discard)
    return task
