"""graph-dap inside a Python program: ``python -m graph_dap.host program.py`` wraps ``onnxruntime.InferenceSession``.

The program needs no change. Its ``run`` calls go to onnxruntime untouched unless a graph
breakpoint, a filter (nan, inf, error) or a capture applies; then the call is handed to
graph-dap: debugged in a mixed session (:mod:`.debugged`, driven by the adapter's
``program`` launch), reported by ``graph-dap run-script`` (:mod:`.script`), or recorded by
``graph-dap capture`` (:mod:`.capture`). :mod:`.hook` is the wrapper, :mod:`.protocol`
what the program's process and the adapter say to each other.

Importing this package imports nothing else: the modules are loaded as a mode needs them.
"""
