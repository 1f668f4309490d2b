"""Run at the start of every Python process that ``graph-dap capture`` starts (this folder is first on PYTHONPATH).

It arranges for the process's ``run`` calls to be recorded, then runs the ``sitecustomize`` that this one
hides, if there is one further on the path. It imports nothing heavy: onnxruntime is wrapped when the
program imports it.
"""

import importlib.machinery
import importlib.util
import os
import sys

_here = os.path.dirname(os.path.abspath(__file__))

try:
    from graph_dap.host.capture import install_from_env

    install_from_env()
except Exception as _error:  # noqa: BLE001 - a broken capture must not stop the program
    print(f"graph-dap capture: not recording this process: {_error}", file=sys.stderr)

_rest = [p for p in sys.path if os.path.abspath(p or ".") != _here]
_spec = importlib.machinery.PathFinder.find_spec("sitecustomize", _rest)
if _spec is not None and _spec.loader is not None:
    _module = importlib.util.module_from_spec(_spec)
    _spec.loader.exec_module(_module)
