"""Everything that calls onnxruntime: session options, the node runner, segments and their
planning, the value store, the NaN/Inf watch.

``session_options()`` makes options that share graph-dap's global thread pool: use them for
other sessions created in the same process.
"""

from __future__ import annotations

from graph_dap.runtime.engine.options import OPT_LEVELS, check_providers, session_options

__all__ = ["OPT_LEVELS", "check_providers", "session_options"]
