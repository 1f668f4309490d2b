"""The language server of graph listings: the documents, their models, and one handler per feature.

A listing document names its model in its header (:func:`~graph_dap.runtime.listing.read_header`).
The model is loaded once per ``(path, mtime, size)`` in the background (with ``$/progress``),
analysed (:mod:`.analysis`), and every listing of it is served from that analysis while its
text is exactly the model's rendering; a listing that no longer matches (its model changed
on disk) says so. The server watches the models of open listings (it polls their files and
takes ``workspace/didChangeWatchedFiles``): on a change it reloads, refreshes a listing file
that held the previous rendering, and publishes the diagnostics again.

Settings (``initializationOptions``, or ``workspace/didChangeConfiguration`` with
``{"graphDap": {...}}``): ``providers`` (execution providers for the kernel check, default
``["CPUExecutionProvider"]``), ``typeHints`` (default true), ``liveInlayHints`` (default false),
``codeLens`` (default false), ``refreshListings`` (default true), ``pollInterval`` (seconds, default 1).
"""

from __future__ import annotations

import asyncio
import os
import uuid
from collections import OrderedDict
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

from lsprotocol import types
from pygls.lsp.server import LanguageServer

from graph_dap import log as _log
from graph_dap.files import write_text_atomic
from graph_dap.lsp import actions, diagnostics, highlighting, outline
from graph_dap.lsp.analysis import Analysis
from graph_dap.lsp.live import DEBUG_STATE, DebugState, LiveValues
from graph_dap.lsp.versions import LoadFailure, load_version, release_memory, stamp_of
from graph_dap.lsp.wire import ListingProtocol, RawResult, raw
from graph_dap.runtime.listing import read_header
from graph_dap.tasks import background

_logger = _log.get_logger(__name__)
NAME = "graph-dap-lsp"
_PROGRESS_TIMEOUT = 2.0  # seconds to wait for the client to accept a progress token
_KEPT_CLOSED = 2  # analyses of models no open listing shows, kept for a reopen (newest closed first out last)
VERSION = "0.1.0"


@dataclass(frozen=True, slots=True)
class Settings:
    """What the editor can set (see the module's docstring)."""

    providers: tuple[str, ...] = ("CPUExecutionProvider",)
    type_hints: bool = True
    live_inlay_hints: bool = False
    code_lens: bool = False
    refresh_listings: bool = True
    poll_interval: float = 1.0

    def updated(self, options: Any) -> Settings:
        """These settings with the keys of ``options`` (a dict, or pygls's namedtuple) that are valid."""
        o = _plain(options)
        if isinstance(o, dict) and isinstance(o.get("graphDap"), dict):
            o = o["graphDap"]
        if not isinstance(o, dict):
            return self
        new = self
        providers = o.get("providers")
        if isinstance(providers, str):
            providers = [providers]
        if isinstance(providers, list) and providers and all(isinstance(p, str) for p in providers):
            new = replace(new, providers=tuple(providers))
        for key, attr in (("typeHints", "type_hints"), ("liveInlayHints", "live_inlay_hints"), ("codeLens", "code_lens"), ("refreshListings", "refresh_listings")):
            if isinstance(o.get(key), bool):
                new = replace(new, **{attr: o[key]})
        interval = o.get("pollInterval")
        if isinstance(interval, (int, float)) and not isinstance(interval, bool) and interval > 0:
            new = replace(new, poll_interval=float(interval))
        return new


@dataclass(slots=True)
class _Document:
    uri: str
    model: Path | None = None
    analysis: Analysis | None = None  # set while the text is the model's rendering
    problems: list[types.Diagnostic] | None = None  # why it is not served, when it is not
    served: Analysis | None = None  # the version it was last served from (kept while it is stale)
    pending: asyncio.Future[None] | None = None  # done when the text has been matched with its model


Result = Analysis | LoadFailure


class ListingServer(LanguageServer):
    """pygls's server with the listings' state: documents, model versions, live values, settings."""

    def __init__(self) -> None:
        super().__init__(NAME, VERSION, text_document_sync_kind=types.TextDocumentSyncKind.Full, protocol_cls=ListingProtocol)
        self.settings = Settings()
        self.docs: dict[str, _Document] = {}
        self.models: dict[Path, Result] = {}
        # Models whose listings were all closed, newest last: a listing opened again is served at once while
        # its model is unchanged (a 10,000-node model's analysis takes seconds to build again).
        self.closed_models: OrderedDict[Path, Result] = OrderedDict()
        self._loading: dict[Path, asyncio.Future[Result]] = {}
        self.live = LiveValues(lambda method, params: self.protocol.send_request_async(method, params))
        self._watcher: asyncio.Task[None] | None = None

    # -- documents -------------------------------------------------------------------

    def document(self, uri: str) -> _Document | None:
        return self.docs.get(uri)

    def analysis(self, uri: str) -> Analysis | None:
        doc = self.docs.get(uri)
        return doc.analysis if doc else None

    async def ready(self, uri: str, timeout: float = 60.0) -> Analysis | None:
        """The analysis of a listing, once its model is loaded (a request that comes during the load waits:
        an editor asks for the outline and the tokens once, when it opens the document)."""
        doc = self.docs.get(uri)
        if doc is not None and doc.pending is not None and not doc.pending.done():
            try:
                await asyncio.wait_for(asyncio.shield(doc.pending), timeout)
            except TimeoutError:
                return None
        return self.analysis(uri)

    def opened(self, uri: str) -> None:
        """A listing was opened or changed: find its model, load it if need be, serve it."""
        doc = self.docs.setdefault(uri, _Document(uri))
        text = self._text(uri)
        header = read_header(text)
        if header is None:
            doc.model, doc.analysis = None, None
            doc.problems = diagnostics.listing_problem(
                "not-a-listing", "not a graph-dap listing: its first line should be '# graph-dap listing of MODEL'", text.split("\n", 1)[0]
            )
            self.publish(uri)
            return
        doc.model = _model_path(uri, header.title, header.model_path)
        self._start_watching()
        doc.pending = asyncio.ensure_future(self._serve(uri))

    def closed(self, uri: str) -> None:
        self.docs.pop(uri, None)
        self.text_document_publish_diagnostics(types.PublishDiagnosticsParams(uri=uri, diagnostics=[]))
        wanted = {d.model for d in self.docs.values()}
        for path in [p for p in self.models if p not in wanted]:
            self.closed_models[path] = self.models.pop(path)
            self.closed_models.move_to_end(path)
        while len(self.closed_models) > _KEPT_CLOSED:
            self.closed_models.popitem(last=False)

    async def _serve(self, uri: str) -> None:
        doc = self.docs.get(uri)
        if doc is None or doc.model is None:
            return
        result = await self.ensure(doc.model)
        if self.docs.get(uri) is doc:
            self._bind(doc, result)
            self.publish(uri)

    def _bind(self, doc: _Document, result: Result) -> None:
        first = self._text(doc.uri).split("\n", 1)[0]
        if isinstance(result, LoadFailure):
            doc.analysis = None
            doc.problems = diagnostics.listing_problem("load-failed", result.message, first)
            return
        if self._text(doc.uri).replace("\r\n", "\n") == result.text:
            doc.analysis, doc.problems, doc.served = result, None, result
            return
        doc.analysis = None
        doc.problems = diagnostics.listing_problem(
            "stale-listing",
            f"this listing does not match {result.version.path.name} as it is now (the model changed, or the listing "
            f"was written by another graph-dap): reopen the model, or run graph-dap listing {result.version.path} --out FILE",
            first,
        )

    def publish(self, uri: str) -> None:
        doc = self.docs.get(uri)
        if doc is None:
            return
        if doc.problems is not None:
            found = doc.problems
        elif doc.analysis is not None:
            found = self.diagnostics_of(doc.analysis)
        else:
            return
        self.text_document_publish_diagnostics(types.PublishDiagnosticsParams(uri=uri, diagnostics=found))

    def diagnostics_of(self, a: Analysis) -> list[types.Diagnostic]:
        providers = self.settings.providers
        return a.cached(("diagnostics", providers), lambda: diagnostics.model_diagnostics(a, providers))

    def _text(self, uri: str) -> str:
        return self.workspace.get_text_document(uri).source

    # -- models ----------------------------------------------------------------------

    async def ensure(self, path: Path) -> Result:
        """The current version of the model at ``path``: cached by ``(mtime, size)``, else loaded in the background."""
        if path not in self.models and path in self.closed_models:
            self.models[path] = self.closed_models.pop(path)  # its listing was closed and is open again
        known = self.models.get(path)
        stamp = stamp_of(path)
        if known is not None and _stamp(known) == stamp:
            return known
        pending = self._loading.get(path)
        if pending is None:
            pending = asyncio.ensure_future(self._load(path, known))
            self._loading[path] = pending
        return await asyncio.shield(pending)

    async def _load(self, path: Path, previous: Result | None) -> Result:
        token = await self._progress_begin(f"Loading {path.name}")
        try:
            loop = asyncio.get_running_loop()
            result = await loop.run_in_executor(None, self._load_sync, path)
        finally:
            self._loading.pop(path, None)
            self._progress_end(token)
        self.models[path] = result
        if isinstance(previous, Analysis) and isinstance(result, Analysis) and previous.text != result.text:
            self._refresh_listings(previous, result)
        for uri, doc in list(self.docs.items()):
            if doc.model == path:
                self._bind(doc, result)
                self.publish(uri)
        release_memory()  # what reading and comparing the listings' text left behind
        return result

    def _load_sync(self, path: Path) -> Result:
        """In a worker thread: load, analyse, and build the replies that cover the whole listing."""
        version = load_version(path)
        if isinstance(version, LoadFailure):
            return version
        encoding = self.workspace.position_encoding
        a = Analysis(version, str(getattr(encoding, "value", encoding)))
        self.diagnostics_of(a)
        self.symbols(a)
        self.semantic_tokens(a)
        self.folding(a)
        release_memory()
        _logger.info("loaded %s: %d nodes", path, len(a.graph.nodes))
        return a

    def _refresh_listings(self, old: Analysis, new: Analysis) -> None:
        """Rewrite the listing files that held ``old``'s rendering with ``new``'s (the editor reloads them)."""
        if not self.settings.refresh_listings:
            return
        for doc in self.docs.values():
            if doc.served is not old or not doc.uri.startswith("file:"):
                continue
            file = _file_path(doc.uri)
            try:
                with open(file, encoding="utf-8", newline="") as f:
                    held = f.read()
                if held == old.text:
                    write_text_atomic(file, new.text)
            except OSError as error:
                _logger.info("cannot refresh %s: %s", file, error)

    def _start_watching(self) -> None:
        if self._watcher is None or self._watcher.done():
            self._watcher = asyncio.ensure_future(self._watch())

    async def _watch(self) -> None:
        """Poll the open listings' models; reload those that changed."""
        while self.docs:
            await asyncio.sleep(self.settings.poll_interval)
            self.check_models()

    def check_models(self, paths: set[Path] | None = None) -> None:
        """Reload the models (of open listings) whose file changed."""
        wanted = {d.model for d in self.docs.values() if d.model is not None}
        for path in wanted if paths is None else wanted & paths:
            known = self.models.get(path)
            if path not in self._loading and (known is None or _stamp(known) != stamp_of(path)):
                background(self.ensure(path))

    async def _progress_begin(self, title: str) -> str | None:
        """Start a ``$/progress`` for a load, when the client takes them (it answers ``create`` first)."""
        caps = self.client_capabilities.window
        if not (caps and caps.work_done_progress):
            return None
        token = f"graph-dap-{uuid.uuid4().hex[:12]}"
        try:
            await asyncio.wait_for(self.work_done_progress.create_async(token), _PROGRESS_TIMEOUT)
            self.work_done_progress.begin(token, types.WorkDoneProgressBegin(title=title, cancellable=False))
        except Exception as error:  # noqa: BLE001 - a client that refuses progress, or does not answer: load without it
            _logger.info("no progress for %r: %s: %s", title, type(error).__name__, error)
            return None
        return token

    def _progress_end(self, token: str | None) -> None:
        if token is not None:
            try:
                self.work_done_progress.end(token, types.WorkDoneProgressEnd())
            except Exception as error:  # noqa: BLE001 - the progress may be gone with its client: the load is done anyway
                _logger.info("cannot end progress %s: %s: %s", token, type(error).__name__, error)

    # -- the replies built once per version -------------------------------------------

    def symbols(self, a: Analysis) -> RawResult:
        return a.cached("symbols", lambda: raw(self.protocol, outline.document_symbols(a)))

    def semantic_tokens(self, a: Analysis) -> RawResult:
        return a.cached("tokens", lambda: raw(self.protocol, types.SemanticTokens(data=highlighting.semantic_tokens(a))))

    def folding(self, a: Analysis) -> RawResult:
        return a.cached("folding", lambda: raw(self.protocol, outline.folding_ranges(a)))

    def lenses(self, a: Analysis, uri: str) -> RawResult:
        return a.cached(("lenses", uri), lambda: raw(self.protocol, actions.code_lenses(a, uri)))

    # -- settings and the debug state -------------------------------------------------

    def configure(self, options: Any) -> None:
        new = self.settings.updated(options)
        if new == self.settings:
            return
        self.settings = new
        for uri in list(self.docs):
            self.publish(uri)

    def debug_state(self, params: Any) -> None:
        p = _plain(params)
        if not isinstance(p, dict) or not isinstance(p.get("model"), str) or p.get("state") not in tuple(DebugState):
            _logger.info("ignored %s: %r", DEBUG_STATE, p)
            return
        self.live.set_state(p["model"], DebugState(p["state"]))
        caps = self.client_capabilities.workspace
        refresh = caps and caps.inlay_hint and caps.inlay_hint.refresh_support
        if self.settings.live_inlay_hints and refresh:
            self.workspace_inlay_hint_refresh(None)


def _stamp(result: Result) -> tuple[int, int] | None:
    return result.stamp if isinstance(result, LoadFailure) else result.version.stamp


def _file_path(uri: str) -> str:
    return unquote(urlparse(uri).path)


def _model_path(uri: str, title: str, named: str | None) -> Path:
    """The model of a listing: the path its header names, else the file of its title beside the listing."""
    if named and os.path.isfile(named):
        return Path(named).resolve()
    if uri.startswith("file:"):
        beside = Path(_file_path(uri)).parent / title
        if beside.is_file():
            return beside.resolve()
    return Path(named or title)


def _plain(obj: Any) -> Any:
    """pygls hands custom params over as namedtuples: back to dicts and lists."""
    if hasattr(obj, "_asdict"):
        return {k: _plain(v) for k, v in obj._asdict().items()}
    if isinstance(obj, dict):
        return {k: _plain(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_plain(v) for v in obj]
    return obj
