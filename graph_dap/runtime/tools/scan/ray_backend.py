"""The Ray backend: actors that each hold one graph-dap runtime, fed inputs in shards.

``--ray`` starts a local Ray (listening on loopback only), ``--ray ADDRESS`` joins a
cluster. Each actor loads the model once (from its path, or from the object store
with ``ship``) and runs a shard of inputs as a streaming generator: results come back
one by one as they are done. An actor that dies mid-shard is replaced, and the inputs
of its shard it had not reported run again elsewhere, each alone (see
:class:`~.backend.Suspects`: an input whose lone run dies twice is a ``crash``).
Ray is optional: ``pip install graph-dap[ray]``.
"""

from __future__ import annotations

import ipaddress
import logging
import os
import sys
import time
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from typing import Any

from graph_dap.errors import GraphDapError, InputError
from graph_dap.runtime.tools.scan.backend import (
    START_DEATHS,
    BackendKind,
    Event,
    Incident,
    Outcome,
    Prefetch,
    ScanError,
    Suspects,
)
from graph_dap.runtime.tools.scan.results import InputResult, ScanStatus
from graph_dap.runtime.tools.scan.runner import InputScanner, ScanConfig, worker_name
from graph_dap.runtime.tools.scan.sources import ItemKind, ItemLoader, WorkItem

INSTALL_HINT = "pip install 'graph-dap[ray]' (or pip install 'ray>=2.9')"
#: A worker that asks for more CPUs than any node has never starts: how long to wait for the first one.
READY_TIMEOUT_S = 300.0
_POLL_S = 0.05  # how often an idle worker looks for inputs from a slow source
_LOOPBACK_ENV = "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"  # "0": Ray's node address is loopback, its servers bind there


def import_ray(address: str | None) -> Any:
    """Ray, set up to listen on loopback only when the cluster is local; a ScanError saying how to install it."""
    if address is None or _is_loopback(address):
        os.environ.setdefault(_LOOPBACK_ENV, "0")  # read when ray is imported, inherited by every process it starts
    try:
        import ray
    except ImportError:
        raise ScanError(f"--ray needs Ray, which is not installed: {INSTALL_HINT}") from None
    return ray


def _is_loopback(address: str) -> bool:
    host = address.split("://")[-1].rsplit(":", 1)[0].strip("[]")
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class ScanActor:
    """One graph-dap runtime in a Ray worker (wrapped with ``ray.remote`` when a scan starts)."""

    def __init__(self, config: ScanConfig, model: bytes | None, threads: int, import_path: str | None) -> None:
        if import_path and import_path not in sys.path:
            sys.path.insert(0, import_path)
        from graph_dap.runtime.engine.options import set_thread_count

        self.error: str | None = None
        self.scanner: InputScanner | None = None
        try:
            set_thread_count(threads)
            self.scanner = InputScanner(config, model_bytes=model)
        except GraphDapError as e:
            self.error = str(e)

    def ready(self) -> tuple[str | None, str]:
        """Why it cannot scan (None when it can), and its name."""
        return self.error, worker_name()

    def scan_shard(self, items: list[WorkItem]) -> Iterator[tuple[InputResult, dict[str, Any] | None]]:
        """Each item's result as soon as it is done (a streaming generator on the driver's side)."""
        import ray

        assert self.scanner is not None
        for item in items:
            if isinstance(item.feeds, ray.ObjectRef):
                item = replace(item, feeds=ray.get(item.feeds))
            yield self.scanner.scan(item)


@dataclass(slots=True)
class _Actor:
    handle: Any
    ready_ref: Any
    name: str = ""
    ready: bool = False
    shard: list[WorkItem] = field(default_factory=list)
    done: int = 0
    stream: Any = None  # the shard's ObjectRefGenerator while it runs


class RayBackend:
    """``workers`` actors of ``threads`` CPUs each, on a local Ray or the cluster at ``address``."""

    def __init__(
        self,
        config: ScanConfig,
        address: str | None = None,
        workers: int | None = None,
        threads: int = 1,
        ship: bool = False,
        shard_size: int = 8,
        import_path: str | None = None,
        loader: ItemLoader | None = None,
        model_bytes: bytes | None = None,
    ) -> None:
        self.ray = import_ray(address)
        self.config = config
        self.address = address
        self.threads = threads
        self.ship = ship
        self.shard_size = max(1, shard_size)
        self.import_path = import_path
        self.loader = loader  # reads file inputs on the driver when they are shipped
        self.model_bytes = model_bytes  # the model (with its external data) when it is shipped
        self._owns_ray = False
        self._actors: list[_Actor] = []
        self._asked = workers
        self._init()
        self.workers = workers or max(1, int(self.ray.cluster_resources().get("CPU", 1)) // threads)
        most = max((n["Resources"].get("CPU", 0) for n in self.ray.nodes() if n.get("Alive")), default=0)
        if threads > most:
            raise ScanError(f"each Ray worker asks for {threads} CPUs (threads per run), but no node of the cluster has more than {most:g}")

    def _init(self) -> None:
        ray = self.ray
        if ray.is_initialized():
            return
        kwargs: dict[str, Any] = {"log_to_driver": False, "logging_level": logging.ERROR}
        if self.address is None:
            from graph_dap.runtime.tools.scan.pool import default_workers

            # As many CPUs as the cores, or as the workers asked for (oversubscribing is the user's call, as locally).
            kwargs.update(num_cpus=max(default_workers(1), (self._asked or 0) * self.threads), include_dashboard=False)
        try:
            ray.init(address=self.address, **kwargs)
        except (ConnectionError, RuntimeError, ValueError) as e:
            raise ScanError(f"cannot {'start a local Ray' if self.address is None else 'join the Ray cluster at ' + self.address}: {e}") from None
        self._owns_ray = True

    def describe(self) -> dict[str, Any]:
        return {
            "backend": BackendKind.RAY,
            "address": self.address or "local",
            "workers": self.workers,
            "threads_per_run": self.threads,
            "ship": self.ship,
            "shard_size": self.shard_size,
        }

    def _model_ref(self) -> Any:
        if not self.ship:
            return None
        if self.model_bytes is None:
            with open(self.config.model, "rb") as f:
                self.model_bytes = f.read()
        return self.ray.put(self.model_bytes)

    def run(self, items: Iterator[WorkItem]) -> Iterator[Event]:
        ray = self.ray
        remote = ray.remote(num_cpus=self.threads, max_restarts=0)(ScanActor)
        model = self._model_ref()

        def start() -> _Actor:
            handle = remote.remote(self.config, model, self.threads, self.import_path)
            actor = _Actor(handle, handle.ready.remote())
            self._actors.append(actor)
            return actor

        for _ in range(self.workers):
            start()
        suspects = Suspects()
        alone: deque[WorkItem] = deque()  # inputs that were in flight when their worker died: each runs alone
        later: deque[WorkItem] = deque()  # read from the source while no worker was free
        feed = Prefetch(items, 2 * self.workers * self.shard_size)
        start_deaths = 0
        began = time.monotonic()
        while True:
            for a in self._actors:
                if not a.ready or a.stream is not None:
                    continue
                shard: list[WorkItem] = [alone.popleft()] if alone else []
                while not shard or (len(shard) < self.shard_size and shard[0].index not in suspects):
                    nxt = [later.popleft()] if later else feed.take(1)
                    if not nxt:
                        break
                    shipped = self._out(nxt[0])
                    if isinstance(shipped, Outcome):
                        yield shipped
                        continue
                    shard.append(shipped)
                if shard:
                    a.shard, a.done = shard, 0
                    a.stream = a.handle.scan_shard.options(num_returns="streaming").remote(shard)
            busy = [a for a in self._actors if a.stream is not None]
            if feed.exhausted and not alone and not later and not busy:
                return
            waiting = [a for a in self._actors if not a.ready]
            refs = [a.ready_ref for a in waiting] + [a.stream for a in busy]
            if not any(a.ready for a in self._actors) and time.monotonic() - began > READY_TIMEOUT_S:
                raise ScanError(f"no Ray worker started in {READY_TIMEOUT_S:.0f} s (each asks for {self.threads} CPUs)")
            starving = not feed.exhausted and any(a.ready and a.stream is None for a in self._actors)
            if not refs:
                later.extend(feed.take(self.shard_size, wait=1.0))  # nothing runs: wait for the source
                continue
            ready, _ = ray.wait(refs, num_returns=1, timeout=_POLL_S if starving else 10.0)
            for ref in ready:
                actor = next(a for a in waiting + busy if ref is a.ready_ref or ref is a.stream)
                is_ready = ref is actor.ready_ref
                try:
                    event = self._advance(actor, is_ready, suspects)
                except ray.exceptions.RayActorError as e:
                    self._actors.remove(actor)
                    ray.kill(actor.handle, no_restart=True)
                    if not actor.ready:
                        start_deaths += 1
                        if start_deaths >= START_DEATHS:
                            raise ScanError(f"the scan's Ray workers die as they start: {_first_line(e)}") from None
                    yield from self._lost(actor, suspects, alone, _first_line(e))
                    start()
                    continue
                if is_ready:
                    start_deaths = 0
                if event is not None:
                    yield event

    def _out(self, item: WorkItem) -> WorkItem | Outcome:
        """The item as it travels: its feeds in the object store (a generator's, or a file's read here with ``ship``)."""
        if isinstance(item.feeds, self.ray.ObjectRef):
            return item  # out once already (the rest of a dead worker's shard)
        if item.kind is ItemKind.ARRAYS:
            return replace(item, feeds=self.ray.put(item.feeds))
        if self.ship and self.loader is not None:
            try:
                feeds = self.loader.load(item)
            except InputError as e:
                return Outcome(InputResult(item.index, item.id, item.label, ScanStatus.INVALID, message=str(e), worker="driver"))
            return replace(item, kind=ItemKind.ARRAYS, feeds=self.ray.put(feeds))
        return item

    def _advance(self, actor: _Actor, is_ready: bool, suspects: Suspects) -> Event | None:
        ray = self.ray
        if is_ready:
            error, actor.name = ray.get(actor.ready_ref)
            if error is not None:
                raise ScanError(error)
            actor.ready = True
            return None
        try:
            ref = next(actor.stream)
        except StopIteration:
            actor.stream, actor.shard = None, []
            return None
        result, feeds = ray.get(ref)
        item = actor.shard[actor.done]
        actor.done += 1
        attempts = suspects.attempts(item)
        return Outcome(result.replace(attempts=attempts) if attempts > 1 else result, feeds)

    def _lost(self, actor: _Actor, suspects: Suspects, alone: deque[WorkItem], why: str) -> Iterator[Event]:
        name = actor.name or "(starting)"
        unreported = actor.shard[actor.done :] if actor.stream is not None else []
        if not unreported:
            yield Incident(f"Ray worker {name} died ({why}) while idle; another takes its place", name)
            return
        events, retry = suspects.lost(unreported, name, f"died ({why})")
        yield from events
        alone.extend(retry)

    def close(self) -> None:
        for a in self._actors:
            self.ray.kill(a.handle, no_restart=True)
        self._actors.clear()
        if self._owns_ray:
            self.ray.shutdown()
            self._owns_ray = False


def _first_line(e: BaseException) -> str:
    text = str(e).strip()
    return text.splitlines()[0] if text else type(e).__name__
