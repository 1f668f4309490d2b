#!/usr/bin/env bash
# The VS Code extension's whole test, for .ci/run: installs what it needs (idempotent), then
# type check and build, unit tests, the .vsix, and the end-to-end test in code-server.
# Usage: bash vscode-ext/scripts/ci.sh [--no-e2e]
# The Python side (graph_dap importable by python3, or by $GRAPH_DAP_PYTHON) must be set up first.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup-e2e.sh >/dev/null
npm test
npm run --silent package >/dev/null   # type check, bundle, dist/graph-dap.vsix
# The graph view's bundle is committed in the Python package (a pip install has no Node): it must be this build.
if ! git diff --quiet -- ../graph_dap/runtime/tools/graphview/graphview.js 2>/dev/null; then
  echo "graph_dap/runtime/tools/graphview/graphview.js is not the build of src/graphview: commit the rebuilt file" >&2
  exit 1
fi
if [ "${1:-}" != "--no-e2e" ]; then
  node scripts/e2e.mjs --no-setup --no-build
fi
