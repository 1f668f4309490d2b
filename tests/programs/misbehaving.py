"""Programs that misbehave, for run-script and capture: ``python misbehaving.py MODE ROOT.onnx``.

ROOT is the tests' ``z = sqrt(y + 5) / 2`` model (see ``tests/mixed_program.py``); ``y = -9`` makes a NaN.

- ``crash``: two clean calls, then an uncaught exception;
- ``exit``: one clean call, then ``sys.exit(3)``;
- ``threads``: the model loaded from bytes; three threads call ``run`` four times each, with the NaN input
  once, in the thread named ``worker-2`` at its third call;
- ``broken MODEL``: one call of a model that onnxruntime fails in a node (the tests' ``error_model``),
  printing the error the program gets;
- ``heartbeat``: a thread prints ``beat N`` every 20 ms while the main thread makes one call with the NaN
  input, then ``done``.
"""

import sys
import threading
import time

import numpy as np
import onnxruntime as ort


def clean(i: float) -> np.ndarray:
    return np.full((2, 4), float(i), np.float32)


def worker(session: ort.InferenceSession, n: int) -> None:
    for call in range(1, 5):
        y = clean(n + call)
        if n == 2 and call == 3:
            y[1, 1] = -9.0
        (z,) = session.run(None, {"y": y})
        print(f"{threading.current_thread().name} call {call}: {float(z.sum()):.4f}", flush=True)


def heartbeat(stop: threading.Event) -> None:
    beat = 0
    while not stop.is_set():
        beat += 1
        print(f"beat {beat}", flush=True)
        time.sleep(0.02)


def main(mode: str, root_path: str) -> None:
    if mode == "broken":
        session = ort.InferenceSession(root_path, providers=["CPUExecutionProvider"])
        try:
            session.run(None, {"x": np.arange(6, dtype=np.float32).reshape(2, 3)})
        except Exception as error:  # noqa: BLE001 - what the program gets is what the test checks
            print(f"the program got {type(error).__name__}", flush=True)
        return
    if mode == "heartbeat":
        session = ort.InferenceSession(root_path, providers=["CPUExecutionProvider"])
        stop = threading.Event()
        beating = threading.Thread(target=heartbeat, args=(stop,), name="heartbeat")
        beating.start()
        y = clean(1)
        y[0, 0] = -9.0
        (z,) = session.run(None, {"y": y})
        stop.set()
        beating.join()
        print(f"done: {float(z.sum()):.4f}", flush=True)
        return
    if mode == "threads":
        with open(root_path, "rb") as f:
            session = ort.InferenceSession(f.read(), providers=["CPUExecutionProvider"])
        threads = [threading.Thread(target=worker, args=(session, n), name=f"worker-{n}") for n in range(3)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        print("threads done", flush=True)
        return
    session = ort.InferenceSession(root_path, providers=["CPUExecutionProvider"])
    for call in range(1, 3 if mode == "crash" else 2):
        (z,) = session.run(None, {"y": clean(call)})
        print(f"call {call}: {float(z.sum()):.4f}", flush=True)
    if mode == "crash":
        raise RuntimeError("the program crashed on purpose")
    sys.exit(3)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
