"""ONNX's conformance suites through graph-dap: every case that plain onnxruntime passes passes here too.

The node cases (all of ONNX's operators, control flow, sequences, optionals, strings, 0-d
scalars) and the simple, pytorch-operator and pytorch-converted suites of the onnx wheel, on
both engines: segments (without filters: control-flow nodes run whole; with the NaN/Inf
filters: their bodies are stepped through and watched) and node by node. A case that
plain onnxruntime fails is skipped with onnxruntime's reason. Outputs are held to the
suite's tolerance; float16 outputs that miss it are accepted within 2 ULP of onnxruntime's
own output (node by node, float16 kernels round differently by a step or two); the
outputs of control-flow and sequence cases must equal onnxruntime's bit for bit.
"""

from __future__ import annotations

import numpy as np
import pytest
from conformance import Case, all_cases, bit_equal, close, file_case, float16_ulps, node_cases, plain_run

from graph_dap.runtime import DebugSession, StopReason

CASES = list(all_cases())
assert len(CASES) > 1800, f"only {len(CASES)} conformance cases were found"  # an empty list would test nothing

CONFIGS = [(True, ()), (True, ("nan", "inf")), (False, ("nan", "inf"))]


def _case(name: str) -> Case:
    return file_case(name) if "/" in name else node_cases()[name]


def _run(case: Case, fast: bool, filters: tuple[str, ...]) -> list:
    s = DebugSession(case.model, case.inputs, fast=fast, break_on=filters)
    stop = s.continue_()
    for _ in range(10_000):
        if stop.reason is StopReason.END:
            break
        # A NaN or Inf this case makes on purpose: the stop must be real, then the run goes on.
        assert stop.reason in (StopReason.NAN, StopReason.INF), f"{stop.reason.value}: {stop.message}"
        value = np.asarray(s.value(stop.value))
        assert (np.isnan(value) if stop.reason is StopReason.NAN else np.isinf(value)).any(), stop.message
        stop = s.continue_()
    outputs = s.outputs()
    return [outputs.get(v.name) for v in s.graph.outputs]


@pytest.mark.parametrize("name", CASES)
def test_a_case_that_onnxruntime_passes_passes_through_graph_dap(name):
    case = _case(name)
    try:
        plain = plain_run(case)
    except Exception as e:  # noqa: BLE001 - onnxruntime's own failure is why the case is skipped
        pytest.skip(f"plain onnxruntime fails it: {str(e).splitlines()[0][:200]}")
    if not all(close(p, w, case.rtol, case.atol) for p, w in zip(plain, case.expected)):
        pytest.skip("plain onnxruntime's outputs miss the expected ones")
    for fast, filters in CONFIGS:
        got = _run(case, fast, filters)
        where = f"{'segments' if fast else 'node by node'}{' with ' + '+'.join(filters) if filters else ''}"
        for k, (g, w, p) in enumerate(zip(got, case.expected, plain)):
            if case.control_flow:
                assert bit_equal(g, p), f"{where}: output {k} differs from onnxruntime's"
            if not close(g, w, case.rtol, case.atol):
                ulps = float16_ulps(g, p)
                assert ulps is not None and ulps <= 2, f"{where}: output {k} misses the expected value"
