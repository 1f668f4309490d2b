"""Mixed mode: one DAP session over a Python program (debugpy) and the graphs its ``InferenceSession.run`` calls run.

A ``launch`` with ``program`` (or ``module``) makes the session mixed: the plain adapter hands it to
:mod:`.door`, which starts the :mod:`.session`; mixed mode is built on the plain adapter (it imports
:mod:`graph_dap.adapter.server`), never the other way round. The program runs
under debugpy's own adapter (:mod:`.python_side`), started with graph-dap's host
(``python -m graph_dap.host``) wrapping onnxruntime; the host reaches back over
:mod:`.host_link`. A run call that meets a graph breakpoint or filter is debugged in a
graph-dap session of its own (:mod:`.graph_run`: the plain adapter, in memory, on a
worker process). :mod:`.routes` sends each request to the side its thread, frame or
reference belongs to, and :mod:`.ids` keeps the two sides' ids apart.
"""
