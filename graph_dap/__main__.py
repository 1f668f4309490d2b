"""``python -m graph_dap`` is the ``graph-dap`` command."""

import sys

from .cli import main

sys.exit(main())
