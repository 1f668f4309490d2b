"""The folders are the architecture, and the arrows between them run one way.

- ``runtime`` (the core: graph, session, ``engine/``, ``expr/``) imports neither its
  ``tools/``, nor the worker, nor the adapter: it is usable on its own.
- ``runtime/tools`` is built on the core and imports neither the worker nor the adapter.
- ``worker`` (the process boundary) imports the runtime, never the adapter.
- ``adapter`` (DAP) imports, of graph-dap, only the worker's client and protocol and the
  shared leaves (``errors``, ``files``, ``kinds``, ``log``, ``module_paths``, ``names``, ``paths``, ``stdio``, ``tasks``); importing it loads no numpy.
- ``host`` (inside the user's program) imports neither the adapter nor a worker's process side;
  its ``protocol`` (which the adapter imports) only the worker's codec.
- ``lsp`` (the language server of listings) is built on the runtime and imports neither the
  worker nor the adapter: it never runs a model.
- mixed mode (``adapter/mixed``) is built on the plain adapter, never the other way round: only the
  transports, which serve both (and the entry point that starts them), import it.
- No module imports itself back, through any chain of imports (those for type checking aside).
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "graph_dap"
LEAVES = {
    "graph_dap.errors", "graph_dap.files", "graph_dap.kinds", "graph_dap.log", "graph_dap.module_paths", "graph_dap.names", "graph_dap.paths",
    "graph_dap.stdio", "graph_dap.tasks",
}  # fmt: skip


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path) -> list[str]:
    """Every graph_dap module ``path`` imports, relative imports made absolute."""
    tree = ast.parse(path.read_text(), str(path))
    here = _module_name(path).split(".")
    if path.name != "__init__.py":
        here = here[:-1]
    found: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = ".".join(here[: len(here) - node.level + 1]) if node.level else ""
            module = ".".join(p for p in (base, node.module or "") if p)
            found.append(module)
            found += [f"{module}.{a.name}" for a in node.names]  # `from graph_dap.runtime import tools`
    return [m for m in found if m == "graph_dap" or m.startswith("graph_dap.")]


def _modules(folder: str) -> list[Path]:
    paths = sorted((PACKAGE / folder).rglob("*.py"))
    assert paths, f"graph_dap/{folder} has no modules"
    return paths


def _offenders(paths: list[Path], forbidden: tuple[str, ...]) -> list[str]:
    out = []
    for path in paths:
        for module in _imports(path):
            if any(module == f or module.startswith(f + ".") for f in forbidden):
                out.append(f"{path.relative_to(PACKAGE)} imports {module}")
    return out


def test_the_core_imports_neither_tools_nor_worker_nor_adapter():
    core = [p for p in _modules("runtime") if "tools" not in p.relative_to(PACKAGE / "runtime").parts]
    assert _offenders(core, ("graph_dap.runtime.tools", "graph_dap.worker", "graph_dap.adapter", "graph_dap.cli")) == []


def test_the_session_is_composed_of_parts_that_do_not_know_it():
    """``DebugSession`` holds parts (runtime/session/__init__.py says which); each part imports only the parts
    it is built on, never the session that holds it (``state``) or its commands (``driver``), and nothing below
    the session (the engine, the graph, values, frames) imports the session (the runtime's ``__init__`` is its
    front door, not below it)."""
    parts = ["constants", "filters", "levels", "stopping", "runs"]  # each may import those before it
    for i, part in enumerate(parts):
        above = tuple(f"graph_dap.runtime.session.{a}" for a in [*parts[i + 1 :], "state", "driver"])
        assert _offenders([PACKAGE / "runtime" / "session" / f"{part}.py"], above) == []
    assert _offenders([PACKAGE / "runtime" / "session" / "state.py"], ("graph_dap.runtime.session.driver",)) == []
    front = PACKAGE / "runtime" / "__init__.py"
    below = [p for p in _modules("runtime") if p != front and not {"session", "tools"} & set(p.relative_to(PACKAGE / "runtime").parts)]
    assert _offenders(below, ("graph_dap.runtime.session",)) == []
    # the onnxruntime calls and their interrupt are the engine's: the session does not import onnxruntime
    assert _offenders(list((PACKAGE / "runtime" / "session").glob("*.py")), ("onnxruntime",)) == []


def test_tools_import_neither_worker_nor_adapter():
    assert _offenders(_modules("runtime/tools"), ("graph_dap.worker", "graph_dap.adapter", "graph_dap.cli")) == []


def test_the_worker_does_not_import_the_adapter():
    assert _offenders(_modules("worker"), ("graph_dap.adapter", "graph_dap.cli")) == []


def test_the_language_server_imports_neither_worker_nor_adapter():
    assert _offenders(_modules("lsp"), ("graph_dap.worker", "graph_dap.adapter", "graph_dap.cli", "graph_dap.runtime.tools")) == []


def test_the_adapter_imports_only_the_worker_client_its_protocol_its_process_start_and_the_leaves():
    allowed = {"graph_dap.worker.client", "graph_dap.worker.protocol", "graph_dap.worker.spawn", "graph_dap.host.protocol", *LEAVES}
    offenders = []
    for path in _modules("adapter"):
        for module in _imports(path):
            if module.startswith("graph_dap.adapter") or module in ("graph_dap", "graph_dap.worker", "graph_dap.host"):
                continue
            if not any(module == a or module.startswith(a + ".") for a in allowed):
                offenders.append(f"{path.relative_to(PACKAGE)} imports {module}")
    assert offenders == []


def test_the_adapter_knows_the_optimization_levels_the_runtime_has():
    from graph_dap.kinds import OptLevel
    from graph_dap.runtime.engine.options import OPT_LEVELS

    assert tuple(OPT_LEVELS) == OptLevel.values()


def test_the_host_imports_neither_the_adapter_nor_the_worker_process():
    """The host runs in the user's program: it may use the runtime (the fast watch), never the DAP server or a worker's."""
    forbidden = ("graph_dap.adapter", "graph_dap.cli", "graph_dap.worker.server", "graph_dap.worker.service", "graph_dap.worker.client")
    assert _offenders(_modules("host"), forbidden) == []


def test_the_host_protocol_imports_only_the_codec_and_the_leaves():
    """The adapter imports the host's protocol: it must load neither numpy nor the runtime."""
    path = PACKAGE / "host" / "protocol.py"
    codec = {"graph_dap.worker.codec", "graph_dap.worker.codec.decode", "graph_dap.worker.codec.encode"}
    assert [m for m in _imports(path) if m not in codec and m.partition(".")[0] + "." + m.split(".")[1] not in LEAVES] == []


def test_mixed_mode_is_built_on_the_plain_adapter():
    top = {"transports.py", "__main__.py"}  # the transports serve both; the entry point starts them
    plain = [p for p in _modules("adapter") if "mixed" not in p.relative_to(PACKAGE / "adapter").parts and p.name not in top]
    assert _offenders(plain, ("graph_dap.adapter.mixed", "graph_dap.adapter.transports")) == []


def _runtime_imports(path: Path, known: set[str]) -> set[str]:
    """The graph_dap modules ``path`` imports when it runs (not those under ``if TYPE_CHECKING:``); ``from pkg import mod`` is ``pkg.mod``."""
    tree = ast.parse(path.read_text(), str(path))
    here = _module_name(path).split(".")
    if path.name != "__init__.py":
        here = here[:-1]
    typing_only = {id(n) for block in ast.walk(tree) if isinstance(block, ast.If) and ast.unparse(block.test).endswith("TYPE_CHECKING") for n in ast.walk(block)}
    found: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in typing_only:
            continue
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = ".".join(here[: len(here) - node.level + 1]) if node.level else ""
            module = ".".join(p for p in (base, node.module or "") if p)
            found |= {f"{module}.{a.name}" if f"{module}.{a.name}" in known else module for a in node.names}
    out = set()
    for module in found:
        while module and module not in known:
            module = module.rpartition(".")[0]
        if module.startswith("graph_dap"):
            out.add(module)
    return out


def test_no_import_circle():
    paths = {_module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}
    graph = {name: _runtime_imports(path, set(paths)) - {name} for name, path in paths.items()}
    circles = []
    for start in graph:  # a walk from each module: does it come back? (a few hundred modules: cheap)
        seen: set[str] = set()
        todo = list(graph[start])
        while todo:
            module = todo.pop()
            if module == start:
                circles.append(start)
                break
            if module not in seen:
                seen.add(module)
                todo += graph.get(module, ())
    assert circles == []


def test_the_leaves_import_nothing_of_graph_dap():
    leaves = [PACKAGE / (name.split(".")[1] + ".py") for name in sorted(LEAVES)]
    assert all(p.is_file() for p in leaves)
    assert [f"{p.name} imports {m}" for p in leaves for m in _imports(p) if m not in LEAVES] == []


@pytest.mark.parametrize(
    "module",
    ["graph_dap.adapter.server", "graph_dap.adapter.transports", "graph_dap.adapter.__main__", "graph_dap.worker.client", "graph_dap.worker.protocol"],
)
def test_importing_loads_no_numpy(module):
    code = f"import sys, importlib; importlib.import_module({module!r}); print(sorted(m for m in ('numpy', 'onnx', 'onnxruntime') if m in sys.modules))"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=PACKAGE.parent)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "[]"
