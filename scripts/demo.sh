#!/usr/bin/env bash
# The main job: set up, then run the example model under graph-dap, breaking at its NaN.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
source "$root/scripts/setup.sh"
cd "$root"
[ -f examples/nan_demo.onnx ] || python examples/make_example.py
set +e
graph-dap run examples/nan_demo.onnx --break-on nan,inf,error
rc=$?
set -e
# graph-dap exits 1 when it stopped on a break: here that is the expected outcome.
if [ "$rc" -eq 1 ]; then exit 0; fi
exit "$rc"
