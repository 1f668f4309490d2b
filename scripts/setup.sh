#!/usr/bin/env bash
# Set up the Python environment in .venv (idempotent: quick when nothing changed).
# Usage: source scripts/setup.sh   (or run it; it prints the venv's python)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="$root/.venv"
py="${PYTHON:-python3}"
if [ ! -x "$venv/bin/python" ]; then
  echo "setup: creating $venv" >&2
  "$py" -m venv "$venv"
fi
stamp="$venv/.graph-dap-installed"
# pyproject.toml, setup.py and the C source it compiles (quant's one-pass kernels): any changed, install again
want="$(cat "$root/pyproject.toml" "$root/setup.py" "$root"/graph_dap/runtime/passes/_passes.c | sha256sum | cut -d' ' -f1)"
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
  echo "setup: installing graph-dap and its test tools into $venv" >&2
  "$venv/bin/python" -m pip install -q --disable-pip-version-check --upgrade pip >&2
  "$venv/bin/python" -m pip install -q --disable-pip-version-check -e "$root[test]" >&2
  echo "$want" > "$stamp"
fi
# An editable install leaves graph-dap's own modules uncompiled; where PYTHONDONTWRITEBYTECODE is set,
# every adapter and worker process would compile them again (80 ms each). Quick when up to date.
"$venv/bin/python" -m compileall -q "$root/graph_dap" >/dev/null || true
export PATH="$venv/bin:$PATH"
