"""The real architectures the onnx wheel ships run to completion with the expected outputs."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from light import LIGHT_MODELS, light_inputs
from models import as_shown, assert_same, ort_values

from graph_dap.runtime import DebugSession, StopReason


def test_the_onnx_wheel_ships_the_light_models() -> None:
    # the tests below are parametrized over these: with none, pytest would run none of them
    assert LIGHT_MODELS, "no light models found in the onnx wheel (onnx/backend/test/data/light)"
    assert {"squeezenet", "inception_v1", "resnet50", "vgg19"} <= set(LIGHT_MODELS), sorted(LIGHT_MODELS)


@pytest.mark.parametrize("name", LIGHT_MODELS)
def test_light_model_runs_to_its_expected_output(name: str) -> None:
    path = LIGHT_MODELS[name]
    model = onnx.load(path)
    s = DebugSession(path, light_inputs(model), break_on=["nan", "inf", "error"])
    s.start()
    stop = s.continue_()
    assert stop.reason is StopReason.END, stop.message
    expected = onnx.numpy_helper.to_array(onnx.load_tensor(path[: -len(".onnx")] + "_output_0.pb"))
    (out,) = s.outputs().values()
    np.testing.assert_allclose(out, expected, rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("name", ["squeezenet", "inception_v1"])
def test_light_model_every_value_is_exactly_onnxruntime(name: str) -> None:
    path = LIGHT_MODELS[name]
    model = onnx.load(path)
    feeds = light_inputs(model)
    s = DebugSession(path, feeds)
    s.start()
    assert s.continue_().reason is StopReason.END
    names = list(ort_values(model, feeds))
    assert len(names) > 50
    shown = {name: s.value(name) for name in names}  # what a person reads: the user's run's, or recomputed and said so
    for value_name, value in as_shown(s, model, feeds, names).items():
        assert_same(shown[value_name], value, value_name)
