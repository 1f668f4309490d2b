"""``graph-dap scan``: a model watched over a whole data set, locally or on Ray.

- :mod:`.sources`: where inputs come from (folders, globs, one archive's samples, a generator).
- :mod:`.runner`: one worker's model and session; one input in, one :class:`~.results.InputResult` out.
- :mod:`.pool` and :mod:`.ray_backend`: the backends that run inputs on many workers.
- :mod:`.scanfile`: ``DIR/scan.json``; :mod:`.report`: ``DIR/report.html``; :mod:`.scan`: the whole thing.
"""

from __future__ import annotations

from graph_dap.runtime.tools.scan.backend import Incident, Outcome, ScanError
from graph_dap.runtime.tools.scan.results import STATUSES, BadNode, InputResult, ScanStatus
from graph_dap.runtime.tools.scan.runner import InputScanner, ScanConfig
from graph_dap.runtime.tools.scan.scan import ScanEvent, ScanSummary, run_scan
from graph_dap.runtime.tools.scan.scanfile import read_scan
from graph_dap.runtime.tools.scan.sources import InputSource, WorkItem, open_source

__all__ = [
    "STATUSES",
    "ScanStatus",
    "BadNode",
    "Incident",
    "InputResult",
    "InputScanner",
    "InputSource",
    "Outcome",
    "ScanConfig",
    "ScanError",
    "ScanEvent",
    "ScanSummary",
    "WorkItem",
    "open_source",
    "read_scan",
    "run_scan",
]
