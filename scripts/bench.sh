#!/usr/bin/env bash
# Set up, install the benchmark's peers (Polygraphy; torch + onnxscript for the exported GPT), run the benchmarks.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
source "$root/scripts/setup.sh"
cd "$root"
if ! python -c "import polygraphy, torch, onnxscript" 2>/dev/null; then
  echo "bench: installing polygraphy, torch==2.13.0 (CPU) and onnxscript" >&2
  python -m pip install -q --disable-pip-version-check polygraphy "torch==2.13.0" onnxscript >&2
fi
exec python benchmarks/run.py "$@"
