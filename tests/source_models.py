"""The exported models of tests/data/source (made by tests/data/make_source_models.py, which needs torch)."""

from __future__ import annotations

import shutil
from pathlib import Path

DATA = Path(__file__).parent / "data" / "source"
DYNAMO = DATA / "tiny_dynamo.onnx"
TORCHSCRIPT = DATA / "tiny_torchscript.onnx"
INPUT = DATA / "tiny_input.npy"
SOURCE = DATA / "tinymodel.py"
#: Where tinymodel.py was on the machine that exported the models (the stack traces name it so).
REMOTE = "/home/exporter/tinymodel/tinymodel.py"
REMOTE_ROOT = "/home/exporter/tinymodel"


def line_of(text: str, source: Path = SOURCE) -> int:
    """The 1-based line of ``source`` that holds ``text``."""
    return next(k + 1 for k, line in enumerate(source.read_text().splitlines()) if text in line)


def project(folder: Path, model: Path = DYNAMO) -> tuple[Path, Path, Path]:
    """A copy of the model, its input and its source in ``folder/project`` (the source under ``src/``)."""
    root = folder / "project"
    (root / "src").mkdir(parents=True)
    shutil.copy(model, root / model.name)
    shutil.copy(INPUT, root / INPUT.name)
    shutil.copy(SOURCE, root / "src" / SOURCE.name)
    return root / model.name, root / INPUT.name, root / "src" / SOURCE.name
