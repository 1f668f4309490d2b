"""The NaN and Inf break filters: exact checks, and reading the in-graph sums.

A sum of a tensor is NaN when the tensor holds NaN (or both +Inf and -Inf), and
+/-Inf when it holds that infinity and no NaN, or when large finite values
overflow. So a NaN filter alone can ignore infinite sums, and every hit is
confirmed on the exact tensor before a stop is reported.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from graph_dap.kinds import Fault
from graph_dap.runtime.dtypes import can_fault, numeric
from graph_dap.runtime.engine.masks import NO_INTENT, Intent, summary
from graph_dap.runtime.engine.watch import WatchPlan
from graph_dap.runtime.graph import Lookup, Node
from graph_dap.runtime.tensor import first_nonfinite


@dataclass(frozen=True, slots=True)
class FaultFilter:
    """Which faults stop a run: NaN, Inf, minus the nodes whose Inf (``inf_exclude``) or NaN (``nan_exclude``) is
    expected (globs over node ids, ``op:TYPE``), and what the model makes on purpose (``intent``, see :mod:`.masks`)."""

    nan: bool
    inf: bool
    inf_exclude: tuple[str, ...] = ()
    nan_exclude: tuple[str, ...] = ()
    intent: Intent = NO_INTENT

    @property
    def active(self) -> bool:
        return self.nan or self.inf

    def inf_excluded(self, node: Node) -> bool:
        return node.id in self.intent.inf or _matches(node, self.inf_exclude)

    def nan_excluded(self, node: Node) -> bool:
        return node.id in self.intent.nan or _matches(node, self.nan_exclude)

    def never_prune(self, node: Node) -> bool:
        """Excluded nodes keep their own sum, so their Inf (NaN) is never blamed on a consumer."""
        return (self.inf and self.inf_excluded(node)) or (self.nan and self.nan_excluded(node))

    def exclusions(self) -> list[dict[str, str]]:
        """What this filter leaves alone, and why: ``{node, kind, why}`` for what the model makes on purpose,
        ``{pattern, kind, why}`` for the user's exclusions (only the kinds watched)."""
        out: list[dict[str, str]] = []
        for kind, on, patterns in ((Fault.INF, self.inf, self.inf_exclude), (Fault.NAN, self.nan, self.nan_exclude)):
            if on:
                out += [{"node": n, "kind": kind, "why": why} for n, k, why in self.intent.why if k is kind]
                out += [{"pattern": p, "kind": kind, "why": f"--{kind}-exclude"} for p in patterns]
        return out

    def exclusions_text(self) -> str:
        """:meth:`exclusions` in a line (empty when none)."""
        kinds = [k for k, on in ((Fault.INF, self.inf), (Fault.NAN, self.nan)) if on]
        parts = [summary(self.intent, kinds)] if any(k in kinds for _, k, _ in self.intent.why) else []
        for kind, patterns in ((Fault.INF, self.inf_exclude), (Fault.NAN, self.nan_exclude)):
            if kind in kinds and patterns:
                parts.append(f"the {'Inf' if kind is Fault.INF else 'NaN'} of {', '.join(patterns)} (--{kind}-exclude)")
        return "; ".join(p for p in parts if p)

    def kind_of(self, node: Node, value: Any) -> Fault | None:
        """NaN or Inf when ``value`` holds what this filter stops on, else None."""
        if value is None or isinstance(value, list):
            return None
        a = np.asarray(value)
        if not can_fault(a.dtype) or a.size == 0:
            return None
        if a.ndim and not any(a.strides):
            a = a.reshape(-1)[:1]  # one value seen everywhere (a ConstantOfShape's, see the session's start)
        with np.errstate(all="ignore"):
            total = np.add.reduce(a, axis=None)  # one pass: any NaN or Inf makes it non-finite (an overflow too: checked below)
        if np.isfinite(total):
            return None
        if self.nan and not self.nan_excluded(node) and np.isnan(a).any():
            return Fault.NAN
        if self.inf and not self.inf_excluded(node) and np.isinf(a).any():
            return Fault.INF
        return None

    def check(self, node: Node, outs: Mapping[str, Any]) -> tuple[str, Fault] | None:
        """The first output of ``node`` holding a watched fault, and its kind."""
        if not self.active:
            return None
        for name in node.outputs:
            kind = self.kind_of(node, outs.get(name)) if name else None
            if kind is not None:
                return name, kind
        return None

    @staticmethod
    def from_finite(node: Node, read: Callable[[str], Any]) -> bool:
        """Whether every input of ``node`` (``read`` gives them) is free of NaN and Inf: a fault in its
        output is then one it made, not one it carried on."""
        for name in node.all_inputs:
            value = read(name)
            if value is None or isinstance(value, (list, dict)):
                continue
            a = np.asarray(value)
            if not can_fault(a.dtype) or a.size == 0:
                continue
            a = numeric(a)
            with np.errstate(all="ignore"):
                if not np.isfinite(np.add.reduce(a, axis=None)) and not np.isfinite(a).all():
                    return False
        return True

    def _flagged(self, node: Node, s: float) -> bool:
        if np.isnan(s):  # a NaN, or +Inf with -Inf (where NaN is expected, neither stops the run)
            return not self.nan_excluded(node)
        if np.isinf(s):
            return self.inf and not self.inf_excluded(node)
        return False

    def fired(self, plan: WatchPlan, sums: np.ndarray, order: Sequence[str] | None = None) -> list[str]:
        """The watched tensors whose sum is NaN (the sure sign of a NaN or of +Inf with -Inf), in the sums' order."""
        return [name for name, s in zip(plan.watched if order is None else order, sums.tolist()) if np.isnan(s) and name not in plan.quiet_nan]

    def first_fault(
        self,
        graph: Lookup,
        plan: WatchPlan,
        sums: np.ndarray,
        get: Callable[[str], Any],
        order: Sequence[str] | None = None,
        prefetch: Callable[[list[str]], Any] | None = None,
        new_only: bool = False,
        cleared: Callable[[str], bool] | None = None,
    ) -> tuple[Node, str, Fault] | None:
        """The first node, in run order, whose output holds a fault: from the sums, confirmed exactly.

        ``prefetch(names)``: makes the candidates' values (and their producers' inputs) ready at once before they
        are read one by one (recomputed each on its own, each would run again everything before it).
        ``new_only``: only a node that makes a fault from finite inputs counts (:meth:`from_finite`), not one
        that carries on a fault found before. ``cleared(name)``: whether a tensor shown only by its guard is known to
        hold no fault (a finite checkpoint lies between them: the fault would have been carried through it)."""
        flagged = set()
        for name, s in zip(plan.watched if order is None else order, sums.tolist()):
            producer = plan.inner.get(name) or graph.producer(name)
            assert producer is not None
            # an inner flag holds no Inf made on purpose (those are left out inside): any non-finite sum counts
            if (name in plan.inner and not np.isfinite(s)) or (name not in plan.inner and self._flagged(producer, s)):
                flagged.add(name)
        if not flagged:
            return None
        # Every faulty tensor is flagged or guarded by a flagged one. A flagged sum does not
        # prove a fault (a NaN sum may be +Inf and -Inf under the inf filter alone; an infinite
        # one may be an overflow), so candidates are confirmed in run order, all of them if need be.
        # (a Relu's input left to a bound is looked at when the sum of the bound's source fires too)
        shown = {t for t, guard in plan.guards.items() if guard in flagged and not (cleared is not None and cleared(t))}
        shown |= {t for t, source in plan.bounded.items() if source in flagged}
        candidates = sorted(flagged | shown, key=lambda c: _position(graph, c, plan))
        # In batches: up to the first flagged tensor (its sum fired: most likely the fault) with the guarded
        # ones before it, then the rest; an inner flag ends a batch (the session steps into it instead).
        inner_at = next((k for k, c in enumerate(candidates) if c in plan.inner), len(candidates))
        first_end = min(next((k + 1 for k, c in enumerate(candidates) if c in flagged), inner_at), inner_at)
        batch_ends = {0: first_end, first_end: inner_at}  # where a batch starts -> where it ends
        for k, name in enumerate(candidates):
            if prefetch is not None and batch_ends.get(k, k) > k:
                # with their producers' inputs: the stop reads them (which held the fault already), and
                # left out they would be recomputed on their own, everything before them again
                batch = candidates[k : batch_ends[k]]
                reads = [i for c in batch for i in graph.producer(c).inputs if i]  # type: ignore[union-attr]
                prefetch(list(dict.fromkeys(batch + reads)))
            if name in plan.inner:
                return plan.inner[name], name, Fault.INNER  # somewhere inside this node: step into it to find where
            producer = graph.producer(name)
            assert producer is not None
            kind = self.kind_of(producer, get(name))
            if kind is not None and (not new_only or self.from_finite(producer, get)):
                return producer, name, kind
        return None  # overflowing sums of finite values (or, with new_only, faults carried on)

    def stop_details(self, node: Node, name: str, a: np.ndarray, kind: Fault, inputs: Mapping[str, Any], stop_cls: Any, reasons: Any) -> Any:
        count = int(np.isnan(a).sum()) if kind is Fault.NAN else int(np.isinf(a).sum())
        index = first_nonfinite(a, kind)
        held = []
        for i, v in inputs.items():
            if v is None or isinstance(v, list):
                continue
            arr = np.asarray(v)
            if can_fault(arr.dtype) and (np.isnan(arr).any() if kind is Fault.NAN else np.isinf(arr).any()):
                held.append(i)
        label = "NaN" if kind is Fault.NAN else "Inf"
        where = f" at index {list(index)}" if index is not None else ""
        origin = f"; input {', '.join(held)} already held {label}" if held else "; none of its inputs held any"
        message = f"{node.label} produced {count} {label} in '{name}'{where}{origin}"
        details: dict[str, Any] = {"count": count, "first_index": list(index) if index else None, "input_had_it": bool(held), "inputs_with_it": held}
        left = self.exclusions_text()
        if left:  # what the watch left alone on purpose, so that a stop past it is understood
            message += f"; not watched: {left}"
            details["excluded"] = self.exclusions()
        if kind is Fault.INF:
            details["posinf"] = int(np.isposinf(a).sum())
            details["neginf"] = int(np.isneginf(a).sum())
        return stop_cls(reasons.NAN if kind is Fault.NAN else reasons.INF, node, message, name, details)


def _matches(node: Node, patterns: Iterable[str]) -> bool:
    for pat in patterns:
        if pat.startswith("op:"):
            if node.op_type == pat[3:]:
                return True
        elif fnmatch.fnmatchcase(node.id, pat):
            return True
    return False


def _position(graph: Lookup, value: str, plan: WatchPlan) -> tuple[int, int]:
    if value in plan.inner:
        return (plan.inner[value].order, -1)  # what happens inside a node comes before its outputs
    p = graph.producer(value)
    if p is None:
        return (-1, 0)
    return (p.order, p.outputs.index(value))



