"""Export tests/data/source/tinymodel.py's TinyModel twice: with torch.onnx's dynamo exporter and with TorchScript.

The tests read what this writes and need no torch. To make the files again (torch is not a
dependency of graph-dap):

    .venv/bin/pip install torch==2.13.0 onnxscript
    .venv/bin/python tests/data/make_source_models.py

It writes, beside tinymodel.py:

- ``tiny_dynamo.onnx``: ``torch.onnx.export(..., dynamo=True)``, weights inline (no ``.onnx.data``
  side file); its nodes carry ``namespace``, ``pkg.torch.onnx.name_scopes``, ``class_hierarchy``
  and ``stack_trace`` metadata. The stack traces' paths are rewritten to those of a made-up
  exporting machine (``/home/exporter/tinymodel/tinymodel.py`` and torch under
  ``/home/exporter/venv/lib/python3.11/site-packages/torch``), as a model made elsewhere has
  them: the tests find the source again with ``pathMappings`` or by the path's tail.
- ``tiny_torchscript.onnx``: ``dynamo=False`` (opset 17): no metadata; module paths survive only
  in node names (``/blocks.0/attn/MatMul``).
- ``tiny_input.npy``: the input both were traced with.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import numpy as np
import onnx
import torch

HERE = Path(__file__).resolve().parent / "source"
REMOTE_SOURCE = "/home/exporter/tinymodel"
REMOTE_SITE = "/home/exporter/venv/lib/python3.11/site-packages"
TRACE = "pkg.torch.onnx.stack_trace"
sys.path.insert(0, str(HERE))

from tinymodel import TinyModel  # noqa: E402


def _as_exported_elsewhere(model: onnx.ModelProto) -> None:
    """Stack traces with the made-up exporting machine's paths instead of this one's."""
    site = str(Path(torch.__file__).resolve().parent.parent)
    for node in model.graph.node:
        for prop in node.metadata_props:
            if prop.key == TRACE:
                prop.value = prop.value.replace(str(HERE), REMOTE_SOURCE).replace(site, REMOTE_SITE)
                assert str(HERE) not in prop.value and site not in prop.value, prop.value


def _save(path: Path, model: onnx.ModelProto) -> None:
    tmp = path.with_name(path.name + ".tmp")
    onnx.save_model(model, str(tmp), save_as_external_data=False)
    os.replace(tmp, path)


def main() -> None:
    torch.manual_seed(0)
    model = TinyModel().eval()
    x = torch.randn(1, 8, 16)
    with torch.no_grad():
        program = torch.onnx.export(model, (x,), dynamo=True, input_names=["x"], output_names=["logits"])
        assert program is not None
        dynamo = program.model_proto
        _as_exported_elsewhere(dynamo)
        _save(HERE / "tiny_dynamo.onnx", dynamo)
        tmp = HERE / "tiny_torchscript.onnx.tmp"
        torch.onnx.export(model, (x,), str(tmp), dynamo=False, input_names=["x"], output_names=["logits"], opset_version=17)
        os.replace(tmp, HERE / "tiny_torchscript.onnx")
    np.save(HERE / "tiny_input.npy", x.numpy())
    for name in ("tiny_dynamo.onnx", "tiny_torchscript.onnx"):
        m = onnx.load(str(HERE / name))
        print(f"{name}: {len(m.graph.node)} nodes, {os.path.getsize(HERE / name)} bytes")


if __name__ == "__main__":
    main()
