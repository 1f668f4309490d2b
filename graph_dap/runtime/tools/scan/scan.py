"""A scan from start to end: inputs out to a backend, results into ``DIR/scan.json``, failing inputs kept, the report.

:func:`run_scan` is what ``graph-dap scan`` calls. It streams the source's items
(skipping those a resumed file holds) into a backend, writes each result as it
arrives, keeps each failing input as ``DIR/failing/<id>.npz`` (so that ``graph-dap
run`` or a debug session can replay it), and writes ``DIR/report.html`` at the end,
also when the scan is interrupted.
"""

from __future__ import annotations

import enum
import io
import os
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from graph_dap.errors import GraphDapError
from graph_dap.files import write_bytes_atomic
from graph_dap.runtime.graph import Graph
from graph_dap.runtime.tools.dump import model_hash
from graph_dap.runtime.tools.scan.backend import Backend, Event, Incident, Outcome
from graph_dap.runtime.tools.scan.report import write_report
from graph_dap.runtime.tools.scan.results import InputResult
from graph_dap.runtime.tools.scan.runner import ScanConfig
from graph_dap.runtime.tools.scan.scanfile import ScanFile
from graph_dap.runtime.tools.scan.sources import InputSource, ItemKind, ItemLoader, WorkItem


class ScanEvent(enum.StrEnum):
    """What a scan tells as it goes (``on_event``; ``scan --json`` writes each as a line's ``event``)."""

    START = "start"
    RESULT = "result"  # one input done, with ``done`` and ``failed`` so far
    INCIDENT = "incident"  # a worker died or was replaced
    SAVED = "saved"  # the results file was written again
    END = "end"  # the CLI's last line: the summary

RESULTS_NAME, REPORT_NAME, FAILING_DIR = "scan.json", "report.html", "failing"


@dataclass(frozen=True, slots=True)
class ScanSummary:
    """How a scan ended: where its files are, and what it found."""

    out_dir: Path
    results_path: Path
    report_path: Path
    counts: dict[str, int]
    done: int
    failed: int
    ran: int  # inputs run this time
    resumed: int  # inputs a resumed file already held
    seconds: float  # this run's wall time
    finished: bool
    backend: dict[str, Any]

    def to_dict(self) -> dict[str, Any]:
        return {
            "out": str(self.out_dir),
            "results": str(self.results_path),
            "report": str(self.report_path),
            "counts": dict(self.counts),
            "done": self.done,
            "failed": self.failed,
            "ran": self.ran,
            "resumed": self.resumed,
            "seconds": round(self.seconds, 3),
            "finished": self.finished,
            "backend": dict(self.backend),
        }


class FailingInputs:
    """``DIR/failing/<id>.npz``: each failing input's feeds, as the model ran them (file names safe and unique)."""

    def __init__(self, out_dir: Path) -> None:
        self.folder = out_dir / FAILING_DIR
        self._names: set[str] = set()

    def keep(self, result: InputResult, feeds: dict[str, Any]) -> str | None:
        """Write the feeds; the path relative to DIR, or None when they are not plain arrays."""
        if not feeds or not all(isinstance(v, np.ndarray) and v.dtype.kind != "O" for v in feeds.values()):
            return None
        name = re.sub(r"[^A-Za-z0-9._-]+", "_", result.id.replace("/", "__")).strip("._") or "input"
        if name in self._names:
            name = f"{name}-{result.index}"
        self._names.add(name)
        buffer = io.BytesIO()
        np.savez(buffer, allow_pickle=False, **feeds)
        self.folder.mkdir(parents=True, exist_ok=True)
        write_bytes_atomic(self.folder / f"{name}.npz", buffer.getvalue())
        return f"{FAILING_DIR}/{name}.npz"


def run_scan(
    graph: Graph,
    source: InputSource,
    config: ScanConfig,
    backend: Backend,
    out_dir: str | os.PathLike[str],
    *,
    resume: bool = False,
    on_event: Callable[[ScanEvent, dict[str, Any]], None] | None = None,
) -> ScanSummary:
    """Scan every input of ``source`` with ``backend``; results in ``out_dir``.

    ``on_event(kind, data)`` hears ``start``, ``result`` (each with ``done`` and
    ``failed`` so far), ``incident`` and ``saved`` (after each rewrite of the file).
    """
    config.check()
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    header = {
        "model": {"path": str(Path(config.model).resolve()), "hash": model_hash(graph)},
        "source": source.describe(),
        "options": config.to_dict(),
        "backend": backend.describe(),
    }
    results = ScanFile.open(out / RESULTS_NAME, header, resume)
    failing = FailingInputs(out)
    driver_loader = ItemLoader(graph, dict(config.dims))
    notify = on_event or (lambda kind, data: None)
    total = source.total
    notify(ScanEvent.START, {"total": total, "resumed": results.resumed, "out": str(out), "backend": backend.describe()})
    items = (it for it in source.items() if not results.done(it.id))
    began = time.monotonic()
    ran = 0
    finished = False
    try:
        for event in backend.run(items):
            ran += _record(event, results, failing, driver_loader, notify)
            if results.write():
                notify(ScanEvent.SAVED, {"done": len(results.results)})
        finished = True
    finally:
        try:
            backend.close()
        finally:
            driver_loader.close()
            results.write(force=True, finished=finished)
            notify(ScanEvent.SAVED, {"done": len(results.results)})
            data = results.to_dict(finished)
            write_report(data, out / REPORT_NAME)
    ordered = results.ordered()
    return ScanSummary(
        out,
        out / RESULTS_NAME,
        out / REPORT_NAME,
        data["counts"],
        len(ordered),
        data["failed"],
        ran,
        results.resumed,
        time.monotonic() - began,
        finished,
        backend.describe(),
    )


def _record(event: Event, results: ScanFile, failing: FailingInputs, loader: ItemLoader, notify: Callable[[ScanEvent, dict[str, Any]], None]) -> int:
    """Take one event into the results; 1 when it was an input done."""
    if isinstance(event, Incident):
        results.incident(event)
        notify(ScanEvent.INCIDENT, {"message": event.message, "worker": event.worker, "input": event.input_id})
        return 0
    assert isinstance(event, Outcome)
    result = event.result
    if result.failed:
        feeds = event.feeds if event.feeds is not None else _driver_feeds(event.item, loader)
        if feeds is not None:
            kept = failing.keep(result, feeds)
            if kept is not None:
                result = result.replace(failing_file=kept)
    results.add(result)
    notify(ScanEvent.RESULT, {**result.to_dict(), "done": len(results.results), "failed": results.failed})
    return 1


def _driver_feeds(item: WorkItem | None, loader: ItemLoader) -> dict[str, Any] | None:
    """A crashed input's feeds, read on the driver (a generator's as given) so that it can be kept."""
    if item is None:
        return None
    if item.kind is ItemKind.ARRAYS:
        return item.feeds if isinstance(item.feeds, dict) else None
    try:
        return loader.load(item)
    except GraphDapError:
        return None
