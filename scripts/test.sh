#!/usr/bin/env bash
# The whole test suite on a fresh machine: set-up, lint, types, unit + red-team + live tests, notebooks.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
VENV="${SUBAGENT_LAB_VENV:-.venv}"
echo "[test] ruff"; "$VENV/bin/ruff" check subagent_lab tests benchmarks
echo "[test] mypy"; "$VENV/bin/mypy" subagent_lab
# The live tests and the notebooks start the embedded model server on demand and stop it at exit.
echo "[test] pytest"
exec "$VENV/bin/python" -m pytest tests notebooks --nbval-lax --nbval-current-env -p no:cacheprovider "$@"
