"""A program for the mixed-mode tests: it loads two models and calls ``run`` in a loop, printing each result.

``python infer_loop.py SCALE.onnx ROOT.onnx CALLS``: call ``i`` feeds ``x = i`` to SCALE (``y = 2 x + 1``), then
``y`` to ROOT (``z = sqrt(y + 5) / 2``); at call 7, ``x[0, 0]`` is -5, so that ROOT makes a NaN there.
"""

import sys

import numpy as np
import onnxruntime as ort


def main(scale_path: str, root_path: str, calls: int) -> None:
    total = 0.0  # before the sessions and the loop
    scale = ort.InferenceSession(scale_path, providers=["CPUExecutionProvider"])
    root = ort.InferenceSession(root_path, providers=["CPUExecutionProvider"])
    for i in range(1, calls + 1):
        x = np.full((2, 4), float(i), np.float32)
        if i == 7:
            x[0, 0] = -5.0
        (y,) = scale.run(None, {"x": x})
        (z,) = root.run(None, {"y": y})
        total += float(z.sum())
        print(f"call {i}: {float(z.sum()):.4f}", flush=True)
    print(f"total: {total:.4f}", flush=True)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]) if len(sys.argv) > 3 else 10)
