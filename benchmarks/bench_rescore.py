"""Committed sweep rows re-scored under issue 36's scorer, without traces: old vs new quality per arm.

Every CSV of ``benchmarks/results`` with an ``evidence`` column (the cited items as written) is
re-scored by ``score_run`` on its task (legacy suites ``dev`` / ``test``; workspaces as the sweep
had them), no model, no trace. What the rows allow is applied; what needs the summary text or the
trace is carried from the row as recorded, so each new figure is an **upper bound** of what the
new scorer gives with the traces:

- applied: overlapping or adjacent items merged per file, only the first ``MAX_EVIDENCE`` counted,
  absence credit only with status ``completed`` (the row's ``status``), the localization columns;
- carried as recorded: ``keyword_recall`` (the tool-output rule needs the trace), ``admits_absence``
  (the tightened patterns need the answer's text, which rows do not keep), and whether items were
  seen (seen means printed needs the trace; rows are scored as if every item was seen).

Rows that kept no evidence (the ``retrieval-4`` floor of ``bench_explore.py``) cannot be re-scored:
their ``rescored`` count is 0 and their new figures empty.

Usage: python benchmarks/bench_rescore.py [CSV ...]   (default: every such CSV; under a minute)
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from subagent_lab.bench.scoring import score_run  # noqa: E402
from subagent_lab.bench.suite import BenchTask, load_suite  # noqa: E402

ARM = ["csv", "split", "scaffold", "model_choice"]


def _suites() -> Callable[[str, str], tuple[BenchTask, Path]]:
    """(split, task id) -> the task and its workspace root, each loaded once."""
    tasks: dict[str, dict[str, BenchTask]] = {}
    roots: dict[tuple[str, str], Path] = {}

    def get(split: str, task_id: str) -> tuple[BenchTask, Path]:
        if split not in tasks:
            tasks[split] = {t.id: t for t in load_suite(split)}
        task = tasks[split][task_id]
        key = (split, str(getattr(task, "package", task_id)))
        if key not in roots:
            roots[key] = task.workspace_root()
        return task, roots[key]

    return get


def _new(row: pd.Series, task: BenchTask, root: Path) -> dict[str, Any]:
    """The row's new quality and localization figures (see the module's docstring)."""
    if not isinstance(row["evidence"], str):  # a row that kept no evidence (bench_explore's floor)
        return {"new": math.nan}
    if not bool(row["contract_valid"]):
        return {"new": 0.0}
    evidence = json.loads(row["evidence"])
    status = "completed" if row["status"] == "completed" else "partial"
    score = score_run(task, {"status": status, "summary": "(not kept in rows)", "evidence": evidence}, root)
    if task.kind == "absent":
        return {"new": float(status == "completed" and bool(row["admits_absence"]) and not evidence)}
    keywords = row["keyword_recall"]
    parts = [score.strict_line_recall, score.strict_line_precision]
    parts += [] if keywords is None or (isinstance(keywords, float) and math.isnan(keywords)) else [keywords]
    return {
        "new": sum(parts) / len(parts),
        "unit_recall_at4": score.unit_recall_at4,
        "unit_precision": score.unit_precision,
        "file_acc_at5": score.file_acc_at5,
        "func_acc_at5": score.func_acc_at5,
    }


def rescore(paths: list[Path]) -> pd.DataFrame:
    """One row per committed row: its arm, kind, old quality and the new figures."""
    get = _suites()
    out: list[dict[str, Any]] = []
    for path in paths:
        rows = pd.read_csv(path)
        for _, row in rows.iterrows():
            split = "dev" if row["split"] == "dev-tree" else str(row["split"])
            task, root = get(split, str(row["task_id"]))
            figures = _new(row, task, root)
            arm = {"csv": path.name, "split": row["split"], "scaffold": row["scaffold"]}
            out.append({**arm, "model_choice": row["model_choice"], "task_id": row["task_id"],
                        "kind": task.kind, "old": float(row["quality"]), **figures})  # fmt: skip
    return pd.DataFrame(out)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("csv", nargs="*", type=Path)
    args = parser.parse_args()
    paths = args.csv or sorted(
        p for p in (REPO / "benchmarks" / "results").glob("*.csv") if "evidence" in pd.read_csv(p, nrows=0)
    )
    table = rescore(paths)
    present = table[table["kind"] != "absent"]
    means = table.groupby(ARM, sort=False).agg(
        n=("old", "size"), rescored=("new", "count"), old=("old", "mean"), new=("new", "mean")
    )
    means["new−old"] = means["new"] - means["old"]
    loc = present.groupby(ARM, sort=False)[["old", "new", "unit_recall_at4", "unit_precision", "file_acc_at5",
                                          "func_acc_at5"]].mean()  # fmt: skip
    loc = loc.rename(columns={"old": "old present", "new": "new present"})
    pd.set_option("display.width", 200)
    print("quality per arm, all tasks (new: merged items, first 4 counted, absence needs `completed`;")
    print("keywords, absence wording and seen as the rows recorded: an upper bound of the traced score)")
    print(means.round(3).to_string())
    absent = table[(table["kind"] == "absent") & (table["old"] == 1.0) & (table["new"] == 0.0)]
    print(f"\nabsent-task rows that lose credit only for status `partial`: {len(absent)}")
    if not absent.empty:
        print(absent.groupby(ARM, sort=False).size().to_string())
    print("\npresent tasks: quality and the localization columns under the new scorer")
    print(loc.round(3).to_string())
    return 0


if __name__ == "__main__":
    sys.exit(main())
