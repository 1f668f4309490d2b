import os
import sys
from pathlib import Path

# The tests build thousands of small sessions: none of their optimized graphs go to the user's disk cache
# (tests/test_optimized.py turns it on in a folder of its own).
os.environ["GRAPH_DAP_CACHE"] = "off"
# Two test processes per core and their adapters, workers and CLIs side by side: onnxruntime's pool of one thread
# in each (the idle threads of larger pools spin after every run and take the cores the others need: the
# conformance, engine and NaN tests took 92-122 cpu-s with a thread per core against 61-86 with one, on 2 cores).
os.environ.setdefault("GRAPH_DAP_THREADS", "1")

sys.path.insert(0, str(Path(__file__).parent))


from collections.abc import Iterator  # noqa: E402
from typing import Any  # noqa: E402

import pytest  # noqa: E402
from dap_client import DapClient  # noqa: E402
from models import chain_files, reference  # noqa: E402


@pytest.fixture
def dap() -> Iterator[DapClient]:
    """The adapter on stdio, driven by the project's schema-validating client."""
    client = DapClient.stdio()
    yield client
    client.disconnect()
    assert "Traceback" not in client.stderr_text()


@pytest.fixture
def chain(tmp_path: Path) -> tuple[Path, Path, dict[str, Any]]:
    """The conv chain (models.chain_model) on disk, its inputs, and onnxruntime's values for it."""
    path, inputs, feeds = chain_files(tmp_path)
    return path, inputs, reference(path, feeds)


def pytest_configure(config: pytest.Config) -> None:
    """Every DAP scenario validates against the shipped schema: without it, stop before running any."""
    from dap_schema import SCHEMA_PATH, schema

    if not SCHEMA_PATH.is_file():
        raise pytest.UsageError(f"the DAP schema is missing: {SCHEMA_PATH} (see tests/data/README.md)")
    schema()
    if not hasattr(config, "workerinput"):  # once, in the process that starts the xdist workers (or the only one)
        _compile_graph_dap()


def _compile_graph_dap() -> None:
    """Compile graph-dap's modules whose bytecode is missing or older than their source, as scripts/setup.sh does.

    The tests start hundreds of adapters, workers, CLIs and language servers. Where PYTHONDONTWRITEBYTECODE
    is set, none of them writes what it compiled, so each one compiles the modules edited since: with none
    compiled, ``pytest`` without ``scripts/test.sh`` took 5:02 against 4:49 on 2 cores. Under 0.1 s when
    nothing changed.
    """
    import compileall

    compileall.compile_dir(str(Path(__file__).resolve().parents[1] / "graph_dap"), quiet=2)


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--run-long", action="store_true", help="also run the long tests (marker 'long': fuzz and fault runs)")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Tests marked ``long`` run only with --run-long (or GRAPH_DAP_LONG=1): CI runs their short versions."""
    import os

    if config.getoption("--run-long") or os.environ.get("GRAPH_DAP_LONG") == "1":
        return
    skip = pytest.mark.skip(reason="a long run: give --run-long (see RELIABILITY.md)")
    for item in items:
        if "long" in item.keywords:
            item.add_marker(skip)
