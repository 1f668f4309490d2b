"""The real architectures the onnx wheel ships run to completion with the expected outputs."""

from __future__ import annotations

import os

import numpy as np
import onnx
import pytest
from models import LIGHT_MODELS, assert_same, light_inputs, ort_values

from graph_dap.runtime import DebugSession, StopReason


@pytest.mark.parametrize("path", LIGHT_MODELS, ids=[os.path.basename(p)[6:-5] for p in LIGHT_MODELS])
def test_light_model_runs_to_its_expected_output(path):
    assert LIGHT_MODELS, "the onnx wheel ships the light models"
    model = onnx.load(path)
    s = DebugSession(path, light_inputs(model), break_on=["nan", "inf", "error"])
    s.start()
    stop = s.continue_()
    assert stop.reason is StopReason.END, stop.message
    expected = onnx.numpy_helper.to_array(onnx.load_tensor(path[:-5] + "_output_0.pb"))
    (out,) = s.outputs().values()
    np.testing.assert_allclose(out, expected, rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("name", ["squeezenet", "inception_v1"])
def test_light_model_every_value_is_exactly_onnxruntime(name):
    path = next(p for p in LIGHT_MODELS if name in p)
    model = onnx.load(path)
    feeds = light_inputs(model)
    s = DebugSession(path, feeds)
    s.start()
    assert s.continue_().reason is StopReason.END
    truth = ort_values(model, feeds)
    assert len(truth) > 50
    for value_name, value in truth.items():
        assert_same(s.value(value_name), value, value_name)
