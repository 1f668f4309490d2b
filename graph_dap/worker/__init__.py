"""The process boundary: a runtime in a worker process, reached over msgpack.

``protocol`` defines every message once, for both sides (no numpy); ``client`` is the
adapter's side (no numpy); ``server`` the transport in the worker's process, ``service``
(and ``values``) its calls on one :class:`~graph_dap.runtime.session.DebugSession`, and
``wire`` what runtime objects become on the way out.
"""
