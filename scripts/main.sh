#!/usr/bin/env bash
# The main job on a fresh machine: set-up, then a real light-vs-main explore sweep (one scaffold, with
# the no-model baseline) and its table.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
VENV="${SUBAGENT_LAB_VENV:-.venv}"
# One run at a time: on 2 cores two concurrent runs only share them (the smoke sweep took 577 s with
# 2 workers, 533 s of run time with 1; docs/benchmarks.md). Later arguments override this one.
# The two floors ("none", the no-model baseline, and "retrieval", Find + Search with no model; both
# take seconds) run beside both models on the same tasks and the same scaffold preset, the shipped
# default "rank" (each model scores the harness's own retrieval, fused with its rank): the table leads
# with main - light and each model's lift over the baseline and the strongest floor.
exec "$VENV/bin/subagent-lab" sweep --suite smoke --models none,retrieval,light,main --scaffold rank --workers 1 "$@"
