"""``python -m graph_dap.cli``: the ``graph-dap`` command."""

import sys

from graph_dap.cli import main

sys.exit(main())
