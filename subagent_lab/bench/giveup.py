"""The give-up floor (``give-up``): the constant answer "No evidence." to every task, no model.

A policy that never looks at the code still passes every ``absent`` task whose absence claim the
scorer accepts, and earns nothing on a task with gold. Its score on the absent tasks is therefore
their floor: a model's absent-task figure is read against it, never pooled into a headline (the
tables score absent tasks apart, ``analysis.headline.task_subsets``). Its rows are computed by
``score_run``, not run through the loop: the answer is the same whatever the tools would show.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from subagent_lab.bench.score import Score
from subagent_lab.bench.scoring import score_run
from subagent_lab.bench.suite import BenchTask

GIVE_UP = "give-up"
"""The arm's name in rows (``model_choice``): a floor (``analysis.headline.FLOORS``)."""
GIVE_UP_SUMMARY = "No evidence."
GIVE_UP_ANSWER: dict[str, Any] = {
    "status": "completed", "summary": GIVE_UP_SUMMARY, "findings": [], "evidence": [],
}  # fmt: skip
"""The constant answer: completed, no evidence, an impersonal give-up."""


def give_up_score(task: BenchTask, root: Path | None = None) -> Score:
    """``score_run`` of ``GIVE_UP_ANSWER`` on ``task``; ``root`` is not read (no evidence is cited),
    so the task's workspace need not exist."""
    return score_run(task, GIVE_UP_ANSWER, root or Path("."))


def give_up_rows(tasks: Iterable[BenchTask], split: str, **columns: Any) -> list[dict[str, Any]]:
    """One row per scored task (or absent task) for the give-up arm, with the sweep rows' columns a
    table reads (``columns``: more, e.g. ``scaffold``)."""
    rows = []
    for task in tasks:
        if not task.gold and task.kind != "absent":
            continue
        score = give_up_score(task).model_dump()
        rows.append({
            "split": split, "task_id": task.id, "kind": task.kind, "package": task.package,
            "model_choice": GIVE_UP, "model_used": GIVE_UP, "repeat": 0, "terminal_reason": "completed",
            "status": "completed", "contract_valid": True, "elapsed_s": 0.0, "model_time_s": 0.0,
            "total_tokens": 0, "cache_hits": 0, "grounded_ratio": 0.0, "evidence": "[]",
            "task_meta": json.dumps(task.meta, sort_keys=True, default=str),
            **{key: (len(v) if isinstance(v, list) else v) for key, v in score.items()
               if key not in ("task_id", "kind", "errors", "status")},
            **columns,
        })  # fmt: skip
    return rows
