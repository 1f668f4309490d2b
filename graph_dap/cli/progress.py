"""The command line's progress bar on stderr: nodes of a run, inputs of a scan."""

from __future__ import annotations

import sys
import time


class ProgressBar:
    """A one-line progress bar on stderr, redrawn at most 10 times a second."""

    def __init__(self, width: int = 30, unit: str = "nodes") -> None:
        self.width = width
        self.unit = unit
        self._last = 0.0
        self._drawn = 0

    @classmethod
    def on_terminal(cls, quiet: bool = False, unit: str = "nodes") -> ProgressBar | None:
        """A bar when stderr is a terminal and the output is not ``quiet`` (``--json``), else None."""
        return cls(unit=unit) if sys.stderr.isatty() and not quiet else None

    def update(self, done: int, total: int | None, note: str = "") -> None:
        """``done`` of ``total`` (None: unknown, no bar), and a note after the count."""
        now = time.monotonic()
        if now - self._last < 0.1 and (total is None or done < total):
            return
        self._last = now
        text = f"{done}/{total} {self.unit}" if total else f"{done} {self.unit}"
        if total:
            filled = int(self.width * min(done, total) / max(total, 1))
            text = f"[{'#' * filled}{'.' * (self.width - filled)}] {text}"
        if note:
            text += f"  {note}"
        pad = " " * max(0, self._drawn - len(text))
        sys.stderr.write(f"\r{text}{pad}")
        sys.stderr.flush()
        self._drawn = max(self._drawn, len(text))

    def close(self) -> None:
        if self._drawn:
            sys.stderr.write("\r" + " " * self._drawn + "\r")
            sys.stderr.flush()
            self._drawn = 0
