#!/usr/bin/env bash
# The main job on a fresh machine: set-up, then a real light-vs-main explore sweep and its table.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
VENV="${SUBAGENT_LAB_VENV:-.venv}"
exec "$VENV/bin/subagent-lab" sweep --suite smoke --models light,main "$@"
