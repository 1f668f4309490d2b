"""Mixed mode: one DAP session over a Python program (debugpy) and the graphs its ``InferenceSession.run`` calls run.

A ``launch`` with ``program`` (or ``module``) makes the session mixed. The program runs
under debugpy's own adapter (:mod:`.python_side`), started with graph-dap's host
(``python -m graph_dap.host``) wrapping onnxruntime; the host reaches back over
:mod:`.host_link`. A run call that meets a graph breakpoint or filter is debugged in a
graph-dap session of its own (:mod:`.graph_run`: the plain adapter, in memory, on a
worker process). :mod:`.session` routes each request to the side its thread, frame or
reference belongs to, and :mod:`.ids` keeps the two sides' ids apart.
"""
