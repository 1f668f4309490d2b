"""A pause asked for from another thread: seen between nodes, and aborting the onnxruntime call in flight.

onnxruntime stops a running ``session.run`` when its ``RunOptions.terminate`` is set from another thread
(FACTS.md); between calls, the run loop looks at the flag. One object holds both, so that a pause that
comes before a call's run options exist still stops that call.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

import onnxruntime as ort


class Interrupt:
    """A pending pause: :meth:`request` from any thread; the run loop :meth:`take` s it between nodes and
    runs each onnxruntime call under :meth:`run_options`. It stays pending until taken or :meth:`clear` ed."""

    def __init__(self) -> None:
        self._pending = threading.Event()
        self._options: ort.RunOptions | None = None
        self._lock = threading.Lock()

    def request(self) -> None:
        """Ask the run to stop: now, if an onnxruntime call is running; else at the next look."""
        with self._lock:
            self._pending.set()
            if self._options is not None:
                self._options.terminate = True

    @property
    def pending(self) -> bool:
        return self._pending.is_set()

    def take(self) -> bool:
        """Whether a pause was asked for; taking it clears it."""
        if self._pending.is_set():
            self._pending.clear()
            return True
        return False

    def clear(self) -> None:
        """Forget a pause not taken (a stop was returned: it was for the run that just ended)."""
        self._pending.clear()

    @contextmanager
    def run_options(self) -> Iterator[ort.RunOptions]:
        """Run options for one onnxruntime call that a :meth:`request` aborts, even one made just before."""
        options = ort.RunOptions()
        with self._lock:
            if self._pending.is_set():
                options.terminate = True
            self._options = options
        try:
            yield options
        finally:
            with self._lock:
                self._options = None
