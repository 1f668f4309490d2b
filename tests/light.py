"""The light models the onnx wheel ships (real architectures, weights made by ConstantOfShape), and their inputs.

One definition for the tests and the benchmarks (``benchmarks/models.py`` imports this file by path).
"""

from __future__ import annotations

import glob
import os

import numpy as np
import onnx

LIGHT_DIR = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "light")


def light_models() -> dict[str, str]:
    """Name (``squeezenet``) -> path of every light model in the installed onnx wheel, sorted by name."""
    paths = sorted(glob.glob(os.path.join(LIGHT_DIR, "light_*.onnx")))
    return {os.path.basename(p)[len("light_") : -len(".onnx")]: p for p in paths}


LIGHT_MODELS = light_models()


def light_inputs(model: onnx.ModelProto) -> dict[str, np.ndarray]:
    """The inputs the onnx backend tests use for the light models: arange(n)/n."""
    inits = {i.name for i in model.graph.initializer}
    feeds = {}
    for x in model.graph.input:
        if x.name in inits:
            continue
        shape = tuple(d.dim_value if d.HasField("dim_value") else 1 for d in x.type.tensor_type.shape.dim)
        n = int(np.prod(shape))
        feeds[x.name] = (np.arange(n).reshape(shape) / n).astype(np.float32)
    return feeds
