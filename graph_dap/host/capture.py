"""``graph-dap capture --out DIR -- python infer.py ARGS``: record every ``run`` call of a program, for replay.

:func:`capture` runs the command with graph-dap's ``sitecustomize`` first on ``PYTHONPATH``
(:mod:`graph_dap.host.boot`): every Python process it starts wraps onnxruntime as soon as it imports it,
and :class:`CaptureHandler` writes, for each call (numbered across the processes, from 1):

- ``run-0012.npz``: the feeds, keyed by input name (``graph-dap run MODEL --inputs DIR/run-0012.npz``);
- ``run-0012.outputs.npz``: the outputs onnxruntime returned (those that are tensors);
- ``run-0012.json``: the model (its path; for a model given as bytes, its SHA-256 and a copy in
  ``DIR/models/``), the call's number for its model, the caller's file, line and function and the Python
  stack, the time the call took, the thread and process, and onnxruntime's error when the call failed.

Each file is written to a temporary name and renamed; the ``.json`` comes last, so a record with one is
whole. With ``only_nonfinite``, only calls whose outputs hold NaN or Inf (or that failed) are kept.
"""

from __future__ import annotations

import json
import os
import subprocess
import threading
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from graph_dap.files import save_npz_atomic, write_text_atomic
from graph_dap.host import hook
from graph_dap.host.identity import ModelIdentity
from graph_dap.paths import child_environment

ENV = "GRAPH_DAP_CAPTURE"
BOOT = str(Path(__file__).resolve().parent / "boot")
_RESERVED = ".run-{:04d}.reserved"


@dataclass(frozen=True, slots=True)
class CaptureOptions:
    """Where records go, and which calls are kept."""

    out: str
    only_nonfinite: bool = False

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str) -> CaptureOptions:
        data = json.loads(text)
        return cls(str(data["out"]), bool(data.get("only_nonfinite", False)))


def capture(command: Sequence[str], options: CaptureOptions) -> tuple[int, int]:
    """Run ``command`` with every run call recorded in ``options.out``; its exit status and how many calls were kept."""
    out = Path(options.out)
    out.mkdir(parents=True, exist_ok=True)
    env = child_environment(None, BOOT)
    env[ENV] = options.to_json()
    try:
        status = subprocess.call(list(command), env=env)
    except KeyboardInterrupt:
        status = 130
    except OSError as error:
        raise FileNotFoundError(f"cannot run {command[0]!r}: {error.strerror or error}") from None
    for reserved in out.glob(".run-*.reserved"):
        reserved.unlink(missing_ok=True)
    return status, len(list(out.glob("run-*.json")))


def install_from_env() -> None:
    """In a process started by :func:`capture` (from ``sitecustomize``): record its runs."""
    text = os.environ.get(ENV)
    if text:
        hook.install_when_imported(CaptureHandler(CaptureOptions.from_json(text)))


class CaptureHandler(hook.Handler):
    """Every run call goes to onnxruntime as it is, then is recorded."""

    engaged = True

    def __init__(self, options: CaptureOptions) -> None:
        self.options = options
        self.out = Path(options.out)
        self._lock = threading.Lock()
        self._next = 1

    @classmethod
    def from_json(cls, text: str) -> CaptureHandler:
        return cls(CaptureOptions.from_json(text))

    def run(self, call: hook.Call) -> Any:
        started = time.time()
        begin = time.perf_counter()
        try:
            results = call.original()
        except Exception as error:
            self._record(call, None, (time.perf_counter() - begin) * 1000, started, str(error))
            raise
        self._record(call, results, (time.perf_counter() - begin) * 1000, started, "")
        return results

    def _record(self, call: hook.Call, results: Any, ms: float, started: float, error: str) -> None:
        import numpy as np

        outputs: dict[str, Any] = {}
        left_out: list[str] = []
        if results is not None:
            for name, value in zip(call.names, results):
                array = value.numpy() if call.kind is hook.CallKind.ORT_VALUES else value
                if isinstance(array, np.ndarray):
                    outputs[name] = array
                else:
                    left_out.append(name)
        if self.options.only_nonfinite and not error and not any(_nonfinite(a) for a in outputs.values()):
            return
        try:
            number = self._reserve()
            name = f"run-{number:04d}"
            save_npz_atomic(self.out / f"{name}.npz", call.numpy_feeds())
            if results is not None:
                save_npz_atomic(self.out / f"{name}.outputs.npz", outputs)
            record = self._describe(call, name, results is not None, left_out, ms, started, error)
            write_text_atomic(self.out / f"{name}.json", json.dumps(record, indent=1) + "\n")
        except OSError as failure:
            self.note(f"cannot record call {call.number}: {failure}")

    def _describe(
        self, call: hook.Call, name: str, has_outputs: bool, left_out: list[str], ms: float, started: float, error: str
    ) -> dict[str, Any]:
        model = call.model
        stack = [{"path": f.path, "line": f.line, "function": f.function} for f in call.stack()]
        record: dict[str, Any] = {
            "call": call.number,
            "model": model.path if model is not None else None,
            "model_sha256": (model.digest or None) if model is not None else None,
            "model_file": self._model_file(model),
            "inputs": f"{name}.npz",
            "outputs": f"{name}.outputs.npz" if has_outputs else None,
            "outputs_left_out": left_out,
            "caller": stack[0] if stack else None,
            "python_stack": stack,
            "time_ms": round(ms, 4),
            "started": started,
            "thread": threading.current_thread().name,
            "pid": os.getpid(),
            "api": "run" if call.kind is hook.CallKind.RUN else "run_with_ort_values",
        }
        if error:
            record["error"] = error
        return record

    def _model_file(self, model: ModelIdentity | None) -> str | None:
        """The model to replay with: its own path, or its bytes copied to ``models/`` once."""
        if model is None:
            return None
        if model.path is not None:
            return model.path
        folder = self.out / "models"
        folder.mkdir(exist_ok=True)
        target = folder / f"sha256-{model.digest}.onnx"
        if not target.exists():
            assert model.data is not None
            from graph_dap.files import write_bytes_atomic

            write_bytes_atomic(target, model.data)
        return str(target)

    def _reserve(self) -> int:
        """The next record number free in the folder, taken for this process (other processes may record too)."""
        with self._lock:
            n = self._next
            while True:
                try:
                    fd = os.open(self.out / _RESERVED.format(n), os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
                except FileExistsError:
                    n += 1
                    continue
                os.close(fd)
                self._next = n + 1
                return n


def _nonfinite(array: Any) -> bool:
    import numpy as np

    return bool(array.dtype.kind in "fc" and array.size and not np.isfinite(array).all())
