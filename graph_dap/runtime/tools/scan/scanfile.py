"""``DIR/scan.json``: a scan's results, rewritten atomically as they arrive, read back to resume.

The file is always whole (a temporary file renamed into place), so a scan stopped
at any moment, even killed, leaves a valid file; ``--resume`` skips the inputs it
holds. Rewrites are spaced so that writing never costs more than a small share of
the scan's time, whatever the number of inputs.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from graph_dap.files import write_text_atomic
from graph_dap.runtime.tools.metrics import Metric
from graph_dap.runtime.tools.scan.backend import Incident, ScanError
from graph_dap.runtime.tools.scan.replay import replay
from graph_dap.runtime.tools.scan.results import InputResult, counts, first_bad_nodes, slowest, worst

FORMAT, VERSION = "graph-dap-scan", 1
#: What must match for ``--resume`` to add to a file: the same model, inputs and options.
_SAME = (("model", "hash"), ("source", "spec"), ("source", "kind"), ("source", "sample_axis"), ("source", "batch"), ("options",))
_MIN_INTERVAL_S = 0.2
_WRITE_SHARE = 10  # at most about one tenth of the time goes to rewriting the file


def now_text() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


class ScanFile:
    """The results so far and the scan's description, kept in memory and written to ``path``."""

    def __init__(self, path: Path, header: Mapping[str, Any]) -> None:
        self.path = path
        self.header = {"format": FORMAT, "version": VERSION, **header, "started": now_text()}
        self.results: dict[str, InputResult] = {}
        self.incidents: list[dict[str, Any]] = []
        self.resumed = 0
        self.failed = 0  # failing inputs among the results, kept as they come
        self.seconds_before = 0.0
        self._began = time.monotonic()
        self._last_write = -1e9
        self._write_cost = 0.0

    @classmethod
    def open(cls, path: Path, header: Mapping[str, Any], resume: bool) -> ScanFile:
        """A new file; with ``resume``, the results already in ``path`` when it is from the same scan."""
        out = cls(path, header)
        if not resume or not path.is_file():
            return out
        try:
            old = json.loads(path.read_text())
        except (OSError, ValueError) as e:
            raise ScanError(f"cannot resume: {path} is not a scan's results ({e})") from None
        if not isinstance(old, dict) or old.get("format") != FORMAT:
            raise ScanError(f"cannot resume: {path} is not a graph-dap scan's results file")
        for keys in _SAME:
            mine, theirs = _get(out.header, keys), _get(old, keys)
            if mine != theirs:
                what = ".".join(keys)
                raise ScanError(
                    f"cannot resume: {path} is from another scan ({what} differs: {json.dumps(theirs)} there, {json.dumps(mine)} now); "
                    "give another --out, or scan again without --resume"
                )
        out.header["started"] = old.get("started", out.header["started"])
        out.seconds_before = float(old.get("seconds", 0.0))
        try:
            for d in old.get("results", []):
                r = InputResult.from_dict(d)
                out.results[r.id] = r
        except (KeyError, TypeError, ValueError) as e:
            raise ScanError(f"cannot resume: a result in {path} is not one a scan writes ({e})") from None
        out.incidents = list(old.get("incidents", []))
        out.resumed = len(out.results)
        out.failed = sum(1 for r in out.results.values() if r.failed)
        return out

    def add(self, result: InputResult) -> None:
        old = self.results.get(result.id)
        self.failed += int(result.failed) - int(old is not None and old.failed)
        self.results[result.id] = result

    def incident(self, incident: Incident) -> None:
        self.incidents.append({"message": incident.message, "worker": incident.worker, "input": incident.input_id, "time": now_text()})

    def done(self, ident: str) -> bool:
        return ident in self.results

    def ordered(self) -> list[InputResult]:
        return sorted(self.results.values(), key=lambda r: r.index)

    def to_dict(self, finished: bool = False) -> dict[str, Any]:
        results = self.ordered()
        c = counts(results)
        options = self.header.get("options", {})
        out = {
            **self.header,
            "updated": now_text(),
            "finished": finished,
            "seconds": round(self.seconds_before + time.monotonic() - self._began, 3),
            "done": len(results),
            "failed": sum(1 for r in results if r.failed),
            "counts": c,
            "first_bad_nodes": first_bad_nodes(results),
            "slowest": slowest(results),
            "worst": worst(results, options.get("metric") or Metric.MAX_ABS) if options.get("reference") else [],
            "incidents": self.incidents,
            "results": [self._entry(r) for r in results],
        }
        per_input = [(r.id, r.comparison["groups"]) for r in results if r.comparison and r.comparison.get("groups")]
        if per_input:
            from graph_dap.runtime.tools.quant.dataset import aggregate

            out["groups"] = aggregate(per_input)
        return out

    def _entry(self, r: InputResult) -> dict[str, Any]:
        d = r.to_dict()
        if r.failed:
            d["replay"] = replay(self.header, r, self.path.parent)
        return d

    def write(self, force: bool = False, finished: bool = False) -> bool:
        """Rewrite the file (atomically) unless it was written very recently; True when it was written."""
        now = time.monotonic()
        if not force and now - self._last_write < max(_MIN_INTERVAL_S, _WRITE_SHARE * self._write_cost):
            return False
        write_text_atomic(self.path, json.dumps(self.to_dict(finished), indent=1) + "\n")
        self._last_write = time.monotonic()
        self._write_cost = self._last_write - now
        return True


def _get(d: Mapping[str, Any], keys: tuple[str, ...]) -> Any:
    cur: Any = d
    for k in keys:
        cur = cur.get(k) if isinstance(cur, Mapping) else None
    return cur


def read_scan(path: str | Path) -> dict[str, Any]:
    """A results file as a dict (a ScanError when it is not one)."""
    p = Path(path)
    if p.is_dir():
        p = p / "scan.json"
    try:
        data = json.loads(p.read_text())
    except (OSError, ValueError) as e:
        raise ScanError(f"cannot read {p} as a scan's results: {e}") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise ScanError(f"{p} is not a graph-dap scan's results file")
    return data
