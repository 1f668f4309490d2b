"""How to debug one failing input of a scan: the ``graph-dap`` command, and a VS Code launch configuration.

Both replay the input kept in ``DIR/failing/<id>.npz`` with the scan's own filters,
so the run stops at the node the scan named: the first NaN/Inf or failing node, or
with a reference the first divergence (the ``mismatch`` filter).
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from graph_dap.kinds import VALUE_FILTERS, BreakFilter
from graph_dap.runtime.tools.references import parse_reference
from graph_dap.runtime.tools.scan.results import InputResult, ScanStatus

_COMPARE_FLAG = {"provider": "--against-provider", "model": "--against-model", "opt_level": "--against-opt-level"}


def replay(header: Mapping[str, Any], result: InputResult, out_dir: Path) -> dict[str, Any]:
    """``{"inputs", "command", "launch"}`` for a failing input (``inputs`` None when it could not be kept)."""
    model = str(header.get("model", {}).get("path", ""))
    options = header.get("options", {})
    inputs = str((out_dir / result.failing_file).resolve()) if result.failing_file else None
    if result.status is ScanStatus.INVALID:
        return {"inputs": inputs, "command": None, "launch": None, "note": "the input does not fit the model: nothing to run"}
    breaks = [f for f in options.get("break_on", []) if f in VALUE_FILTERS] + [BreakFilter.ERROR.value]
    excludes = list(options.get("inf_exclude", []))
    nan_excludes = list(options.get("nan_exclude", []))
    dims = dict(options.get("dims", {}))
    args = ["graph-dap"]
    launch: dict[str, Any] = {"type": "graph-dap", "request": "launch", "name": f"Scan: {result.id}", "model": model}
    if inputs:
        launch["inputs"] = inputs
    if dims:
        launch["dims"] = dims
    if options.get("providers"):
        launch["providers"] = list(options["providers"])
    if result.status is ScanStatus.MISMATCH and options.get("reference"):
        ref = parse_reference(options["reference"])
        tol = options.get("tolerance") or {}
        args += ["compare", model, _COMPARE_FLAG[ref.kind], ref.target]
        args += [f"--atol={tol.get('atol')}", f"--rtol={tol.get('rtol')}"] + [f"--fail-if={c}" for c in tol.get("fail_if", [])]
        launch["reference"] = options["reference"]
        launch["tolerance"] = {"atol": tol.get("atol"), "rtol": tol.get("rtol"), "failIf": list(tol.get("fail_if", []))}
        launch["breakOn"] = [BreakFilter.MISMATCH.value, BreakFilter.ERROR.value]
    else:
        args += ["run", model, "--break-on", ",".join(breaks)] + [f"--inf-exclude={p}" for p in excludes]
        args += [f"--nan-exclude={p}" for p in nan_excludes]
        launch["breakOn"] = breaks
        if excludes:
            launch["infExclude"] = excludes
        if nan_excludes:
            launch["nanExclude"] = nan_excludes
    if inputs:
        args += ["--inputs", inputs]
    args += [f"--dim={k}={v}" for k, v in dims.items()]
    args += [f"--provider={p}" for p in options.get("providers", [])]
    return {"inputs": inputs, "command": shlex.join(args), "launch": launch}
