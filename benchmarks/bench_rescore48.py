"""The committed sittings re-scored under issue 48's rules: old vs new headline figures, with intervals.

Issue 48 changed what the headline counts:

- Acc@k looks at the first k merged items (Acc@5 saw four);
- unit credit needs the item to lie inside a short function (or short span) holding the gold, or to
  hold at least half the gold span's lines while at most twice as wide (a window that touches the
  span earned full credit); a gold span makes only one item useful to unit precision;
- absent tasks never enter the headline (a constant give-up passed them), and the tasks whose prompt
  names a gold unit (``names_gold_symbol``) are reported apart (``no-leak``).

For every committed sitting with kept evidence, each row is re-scored by ``score_run`` on its task
(no model, no trace: every cited item is taken as seen, and keyword recall, which needs the answer's
text, is carried from the row), and the per-arm means over the headline's tasks are printed: *old*
as the row recorded it (all tasks pooled, the old scorer) and *new* (present tasks, the new scorer),
each with its bootstrap 95% interval (``analysis.stats.mean_ci``), then over the non-leaking tasks.
The paired main − floor differences follow, old and new, with their non-tied counts and sign tests.
Then the give-up floor: the constant "No evidence." answer on the legacy splits, old (pooled over all
tasks, as the tables reported it) and new (the headline: present tasks; absent apart).

Usage: python benchmarks/bench_rescore48.py   (about a minute on 2 cores; needs the workspaces)
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path
from typing import Any

import pandas as pd

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from subagent_lab.analysis.headline import leak_count, task_subsets  # noqa: E402
from subagent_lab.analysis.stats import mean_ci, paired_difference, sign_text  # noqa: E402
from subagent_lab.bench.giveup import give_up_score  # noqa: E402
from subagent_lab.bench.scoring import score_run  # noqa: E402
from subagent_lab.bench.suite import BenchTask, load_suite  # noqa: E402

RESULTS = REPO / "benchmarks" / "results"
SITTINGS = {
    "mined test, 60 sat": ["rs-mined-test60.csv"],
    "mined dev, 60": ["rs-mined-dev20.csv", "rs-mined-dev40.csv"],
    "legacy test, 33": ["rs-test-light.csv", "rs-test-main.csv"],
}
"""The sittings the docs' headline tables come from (rows with their evidence kept)."""
METRICS = ("quality", "func_acc_at5", "unit_recall_at4", "file_acc_at5")
"""The headline figures: quality, then the field's localization metrics."""


def _tasks(split: str) -> dict[str, BenchTask]:
    return {t.id: t for t in load_suite("dev" if split == "dev-tree" else split)}


def rescore(rows: pd.DataFrame) -> pd.DataFrame:
    """``rows`` with ``new_<metric>`` columns: the row's evidence scored by the new rules."""
    suites: dict[str, dict[str, BenchTask]] = {}
    roots: dict[str, Path] = {}
    out: list[dict[str, Any]] = []
    for _, row in rows.iterrows():
        split = str(row["split"])
        suites.setdefault(split, _tasks(split))
        task = suites[split][str(row["task_id"])]
        key = f"{split}:{task.package}:{task.workspace}"
        roots.setdefault(key, task.workspace_root())
        figures: dict[str, Any] = {"old_" + m: row.get(m) for m in METRICS}
        figures["old_quality"] = row["quality"]
        if not bool(row["contract_valid"]):
            figures |= {"new_" + m: 0.0 for m in METRICS}
        else:
            evidence = json.loads(row["evidence"]) if isinstance(row["evidence"], str) else []
            status = "completed" if row["status"] == "completed" else "partial"
            answer = {"status": status, "summary": "(not kept in rows)", "evidence": evidence}
            score = score_run(task, answer, roots[key])
            quality = score.quality
            if task.kind not in ("localize", "absent"):  # keywords need the text: carried from the row
                keywords = row.get("keyword_recall")
                parts = [score.strict_line_recall, score.strict_line_precision]
                parts += [] if keywords is None or pd.isna(keywords) else [float(keywords)]
                quality = sum(parts) / len(parts)
            elif task.kind == "absent":
                quality = float(status == "completed" and bool(row["admits_absence"]) and not evidence)
            figures |= {"new_quality": quality} | {"new_" + m: getattr(score, m) for m in METRICS[1:]}
        out.append({**row.to_dict(), **figures, "kind": task.kind,
                    "task_meta": json.dumps(task.meta, sort_keys=True, default=str)})  # fmt: skip
    return pd.DataFrame(out)


def _ci(df: pd.DataFrame, column: str) -> str:
    ci = mean_ci(df, column)
    if math.isnan(ci.mean):
        return "–"
    return f"{ci.mean:.2f}" if math.isnan(ci.low) else f"{ci.mean:.2f} [{ci.low:.2f}, {ci.high:.2f}]"


def arm_table(df: pd.DataFrame) -> pd.DataFrame:
    """Per arm: each metric old (all tasks pooled, as recorded) and new (the headline's tasks, then
    the non-leaking ones), with intervals."""
    subsets = dict(task_subsets(df))
    head = subsets.get("present", subsets.get("all", df))
    clean = subsets.get("no-leak")
    rows = []
    for arm in sorted(df["model_choice"].astype(str).unique()):
        mine = df[df["model_choice"].astype(str) == arm]
        row: dict[str, Any] = {"model": arm, "tasks": mine["task_id"].nunique(),
                               "present": head[head["model_choice"] == arm]["task_id"].nunique()}  # fmt: skip
        for metric in METRICS:
            row[f"{metric} old"] = _ci(mine, f"old_{metric}")
            row[f"{metric} new"] = _ci(head[head["model_choice"] == arm], f"new_{metric}")
            if clean is not None:
                row[f"{metric} new, no-leak"] = _ci(clean[clean["model_choice"] == arm], f"new_{metric}")
        rows.append(row)
    return pd.DataFrame(rows)


def _pair(df: pd.DataFrame, a: str, b: str, column: str) -> str:
    if not {a, b} <= set(df["model_choice"].astype(str)):
        return "–"
    d = paired_difference(df, a, b, value=column)
    return (
        f"{d.diff.mean:+.2f} [{d.diff.low:+.2f}, {d.diff.high:+.2f}]".replace("-", "−") + f" ({sign_text(d)})"
    )


def pair_lines(df: pd.DataFrame) -> list[str]:
    """main − none and main − light, per metric: old (all tasks, old scorer) and new (headline's
    tasks, then the non-leaking ones, new scorer), paired by task."""
    subsets = dict(task_subsets(df))
    head = subsets.get("present", subsets.get("all", df))
    lines = []
    for a, b in (("main", "none"), ("light", "none"), ("main", "light")):
        for metric in METRICS:
            old, new = _pair(df, a, b, f"old_{metric}"), _pair(head, a, b, f"new_{metric}")
            text = f"  {a} − {b} {metric}: old {old}; new {new}"
            if "no-leak" in subsets:
                text += f"; new no-leak {_pair(subsets['no-leak'], a, b, f'new_{metric}')}"
            lines.append(text)
    return lines


def give_up_lines() -> list[str]:
    """The constant "No evidence." answer on the legacy splits: old headline (all tasks pooled) and
    new (present tasks), and its absent-task score, the absent floor."""
    lines = []
    for split in ("dev", "test"):
        tasks = [t for t in load_suite(split) if t.scored]
        scores = pd.DataFrame(
            [{"task_id": t.id, "kind": t.kind, "quality": give_up_score(t).quality} for t in tasks]
        )
        present, absent = scores[scores["kind"] != "absent"], scores[scores["kind"] == "absent"]
        lines.append(
            f"  {split}: old headline (all {len(scores)} tasks) {_ci(scores, 'quality')}; "
            f"new headline (present {len(present)}) {_ci(present, 'quality')}; "
            f"absent ({len(absent)}, apart, the give-up floor) {_ci(absent, 'quality')}"
        )
    return lines


def main() -> int:
    pd.set_option("display.width", 250)
    pd.set_option("display.max_columns", 30)
    for name, files in SITTINGS.items():
        rows = pd.concat([pd.read_csv(RESULTS / f) for f in files], ignore_index=True)
        table = rescore(rows)
        leaks = leak_count(table[table["kind"] != "absent"])
        print(f"\n== {name} ({', '.join(files)}): {table['task_id'].nunique()} tasks, {len(table)} rows, "
              f"{leaks} leaking (prompt names a gold unit) ==")  # fmt: skip
        shown = arm_table(table)
        for metric in METRICS:
            columns = ["model", "tasks", "present", *[c for c in shown.columns if c.startswith(f"{metric} ")]]
            print(shown[columns].to_string(index=False))
        print("paired by task, 95% bootstrap CI:")
        for line in pair_lines(table):
            print(line)
    print(
        '\n== the give-up floor: "No evidence." to every task (legacy splits; the mined ones have no '
        "absent task) =="
    )
    for line in give_up_lines():
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
