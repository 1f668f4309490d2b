#!/usr/bin/env bash
# The VS Code extension: build, unit tests, .vsix, and the end-to-end test in code-server + Chromium.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
GRAPH_DAP_PYTHON="$(command -v python)" bash "$root/vscode-ext/scripts/ci.sh"
