"""A scan's reference: the outputs each input should give, from a run graph-dap can repeat per input.

Every input's outputs are compared with those of the model on another provider,
at another optimization level, or of another model (inputs and outputs matched by
name), each run whole by onnxruntime: cheap next to the watched run. Only an input
whose outputs break the tolerance is run again in lockstep with the reference, node
by node, to find the node where the difference starts.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import onnxruntime as ort

from graph_dap.errors import CompareError
from graph_dap.kinds import OptLevel
from graph_dap.runtime.engine.options import ORT_ERRORS, check_opt_level, check_providers, ort_message, session_options
from graph_dap.runtime.graph import Graph
from graph_dap.runtime.loading import read_model
from graph_dap.runtime.tools.metrics import HIGHER_IS_WORSE, METRICS, Metric, Tolerance, compare_arrays, json_number
from graph_dap.runtime.tools.references import Reference, ReferenceKind, parse_reference

KINDS = ("provider", "opt_level", "model")


def check_reference(spec: str) -> Reference:
    """A reference a scan can run for every input (a dump holds one input's values: refused)."""
    ref = parse_reference(spec)
    if ref.kind not in KINDS:
        raise CompareError(
            f"a scan compares every input with a reference it runs itself: give provider:NAME, opt_level:LEVEL or "
            f"model:OTHER.onnx, not a dump ({ref.target} holds one input's values)"
        )
    if ref.kind is ReferenceKind.OPT_LEVEL:
        check_opt_level(ref.target.lower(), ref.target)
    return ref


class OutputsReference:
    """The reference's outputs for one input, from one onnxruntime session made once per worker."""

    def __init__(
        self,
        graph: Graph,
        reference: Reference,
        base_dir: Path,
        providers: Sequence[str] | None = None,
        model_bytes: bytes | None = None,
    ) -> None:
        self.reference = reference
        target = reference.target
        level: str = OptLevel.NONE
        folder = None
        if reference.kind is ReferenceKind.PROVIDER:
            chosen = check_providers([target])
        else:
            chosen = check_providers(providers)
        if reference.kind is ReferenceKind.MODEL:
            path = base_dir / target
            read_model(path, external_data=False)  # checked here; onnxruntime reads it (and its external data) from its file
            model: Any = str(path)
            self.label = f"{path.name} on {', '.join(chosen)}"
        else:
            if reference.kind is ReferenceKind.OPT_LEVEL:
                level = check_opt_level(target.lower(), target)
            model = model_bytes if model_bytes is not None else graph.model.SerializeToString()
            folder = graph.weights.data_folder if model_bytes is None else None
            self.label = f"the model on {', '.join(chosen)} at optimization level '{level}'"
        try:
            self.session = ort.InferenceSession(model, session_options(level, folder), providers=chosen)
        except ORT_ERRORS as e:
            raise CompareError(f"onnxruntime cannot load the reference ({self.label}): {ort_message(e)}") from None
        self.input_names = [i.name for i in self.session.get_inputs()]
        self.output_names = [o.name for o in self.session.get_outputs()]
        missing = [n for n in self.input_names if n not in graph.input_names]
        if missing:
            raise CompareError(
                f"the reference's input '{missing[0]}' has no counterpart among the model's inputs ({', '.join(graph.input_names)})"
            )
        self.shared = [n for n in graph.output_names if n in self.output_names]
        if not self.shared:
            raise CompareError(
                f"the reference shares no output name with the model (model: {', '.join(graph.output_names)}; "
                f"reference: {', '.join(self.output_names)})"
            )

    def outputs(self, feeds: Mapping[str, Any]) -> dict[str, Any]:
        """The reference's shared outputs for these inputs (a CompareError when onnxruntime fails)."""
        try:
            values = self.session.run(self.shared, {n: feeds[n] for n in self.input_names})
        except ORT_ERRORS as e:
            raise CompareError(f"the reference failed on this input ({self.label}): {ort_message(e)}") from None
        return dict(zip(self.shared, values))


def compare_outputs(ours: Mapping[str, Any], theirs: Mapping[str, Any], tolerance: Tolerance, metric: str) -> dict[str, Any]:
    """Each shared output judged by ``tolerance``; the worst one (a failing one first, then by ``metric``)."""
    per: dict[str, dict[str, Any]] = {}
    worst_name, worst_key = None, None
    for name, ref in theirs.items():
        if name not in ours:
            continue
        c = compare_arrays(ours[name], ref, tolerance)
        per[name] = {"passed": c.passed, "metrics": {k: json_number(v) for k, v in c.metrics.items()}, "mismatches": c.mismatches}
        if c.note:
            per[name]["note"] = c.note
        v = c.metrics.get(metric)
        score = 0.0 if v is None else (v if metric in HIGHER_IS_WORSE else -v)
        key = (not c.passed, score if score == score else float("inf"))
        if worst_key is None or key > worst_key:
            worst_name, worst_key = name, key
    worst = per.get(worst_name or "", {})
    return {
        "passed": all(p["passed"] for p in per.values()),
        "outputs": per,
        "worst_output": worst_name,
        "worst_metrics": dict(worst.get("metrics", {})),
        "metric": metric if metric in METRICS else Metric.MAX_ABS,
    }
