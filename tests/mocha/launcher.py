"""Starts the graph-dap adapter on stdio for Microsoft's DebugClient.

DebugClient spawns ``runtime executable`` with exactly one argument, so ``-m
graph_dap.adapter`` cannot be passed: it runs ``python3 launcher.py`` instead.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from graph_dap.adapter.__main__ import main

sys.exit(main([]))
