#!/usr/bin/env bash
# Set up everything and run every test: lint, types, pytest, the VS Code extension's tests.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
source "$root/scripts/setup.sh"
cd "$root"
echo "== ruff" >&2
ruff check graph_dap tests benchmarks examples
echo "== mypy" >&2
mypy graph_dap/runtime graph_dap/adapter
echo "== pytest" >&2
python -m pytest tests
for extra in "$root"/scripts/test.d/*.sh; do
  [ -e "$extra" ] || continue
  echo "== $(basename "$extra")" >&2
  bash "$extra"
done
