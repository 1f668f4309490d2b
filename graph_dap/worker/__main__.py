"""``python -m graph_dap.worker``: serve one client on stdin/stdout (``--listen`` for TCP)."""

import sys

from graph_dap.worker.server import main

sys.exit(main())
