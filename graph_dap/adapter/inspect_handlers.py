"""Requests that look at a stopped run: threads, frames, scopes, variables, evaluate, set, memory, completions."""

from __future__ import annotations

import base64
import os
from typing import Any

from graph_dap.adapter.core import EXCEPTION_NAMES, FRAME_ID, THREAD_ID
from graph_dap.adapter.requests import CantHandle, InvalidRequest, Request, checked
from graph_dap.adapter.source_handlers import SourceRequests
from graph_dap.adapter.variables import (
    MAX_UNPAGED,
    PAGE,
    Handles,
    ScopeKind,
    ScopeRef,
    TensorRef,
    element_variable,
    parse_settable,
    stat_variables,
    subscript,
    tensor_variable,
)
from graph_dap.names import quoted, unquoted
from graph_dap.worker import protocol as p
from graph_dap.worker.protocol import Summary


class InspectionRequests(SourceRequests):
    """The handlers a client calls while the run is stopped (and threads, at any time)."""

    async def threads_request(self, request: Request) -> dict[str, Any]:
        name = "model run" if self.graph is None else f"model run: {os.path.basename(self.graph.model_path)}"
        return {"threads": [{"id": THREAD_ID, "name": name}]}

    async def stackTrace_request(self, request: Request) -> dict[str, Any]:
        self._thread(request)
        self._need_stopped()
        start = max(request.arg("startFrame", int, 0), 0)
        levels = request.arg("levels", int, 0)
        stop = self.run.stop
        assert stop is not None
        frames: list[dict[str, Any]] = []
        # Frame 0: the node; then its Python frames, innermost first (or its module scopes); then one frame per
        # enclosing control-flow node, innermost first ("Loop_3 (Loop) body, iteration 5"); the last is the
        # main-graph node that holds them all.
        for level in range(max(len(stop.frames), 1)):
            node = self._frame_node(level)
            if node is not None and self.listing is not None:
                name = node.label if level == 0 else stop.frames[level].name
                frame = {"id": FRAME_ID + level, "name": name, "source": self.listing.source(), "line": self._line_out(node.line), "column": 1}
                frames.append(frame)
            else:
                frames.append({"id": FRAME_ID + level, "name": "end of the graph", "line": 0, "column": 0, "presentationHint": "label"})
        await self._source_frames(frames)
        chosen = frames[start : start + levels] if levels > 0 else frames[start:]
        return {"stackFrames": chosen, "totalFrames": len(frames)}

    async def source_request(self, request: Request) -> dict[str, Any]:
        ref = request.arg("sourceReference", int, 0)
        source = request.arguments.get("source")
        if self.listing is not None and (
            ref == self.listing.reference or (isinstance(source, dict) and self.listing.matches(source))
        ):
            return {"content": self.listing.text, "mimeType": "text/plain"}
        raise InvalidRequest(f"unknown sourceReference {ref}")

    async def exceptionInfo_request(self, request: Request) -> dict[str, Any]:
        self._thread(request)
        self._need_stopped()
        stop = self.run.stop
        assert stop is not None
        if stop.reason not in EXCEPTION_NAMES:
            raise CantHandle("the run is not stopped on an exception (nan, inf, error or mismatch)")
        details: dict[str, Any] = {"message": stop.message, "typeName": EXCEPTION_NAMES[stop.reason]}
        if stop.value:
            details["evaluateName"] = quoted(stop.value)
        facts = [f"{k}: {v}" for k, v in stop.details.items() if v not in (None, [], {})]
        if stop.path:
            where = " > ".join(f"{s.node} > {s.attribute}" + (f" (iteration {s.iteration})" if s.iteration is not None else "") for s in stop.path)
            facts.insert(0, f"in: {where}")
        if facts:
            details["stackTrace"] = "\n".join(facts)
        return {"exceptionId": stop.reason, "description": stop.message, "breakMode": "always", "details": details}

    # -- scopes and variables ---------------------------------------------------------

    async def _computed(self, level: int = 0) -> list[str]:
        """The level's values at this stop: inputs and computed ones in run order, then the initializers (so that a
        client's first page of a model with hundreds of weights shows what the run computed)."""
        cache = self.variables.computed_at
        if level not in cache:
            worker = self._need_stopped()
            computed = list((await worker.values(level, warm=not self._client.invalidated)).computed)
            weights = set(self.graph.initializers) if self.graph is not None else set()
            cache[level] = [n for n in computed if n not in weights] + [n for n in computed if n in weights]
        return cache[level]

    async def scopes_request(self, request: Request) -> dict[str, Any]:
        self._need_stopped()
        frame_id = request.arg("frameId", int)
        level = self._level(frame_id)
        stop = self.run.stop
        assert self.graph is not None and stop is not None and self.listing is not None
        node = self._frame_node(level)
        last_id = stop.frames[level].last_node if level < len(stop.frames) else stop.last_node
        last = self.listing.nodes.get(last_id) if last_id else None
        node_id = node.id if node else None
        counts = [
            ("Inputs", ScopeRef(ScopeKind.INPUTS, node_id, level), len(node.inputs) if node else 0, "arguments", False),
            ("Attributes", ScopeRef(ScopeKind.ATTRIBUTES, node_id, level), len(node.attributes) if node else 0, None, False),
            ("Last outputs", ScopeRef(ScopeKind.LAST, last.id if last else None, level), len(last.outputs) if last else 0, "returnValue", False),
            ("Values", ScopeRef(ScopeKind.VALUES, None, level), len(await self._computed(level)), "locals", False),
            ("Initializers", ScopeRef(ScopeKind.INITIALIZERS, None, level), len(self.graph.initializers), None, True),
            ("Graph outputs", ScopeRef(ScopeKind.OUTPUTS, None, level), len(self.graph.outputs), None, False),
        ]
        scopes = []
        for name, ref, count, hint, expensive in counts:
            scope: dict[str, Any] = {
                "name": name,
                "variablesReference": self.variables.handles.create(ref),
                "expensive": expensive or count > PAGE,
            }
            scope["indexedVariables" if count > PAGE else "namedVariables"] = count
            if hint:
                scope["presentationHint"] = hint
            scopes.append(scope)
        module = self._module_scope(frame_id)
        if module is not None:  # a Python frame: its module first, then the values of the node's level
            scopes = [module] + [s for s in scopes if s["name"] not in ("Inputs", "Attributes", "Last outputs")]
        return {"scopes": scopes}

    async def _scope_names(self, ref: ScopeRef) -> list[str]:
        assert self.graph is not None and self.listing is not None
        if ref.kind is ScopeKind.INPUTS:
            return list(self.listing.nodes[ref.node].inputs) if ref.node else []
        if ref.kind is ScopeKind.LAST:
            return list(self.listing.nodes[ref.node].outputs) if ref.node else []
        if ref.kind is ScopeKind.VALUES:
            return await self._computed(ref.level)
        if ref.kind is ScopeKind.INITIALIZERS:
            return list(self.graph.initializers)
        return list(self.graph.outputs)

    async def variables_request(self, request: Request) -> dict[str, Any]:
        reference = request.arg("variablesReference", int)
        which = request.arg("filter", str, None)
        start = max(request.arg("start", int, 0), 0)
        count = max(request.arg("count", int, 0), 0)
        hex_ = bool(checked(request.arg("format", dict, {}), "hex", bool, False, "format"))
        worker = self._need_stopped()
        container = self.variables.handles.get(reference)
        if container is None:
            raise InvalidRequest(f"unknown variablesReference {reference} (references last until the run moves on)")
        if isinstance(container, ScopeRef):
            if container.kind is ScopeKind.MODULE:
                return {"variables": await self._module_variables(container)}
            if container.kind is ScopeKind.ATTRIBUTES:
                node = self.listing.nodes[container.node] if self.listing and container.node else None
                attributes = node.attributes if node else ()
                return {"variables": [{"name": k, "value": v, "variablesReference": 0} for k, v in attributes]}
            names = await self._scope_names(container)
            if which == "named" and len(names) > PAGE:
                names = []
            else:
                names = names[start : start + count] if count else names[start : start + MAX_UNPAGED]
            # A client told when to ask again gets the weights not summarized yet shape only, at once (see SummarizedEvent)
            quick = self._client.invalidated
            summaries = await worker.summaries(p.SummariesArgs(tuple(names), hex_, container.level, quick)) if names else ()
            if self.variables.shown_pending(container.level, [s.name for s in summaries if s.pending]):
                level = container.level
                self._later(lambda: self.channel.event("invalidated", {"areas": ["variables"], "stackFrameId": FRAME_ID + level}))
            return {"variables": [self._tensor_var(s, container.level) for s in summaries]}
        assert isinstance(container, TensorRef)
        summary: Summary | None = self.variables.handles.extra(reference)
        variables: list[dict[str, Any]] = []
        if which in (None, "named") and summary is not None:
            if summary.quantized and not container.index and container.temp is None:
                variables += await self._quant_forms(container, hex_)
            variables += stat_variables(summary)
        if which in (None, "indexed"):
            chunk = count or MAX_UNPAGED
            page = await worker.children(
                p.ChildrenArgs(container.name, container.index, start, chunk, container.temp, hex_, container.level)
            )
            for item in page.items:
                child = container.child(item.index)
                if item.summary is None:
                    variables.append(element_variable(container, item.index, item.scalar, item.dtype, item.key))
                else:
                    variables.append(tensor_variable(item.summary, child, self.variables.handles, name=f"[{item.index}]"))
                self.variables.remember(child)
        return {"variables": variables}

    async def _quant_forms(self, ref: TensorRef, hex_: bool) -> list[dict[str, Any]]:
        """A quantized tensor's forms (integer, dequantized, and with a reference its float tensor and the error), as
        tensors the client expands, views and watches like any other."""
        worker = self._need_stopped()
        found = await worker.quant_forms(p.QuantFormsArgs(ref.name, hex_, ref.level))
        out = []
        for form in found.forms:
            child = TensorRef(form.summary.name, (), form.temp, form.expression, ref.level)
            var = tensor_variable(form.summary, child, self.variables.handles, self._memory(), name=form.part)
            var["presentationHint"] = {"kind": "virtual", "attributes": ["readOnly"]}
            out.append(var)
        return out

    def _tensor_var(self, summary: Summary, level: int = 0) -> dict[str, Any]:
        ref = TensorRef(summary.name, (), None, quoted(summary.name), level)
        self.variables.remember(ref)
        return tensor_variable(summary, ref, self.variables.handles, self._memory())

    def _memory(self) -> Handles[Any] | None:
        """The memory references, for a client that reads memory."""
        return self.variables.memory if self._client.memory_references else None

    async def setVariable_request(self, request: Request) -> dict[str, Any]:
        reference = request.arg("variablesReference", int)
        name = request.arg("name", str)
        value = request.arg("value", str)
        self._need_stopped()
        container = self.variables.handles.get(reference)
        if container is None:
            raise InvalidRequest(f"unknown variablesReference {reference}")
        if isinstance(container, ScopeRef):
            if container.kind in (ScopeKind.ATTRIBUTES, ScopeKind.MODULE):
                raise CantHandle(f"{'node attributes' if container.kind is ScopeKind.ATTRIBUTES else 'a module scope'} cannot be set")
            return await self._set(name, (), value, container.level)
        assert isinstance(container, TensorRef)
        if container.temp is not None:
            raise CantHandle("this is the result of an expression, not a value of the graph: set the value itself")
        if not (name.startswith("[") and name.endswith("]") and name[1:-1].isdigit()):
            raise CantHandle(f"'{name}' is a statistic of the tensor: set the tensor or its elements instead")
        return await self._set(container.name, container.index + (int(name[1:-1]),), value, container.level)

    async def setExpression_request(self, request: Request) -> dict[str, Any]:
        expression = request.arg("expression", str)
        value = request.arg("value", str)
        self._need_stopped()
        level = self._level(request.arg("frameId", int, FRAME_ID))
        target = self.variables.settable.get(expression.strip()) or parse_settable(expression)
        if target is None or self.graph is None or target[0] not in self.graph.value_names:
            raise CantHandle(f"'{expression}' is not a value (or an element of one) that can be set")
        return await self._set(target[0], target[1], value, level)

    async def _set(self, name: str, index: tuple[int, ...], expression: str, level: int = 0) -> dict[str, Any]:
        worker = self._need_stopped()
        result = await worker.set_value(p.SetValueArgs(name, expression, index, level))
        self.variables.computed_at.clear()
        if self._client.invalidated:
            self._later(lambda: self.channel.event("invalidated", {"areas": ["variables"], "threadId": THREAD_ID}))
        summary = result.summary
        if summary is None:
            return {"value": result.scalar, "variablesReference": 0}
        ref = TensorRef(name, index, None, subscript(quoted(name), index), level)
        var = tensor_variable(summary, ref, self.variables.handles, self._memory())
        body: dict[str, Any] = {
            k: var[k]
            for k in ("value", "type", "variablesReference", "namedVariables", "indexedVariables", "memoryReference")
            if k in var
        }
        return body

    async def readMemory_request(self, request: Request) -> dict[str, Any]:
        reference = request.arg("memoryReference", str)
        offset = request.arg("offset", int, 0)
        count = request.arg("count", int)
        worker = self._need_stopped()
        ref = self.variables.memory.get(int(reference[1:])) if reference[:1] == "m" and reference[1:].isdigit() else None
        if not isinstance(ref, TensorRef):
            raise InvalidRequest(f"unknown memoryReference {reference!r}")
        if count < 0:
            raise InvalidRequest("'count' must not be negative")
        got = await worker.read_memory(p.ReadMemoryArgs(ref.name, offset, count, ref.temp, ref.level))
        data = got.data
        body: dict[str, Any] = {"address": hex(got.start), "data": base64.b64encode(data).decode("ascii")}
        if len(data) < count:
            body["unreadableBytes"] = count - len(data)
        return body

    # -- evaluate and completions -----------------------------------------------------

    async def evaluate_request(self, request: Request) -> dict[str, Any]:
        expression = request.arg("expression", str)
        context = request.arg("context", str, "repl")
        hex_ = bool(checked(request.arg("format", dict, {}), "hex", bool, False, "format"))
        worker = self._need_stopped()
        level = self._level(request.arg("frameId", int, FRAME_ID))
        assert self.listing is not None
        memory = self._memory()
        word = expression.strip()
        node = self.listing.nodes.get(unquoted(word))
        if node is not None and context == "hover" and unquoted(word) not in self.graph.value_names:  # type: ignore[union-attr]
            summaries = await worker.summaries(p.SummariesArgs(node.outputs, hex_, level))
            outs = "; ".join(f"{s.name}: {s.text}" for s in summaries)
            return {"result": f"{node.label} -> {outs}", "variablesReference": 0}
        result = await worker.evaluate(p.EvaluateArgs(expression, context == "clipboard", hex_, level))
        summary = result.summary
        if summary is None:
            return {"result": result.text, "type": result.type, "variablesReference": 0}
        if result.value is not None:
            ref = TensorRef(result.value, (), None, quoted(result.value), level)
            self.variables.remember(ref)
        else:
            ref = TensorRef(expression, (), result.temp, f"({expression})", level)
        var = tensor_variable(summary, ref, self.variables.handles, memory)
        body: dict[str, Any] = {
            "result": result.text or var["value"],
            "type": var["type"],
            "variablesReference": var["variablesReference"],
        }
        for key in ("namedVariables", "indexedVariables", "memoryReference", "presentationHint"):
            if key in var:
                body[key] = var[key]
        return body

    async def completions_request(self, request: Request) -> dict[str, Any]:
        text = request.arg("text", str)
        column = request.arg("column", int)
        if self.graph is None:
            return {"targets": []}
        base = 1 if self._client.columns_start_at1 else 0
        cursor = max(0, min(len(text), column - base))
        head = text[:cursor]
        in_backticks = head.rfind("`") >= 0 and head.count("`") % 2 == 1
        if in_backticks:
            start = head.rfind("`")
            prefix = head[start + 1 :]
        else:
            start = cursor
            while start > 0 and (head[start - 1].isalnum() or head[start - 1] == "_"):
                start -= 1
            prefix = head[start:]
        targets: list[dict[str, Any]] = []
        seen: set[str] = set()

        def add(label: str, kind: str, insert: str, detail: str) -> None:
            if label in seen or not label.startswith(prefix):
                return
            seen.add(label)
            item: dict[str, Any] = {"label": label, "text": insert, "type": kind, "detail": detail}
            item["start"] = start + base
            item["length"] = cursor - start
            targets.append(item)

        for name in self.graph.value_names:
            insert = quoted(name) if not in_backticks else f"`{name}`"
            if in_backticks or insert == name:
                add(name, "variable", insert, "value")
            elif name.startswith(prefix) and prefix:
                add(name, "variable", insert, "value")
        if not in_backticks:
            for fn in self.graph.functions:
                add(fn, "function", fn, "function")
            for node in self.graph.nodes:
                add(node.id, "reference", node.id, f"node {node.op_type}")
        return {"targets": targets[:500]}
