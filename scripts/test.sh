#!/usr/bin/env bash
# Set up everything and run every test: lint, types, pytest, the VS Code extension's tests.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
source "$root/scripts/setup.sh"
cd "$root"
echo "== ruff" >&2
ruff check graph_dap tests benchmarks examples
echo "== mypy" >&2
mypy graph_dap/runtime graph_dap/adapter graph_dap/worker graph_dap/cli graph_dap/host graph_dap/lsp
# Chromium (and the rest of the e2e's tools) before pytest: the scan report's test opens the report in it.
bash vscode-ext/scripts/setup-e2e.sh >/dev/null
# Everything here runs side by side on few cores: onnxruntime's pool of one thread in each graph-dap process (an
# idle pool's threads spin after each run and take the cores that the other processes need).
export GRAPH_DAP_THREADS="${GRAPH_DAP_THREADS:-1}"
# The extra suites (scripts/test.d: the adapter under Microsoft's DAP test client, the VS Code extension
# and its end-to-end test in code-server) run beside pytest, one after another: they mostly wait on a
# browser and a UI, and pytest leaves room on the cores (5 min 53 s in a row, one after the other).
# Their output is kept and printed after pytest's.
extras_log="$(mktemp "${TMPDIR:-/tmp}/graph-dap-extras.XXXXXX")"
# (In a process group of their own, so that an interrupted run stops them too: code-server, Chromium.)
setsid -w bash -c 'for extra in "$1"/scripts/test.d/*.sh; do
    [ -e "$extra" ] || continue
    echo "== $(basename "$extra")"
    bash "$extra" || exit $?
  done' extras "$root" >"$extras_log" 2>&1 &
extras=$!
trap 'kill -- "-$extras" 2>/dev/null || true; rm -f "$extras_log"' EXIT
echo "== pytest (the suites of scripts/test.d run beside it; their output follows)" >&2
# In parallel (pytest-xdist: one worker per core; PYTEST_XDIST_AUTO_NUM_WORKERS overrides), the cases
# of one model together (xdist_group marks), and the ten slowest tests named at the end.
status=0
python -m pytest tests -n auto --dist loadgroup --durations=10 || status=$?
if [ "$status" -eq 5 ]; then
  echo "test.sh: pytest collected no tests (exit 5): that is a failure" >&2
fi
extras_status=0
wait "$extras" || extras_status=$?
cat "$extras_log" >&2
[ "$status" -eq 0 ] || exit "$status"
if [ "$extras_status" -ne 0 ]; then
  echo "test.sh: the suites of scripts/test.d failed (exit $extras_status; their output is above)" >&2
  exit "$extras_status"
fi
