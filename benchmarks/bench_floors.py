"""The floors on whole splits, without a language model: their means with 95% intervals, present
and absent tasks apart, and which is the strongest.

Floors (docs/evaluation.md, "Floors"):

* ``none-<scaffold>``: the no-model baseline (``model="none"``) through the loop under a preset;
* ``retrieval-<scaffold>``: the retrieval floor (``model="retrieval"``: Find on the task's names,
  Search its text, header lines cited, unit names in the summary) through the loop under a preset
  (the launcher adds Find and Search where the preset lacks them); under ``plain`` the grammar
  leaves the evidence free, under ``aided`` it offers only the listed lines;
* ``retrieval-whole``: F0, the top ``max_evidence`` units Search ranks for the task's text cited
  whole (``path:start-end``), the task as the summary, without a loop (the committed floor of
  ``bench_explore.py``; scored without a trace, so nothing is checked for having been seen).

Every loop run is scored as a sweep scores it (``experiments.execute.execute_run``: its trace says
what was seen). Tasks: the legacy splits by name, or any task file (``load_suite(path)``; each task's
``workspace_root()`` is its tree). Rows go to ``--save`` (CSV); ``--from`` re-prints them.

Usage: python benchmarks/bench_floors.py [--tasks dev,test | FILE ...] [--scaffolds aided,plain]
       [--save FILE.csv] [--from FILE.csv]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd
from saved_rows import add_save_from, save_rows

from subagent_lab.analysis.headline import lift_table, readable_lift, strongest_floor
from subagent_lab.analysis.stats import mean_ci
from subagent_lab.bench.score import LOC_COLUMNS
from subagent_lab.bench.suite import BenchTask, load_suite, suite_label
from subagent_lab.config.profiles import default_config_path, load_config
from subagent_lab.core.types import ModelChoice
from subagent_lab.experiments.execute import execute_run
from subagent_lab.experiments.spec import RunSpec, Variant

FLOOR_MODELS: tuple[ModelChoice, ...] = ("none", "retrieval")
COLUMNS = ["split", "task_id", "kind", "model_choice", "scaffold", "terminal_reason", "status",
           "contract_valid", "quality", "strict_line_recall", "gold_recall_file", *LOC_COLUMNS,
           "candidate_recall", "total_tokens", "steps", "elapsed_s"]  # fmt: skip
"""The columns saved: enough to re-print every table (``--from``)."""
LOC_SHOWN = (("file Acc@5*", "file_acc_at5"), ("function Acc@5*", "func_acc_at5"),
             ("function hit@5*", "func_hit_at5"), ("unit recall@4*", "unit_recall_at4"))  # fmt: skip
"""The field's localization metrics printed per floor (docs/numbers.md)."""
POOL_K = 10
"""The whole-unit floor's pool: its candidate recall@K is over this many units (``RankStart.pool``)."""
SCORED = ("quality", "strict_line_recall", "gold_recall_file", *LOC_COLUMNS)


def tasks_of(source: str) -> tuple[str, list[BenchTask]]:
    """A split's name (``dev``, ``test``) or a task file's stem, and its tasks."""
    tasks = load_suite(source)
    return (source if source in ("dev", "dev-tree", "test") else suite_label(source)), tasks


def loop_rows(name: str, tasks: list[BenchTask], scaffold: str, out: Path) -> list[dict[str, object]]:
    """Each floor of ``FLOOR_MODELS`` through the loop on every task under ``scaffold``, scored."""
    lab = load_config(default_config_path())
    fields = lab.scaffold(scaffold).resolved()
    rows = []
    for model in FLOOR_MODELS:
        for task in tasks:
            run = RunSpec(
                run_key=f"{task.id}|{model}|{scaffold}", task=task, model=model, profile="explore",
                variant=Variant(), suite=name, scaffold=scaffold, scaffold_fields=fields, repeat=0,
                config_path=None, trace_dir=str(out / "traces"), cache_dir=None,
            )  # fmt: skip
            row = execute_run(run)
            row["model_choice"] = f"{model}-{scaffold}"
            rows.append(row)
    return rows


def whole_unit_rows(name: str, tasks: list[BenchTask], k: int) -> list[dict[str, object]]:
    """F0: the top ``k`` Search units cited whole, the task as the summary, no model, no loop."""
    from subagent_lab.bench.pool import pool_recall
    from subagent_lab.bench.scoring import score_run
    from subagent_lab.tools.symbols.search import retrieval_answer
    from subagent_lab.workspace.sandbox import Workspace

    rows: list[dict[str, object]] = []
    for task in tasks:
        root = task.workspace_root()
        started = time.monotonic()
        evidence = retrieval_answer(Workspace(root), task.prompt, max(k, POOL_K))
        pool, evidence = evidence, evidence[:k]
        answer = {"status": "completed", "summary": task.prompt, "findings": [], "evidence": evidence}
        score = score_run(task, answer, root).model_dump()
        rows.append({
            "split": name, "task_id": task.id, "kind": task.kind, "model_choice": "retrieval-whole",
            "scaffold": "no loop", "terminal_reason": "completed", "status": "completed",
            "contract_valid": True, "total_tokens": 0, "steps": 0, "elapsed_s": time.monotonic() - started,
            **{key: score[key] for key in SCORED}, "candidate_recall": pool_recall(task, root, pool),
        })  # fmt: skip
    return rows


def report(df: pd.DataFrame) -> None:
    """Per split: every floor's mean [95% CI] on all, present and absent tasks, its lift over the
    strongest floor [95% CI], recalls over the present tasks, tokens and how runs ended."""
    for split, part in df.groupby("split", sort=False):
        part = part.drop(columns=["scaffold"])  # each floor's label names its preset
        present = part[part["kind"] != "absent"]
        print(f"\n== {split}: {part['task_id'].nunique()} tasks ({present['task_id'].nunique()} present) ==")
        table = readable_lift(lift_table(part))
        table = table.drop(columns=[c for c in table.columns if "no-model" in c or c == "split"])
        with pd.option_context("display.width", 250, "display.max_columns", 30):
            print(table.to_string(index=False))
        found = strongest_floor(part)
        if found is not None:
            print(f"  strongest floor on all {split} tasks: {found[0]} ({found[1]:.3f})")
        for arm, rows in part.groupby("model_choice", sort=True):
            mine = present[present["model_choice"] == arm]
            strict, files = mean_ci(mine, "strict_line_recall"), mean_ci(mine, "gold_recall_file")
            ended = {str(k): int(v) for k, v in rows["terminal_reason"].value_counts().items()}
            loc = [
                f"{label} {ci.mean:.2f} [{ci.low:.2f}, {ci.high:.2f}]"
                for label, column in LOC_SHOWN
                if column in mine and mine[column].notna().any()
                for ci in [mean_ci(mine, column)]
            ]
            print(
                f"  {arm}: strict recall* {strict.mean:.2f} [{strict.low:.2f}, {strict.high:.2f}], "
                f"file recall* {files.mean:.2f} [{files.low:.2f}, {files.high:.2f}], {', '.join(loc)}, "
                f"median tokens {rows['total_tokens'].median():.0f}, ended {ended}, contract valid "
                f"{rows['contract_valid'].mean():.2f}"
            )
        print("  * over the present tasks")


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--tasks", default="dev,test", help="split names or task files, comma-separated")
    parser.add_argument("--scaffolds", default="aided,plain", help="presets the loop floors run under")
    parser.add_argument("--whole", type=int, default=4, help="units F0 cites whole (0: no F0)")
    add_save_from(parser)
    args = parser.parse_args()
    if args.source:
        report(pd.read_csv(args.source))
        return 0
    started = time.monotonic()
    rows: list[dict[str, object]] = []
    with tempfile.TemporaryDirectory(prefix="floors-") as scratch:
        for source in args.tasks.split(","):
            name, tasks = tasks_of(source)
            for scaffold in args.scaffolds.split(","):
                rows += loop_rows(name, tasks, scaffold, Path(scratch))
            if args.whole:
                rows += whole_unit_rows(name, tasks, args.whole)
    df = pd.DataFrame(rows)
    crashed = df[df["terminal_reason"] == "crashed"]
    for _, row in crashed.iterrows():
        error = str(row.get("error"))[-300:]
        print(f"crashed: {row['task_id']} {row['model_choice']}: {error}", file=sys.stderr)
    df = df[[c for c in COLUMNS if c in df.columns]]
    print(f"{len(df)} runs in {(time.monotonic() - started) / 60:.1f} min, no model, one process")
    save_rows(df, args.save)
    report(df)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
