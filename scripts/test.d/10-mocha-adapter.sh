#!/usr/bin/env bash
# The adapter against Microsoft's DAP test client (@vscode/debugadapter-testsupport, mocha).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$root/tests/mocha"
if [ ! -d node_modules ] || [ package-lock.json -nt node_modules ]; then
  npm ci --no-audit --no-fund --loglevel=error
fi
PYTHON="$(command -v python)" npm test
