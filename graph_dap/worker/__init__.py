"""The process boundary: a runtime in a worker process, reached over msgpack.

``client`` is the adapter's side (no numpy); ``server`` the transport in the worker's
process, ``service`` its calls on one :class:`~graph_dap.runtime.session.DebugSession`.
"""
