"""``graph-dap compare QUANT.onnx --against-model FLOAT.onnx``: a quantized model against its float model, group by group.

The work is :mod:`graph_dap.runtime.tools.quant`; this prints it: the pairing, the groups ranked by
local error, the first divergence, the weights, the sensitivity, and writes the report page.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from graph_dap.cli.options import EXIT_COMPLETED, EXIT_DIVERGED, UsageError, parse_dims
from graph_dap.cli.progress import ProgressBar
from graph_dap.kinds import OptLevel

#: Options that only mean something against a float model.
QUANT_OPTIONS = ("structure", "show_pairs", "pairs", "sensitivity", "sensitivity_data", "target_snr", "report")


def quant_options_given(args: argparse.Namespace) -> list[str]:
    """The quantized-model options given on the command line (``--show-pairs``...)."""
    return ["--" + o.replace("_", "-") for o in QUANT_OPTIONS if getattr(args, o, None) not in (None, False)]


def wants_quant(args: argparse.Namespace) -> bool:
    """Whether ``compare`` runs the quantized-model comparison: a model reference and one side quantized, or its options."""
    given = quant_options_given(args)
    if not args.against_model:
        if given:
            raise UsageError(
                f"graph-dap: {given[0]} compares a quantized model with its float model: give --against-model FLOAT.onnx"
            )
        return False
    if given:
        return True
    from graph_dap.runtime.loading import read_model
    from graph_dap.runtime.tools.quant.view import QUANT_OPS

    quant_ops = set(QUANT_OPS) | {"QuantizeLinear", "DequantizeLinear", "DynamicQuantizeLinear"}
    for path in (args.model, args.against_model):
        model = read_model(path, external_data=False)
        if any(n.op_type in quant_ops for n in model.graph.node):
            return True
    return False


def run(args: argparse.Namespace) -> int:
    """Compare, print (text or JSON), write the report; the exit status (1 when a group fails the rule)."""
    from graph_dap.runtime.tools.metrics import Condition
    from graph_dap.runtime.tools.quant.analysis import DEFAULT_RULE, compare_quantized

    if args.target_snr is not None and not args.sensitivity:
        raise UsageError("graph-dap: --target-snr needs --sensitivity")
    if args.sensitivity_data is not None and not args.sensitivity:
        raise UsageError("graph-dap: --sensitivity-data needs --sensitivity")
    rule = tuple(Condition.parse(c) for c in args.fail_if) or DEFAULT_RULE
    ignored = ["--atol"] * (args.atol is not None) + ["--rtol"] * (args.rtol is not None)
    bar = ProgressBar.on_terminal(args.json, unit="groups")
    result = compare_quantized(
        args.model,
        args.against_model,
        args.inputs,
        dims=parse_dims(args.dim),
        providers=args.provider or None,
        rule=rule,
        pairs_file=args.pairs,
        on_progress=bar.update if bar else None,
    )
    if bar:
        bar.close()
    if args.sensitivity:
        from graph_dap.runtime.tools.quant.sensitivity import run_sensitivity

        data = None
        if args.sensitivity_data is not None:
            from graph_dap.runtime.tools.scan.sources import ItemLoader, open_source

            loader = ItemLoader(result.pairing.float_view.graph, parse_dims(args.dim))
            data = [loader.load(item) for item in open_source(args.sensitivity_data).items()]
        bar = ProgressBar.on_terminal(args.json, unit="groups kept in float")
        result.sensitivity = run_sensitivity(
            result, args.inputs, data=data, dims=parse_dims(args.dim), providers=args.provider or None,
            target_snr=args.target_snr, on_progress=bar.update if bar else None,
        )  # fmt: skip
        if bar:
            bar.close()
    if args.opt_level not in (None, OptLevel.NONE):
        from graph_dap.runtime.tools.quant.kernels import compare_kernels

        result.kernels = compare_kernels(result, args.inputs, dims=parse_dims(args.dim), providers=args.provider or None,
                                         opt_level=args.opt_level)  # fmt: skip
    if ignored:
        result.notes.append(f"{' and '.join(ignored)} do not apply to a quantized model: the rule is {', '.join(map(str, rule))}")
    report = result.to_dict()
    if args.report:
        from graph_dap.runtime.tools.quant.report import write_report

        path = write_report(result, Path(args.report))
        report["report"] = str(path)
    if args.json:
        print(json.dumps(report))
    else:
        print(quant_text(result, args, report))
    return EXIT_DIVERGED if result.failures else EXIT_COMPLETED


def quant_text(result: Any, args: argparse.Namespace, report: dict[str, Any]) -> str:
    from graph_dap.runtime.tools.quant.analysis import GroupOrder

    lines = [
        f"run:       {result.run_label}",
        f"reference: {result.reference_label}",
        f"rule:      {result.rule_text()}",
        f"pairing:   {result.pairing.summary()}",
    ]
    lines += [f"note:      {n}" for n in result.notes[1:]]
    if args.show_pairs:
        lines += ["", result.pairing.text()]
    lines.append("")
    order = "ranked by local error, worst first" if args.order == GroupOrder.LOCAL else "in graph order"
    lines.append(f"{len(result.groups)} groups, {order} (SQNR in dB: accumulated, local, quantization-only; steps: local max error / scale):")
    groups = result.table_text(args.order, args.top)
    if args.failed:
        head, *rows = groups.splitlines()
        groups = "\n".join([head] + [r for r in rows if "FAIL" in r or "born here" in r])
    lines.append(groups)
    lines.append("")
    lines.append(f"{len(result.groups) - result.failures} groups within the rule, {result.failures} not")
    first = result.first_divergence
    if first is not None:
        lines.append(
            f"first divergence (local error): {first.group.name} ({first.group.ops}) -> {', '.join(p.float_name for p in first.group.outputs)}: "
            f"local {first.local.snr:.2f} dB, accumulated {first.accumulated.snr:.2f} dB"
        )
    else:
        lines.append("first divergence: none: no group's local error breaks the rule")
    worst = result.ranked[0]
    lines.append(f"worst local error: {worst.group.name} ({worst.group.ops}): {worst.local.snr:.2f} dB")
    lines.append("")
    lines.append(result.weights_text())
    if result.sensitivity is not None:
        lines += ["", result.sensitivity.text()]
    if result.kernels is not None:
        lines += ["", result.kernels.text()]
    if report.get("report"):
        lines += ["", f"report: {report['report']}"]
    return "\n".join(lines)
