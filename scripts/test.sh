#!/usr/bin/env bash
# Set up everything and run every test: lint, types, pytest, the VS Code extension's tests.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
source "$root/scripts/setup.sh"
cd "$root"
echo "== ruff" >&2
ruff check graph_dap tests benchmarks examples
echo "== mypy" >&2
mypy graph_dap/runtime graph_dap/adapter graph_dap/worker
# Chromium (and the rest of the e2e's tools) before pytest: the scan report's test opens the report in it.
bash vscode-ext/scripts/setup-e2e.sh >/dev/null
echo "== pytest" >&2
# In parallel (pytest-xdist: one worker per core; PYTEST_XDIST_AUTO_NUM_WORKERS overrides), the cases
# of one model together (xdist_group marks), and the ten slowest tests named at the end.
status=0
python -m pytest tests -n auto --dist loadgroup --durations=10 || status=$?
if [ "$status" -eq 5 ]; then
  echo "test.sh: pytest collected no tests (exit 5): that is a failure" >&2
fi
[ "$status" -eq 0 ] || exit "$status"
for extra in "$root"/scripts/test.d/*.sh; do
  [ -e "$extra" ] || continue
  echo "== $(basename "$extra")" >&2
  bash "$extra"
done
