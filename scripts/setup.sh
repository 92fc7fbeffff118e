#!/usr/bin/env bash
# One-shot, idempotent set-up of a fresh machine: virtual environment, the project,
# llama.cpp's llama-server built for this CPU (cached), and the embedded model weights.
set -euo pipefail
cd "$(dirname "$0")/.."

VENV="${SUBAGENT_LAB_VENV:-.venv}"
CACHE="${SUBAGENT_LAB_CACHE:-$HOME/.cache/subagent_lab}"
PY="${PYTHON:-python3}"

log() { printf '[setup] %s\n' "$*" >&2; }

# The main agent's Bash runs inside bubblewrap; without bwrap it is disabled. Quiet when present.
if ! command -v bwrap >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    log "installing bubblewrap (the sandbox of the main agent's Bash)"
    export DEBIAN_FRONTEND=noninteractive
    if ! apt-get install -y -qq bubblewrap >/dev/null 2>&1; then
      apt-get update -qq >/dev/null 2>&1 || true
      apt-get install -y -qq bubblewrap >/dev/null || log "could not install bubblewrap: Bash stays disabled"
    fi
  else
    log "bwrap is missing: install the Debian package 'bubblewrap' as root, or Bash stays disabled"
  fi
fi

# The browser tests (tests/browser) drive Debian's Chromium through Playwright; nothing downloads a
# browser. Quiet when present; setup never fails for it (without it those tests skip, or fail in CI).
if [ ! -x /usr/bin/chromium ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    log "installing chromium (the browser of tests/browser)"
    export DEBIAN_FRONTEND=noninteractive
    if ! apt-get install -y -qq chromium >/dev/null 2>&1; then
      apt-get update -qq >/dev/null 2>&1 || true
      apt-get install -y -qq chromium >/dev/null 2>&1 || log "could not install chromium: the browser tests cannot run"
    fi
  else
    log "chromium is missing: install the Debian package 'chromium' as root, or the browser tests skip"
  fi
fi

if [ ! -x "$VENV/bin/python" ]; then
  log "creating virtual environment $VENV"
  "$PY" -m venv "$VENV"
  "$VENV/bin/python" -m pip install -q --upgrade pip
fi
PIP=("$VENV/bin/python" -m pip)

# The embedded engine: llama.cpp's llama-server, built once from pinned source and cached.
bash scripts/build_llama_server.sh "${PIP[@]}"

# The inspect extra too, so tests/test_inspect_export.py and the inspect view browser test run
# rather than skip (about 20 s; 45 packages, 150 MB beyond the other extras, 64 MB of it inspect_ai).
log "installing subagent_lab with its dev, model and inspect extras"
"${PIP[@]}" install -q -e ".[models,dev,inspect]"

log "fetching the benchmark's source-tree workspaces (pinned sdists, outside the repository)"
"$VENV/bin/python" -m subagent_lab.bench.workspaces fetch
log "fetching the mined suites' workspaces (249 pinned sdists, SHA-256 checked) and checking their gold"
"$VENV/bin/subagent-lab" tasks mined-dev mined-dev2 mined-test mined-test2 --quiet

log "assembling and verifying the embedded model weights"
"$VENV/bin/subagent-lab" models install
log "done"
