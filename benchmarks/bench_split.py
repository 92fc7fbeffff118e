"""A mined split's figures on the WHOLE split, without a language model (issue 48): its tasks per
package, its gold warnings, its leak count and its no-model floors with 95% intervals, over all
tasks, over the tasks whose prompt names no gold unit and over those that do.

    PYTHONPATH=$PWD .venv/bin/python benchmarks/bench_split.py [--tasks mined-test2]
        [--save rows.csv] [--from rows.csv]

The split's sdists must be fetched first (``subagent-lab tasks mined-test2``; set-up does). The
floors are ``bench_floors.py``'s: ``none`` and ``retrieval`` through the loop under the ``aided``
and ``plain`` presets, and ``retrieval-whole`` (F0: the top Search units cited whole, no loop),
each scored as a sweep scores it; the localization columns are the harness's (``bench.score``:
file and function Acc@k and hit@k for k in 1, 3, 5, unit recall@4). Intervals: the bootstrap over
tasks of ``analysis.stats.mean_ci``. A leak is a prompt that names a gold unit
(``meta.names_gold_symbol``); the other gold warnings are ``bench.gold_warnings``'s, on the
fetched trees. Prints the wall time of each part.
"""

from __future__ import annotations

import argparse
import hashlib
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import pandas as pd
import yaml

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))  # siblings: bench_floors (the floors), gold_warnings (trees), saved_rows

from bench_floors import COLUMNS, loop_rows, whole_unit_rows  # noqa: E402
from gold_warnings import tree_of  # noqa: E402
from saved_rows import add_save_from, save_rows  # noqa: E402

from subagent_lab.analysis.stats import mean_ci  # noqa: E402
from subagent_lab.bench.gold_warnings import TASK_WARNINGS, TREE_WARNINGS, count_warnings  # noqa: E402
from subagent_lab.bench.suite import SUITE_FILES, load_suite  # noqa: E402

SHOWN = (("func Acc@1", "func_acc_at1"), ("func Acc@3", "func_acc_at3"), ("func Acc@5", "func_acc_at5"),
         ("file Acc@1", "file_acc_at1"), ("file Acc@3", "file_acc_at3"), ("file Acc@5", "file_acc_at5"),
         ("func hit@5", "func_hit_at5"), ("unit recall@4", "unit_recall_at4"))  # fmt: skip
"""The localization columns printed per floor and task subset (``bench.score.LOC_COLUMNS``)."""
HEADLINE = "func_acc_at5"
"""The column the strongest floor is chosen on."""


def task_file(source: str) -> Path:
    """A suite id's task file (``SUITE_FILES``), or the path given."""
    return SUITE_FILES.get(source, Path(source))


def describe(path: Path) -> dict[str, bool]:
    """Print the file's hash, tasks per package, gold warnings and leak count; task id -> leaks."""
    raw = {t["id"]: t for t in yaml.safe_load(path.read_text(encoding="utf-8"))["tasks"]}
    packages = Counter(str(t["workspace"]["sdist"]).split("==")[0] for t in raw.values())
    print(f"{path.name}: sha256 {hashlib.sha256(path.read_bytes()).hexdigest()}, {len(raw)} tasks, "
          f"{len(packages)} packages, largest share {max(packages.values()) / len(raw):.1%}")  # fmt: skip
    print("  " + ", ".join(f"{name} {n}" for name, n in packages.most_common()))
    tasks = load_suite(path)
    counts = count_warnings((raw[t.id], tree_of(t.workspace)) for t in tasks)
    trees = counts["with-tree"]
    cells = [f"{w} {counts[w]}" for w in TASK_WARNINGS]
    cells += [f"{w} {counts[w]}/{trees}" if trees else f"{w} (no sdists fetched)" for w in TREE_WARNINGS]
    print("  gold warnings (tasks): " + ", ".join(cells))
    leaks = {task_id: bool(t["meta"].get("names_gold_symbol")) for task_id, t in raw.items()}
    print(f"  leaks (the prompt names a gold unit): {sum(leaks.values())} of {len(leaks)}")
    return leaks


def floor_rows(path: Path, scaffolds: list[str], whole: int) -> pd.DataFrame:
    """Every floor on every task of the file, scored (``bench_floors``)."""
    name, tasks = path.stem, load_suite(path)
    rows: list[dict[str, object]] = []
    with tempfile.TemporaryDirectory(prefix="split-floors-") as scratch:
        for scaffold in scaffolds:
            rows += loop_rows(name, tasks, scaffold, Path(scratch))
        if whole:
            rows += whole_unit_rows(name, tasks, whole)
    df = pd.DataFrame(rows)
    for _, row in df[df["terminal_reason"] == "crashed"].iterrows():
        error = str(row.get("error"))[-300:]
        print(f"crashed: {row['task_id']} {row['model_choice']}: {error}", file=sys.stderr)
    return df[[c for c in COLUMNS if c in df.columns]]


def report(df: pd.DataFrame, leaks: dict[str, bool]) -> None:
    """Per floor and task subset (all, no leak, leak): each localization column's mean [95% CI]."""
    df = df.assign(leak=df["task_id"].map(leaks))
    if df["leak"].isna().any():
        raise SystemExit("rows of tasks that are not in the task file: wrong --tasks for --from?")
    subsets = [("all", df), ("no leak", df[~df["leak"].astype(bool)]), ("leak", df[df["leak"].astype(bool)])]
    table = []
    for arm in sorted(df["model_choice"].unique()):
        for label, part in subsets:
            rows = part[part["model_choice"] == arm]
            cells: dict[str, object] = {"floor": arm, "tasks on": label, "n": rows["task_id"].nunique()}
            for title, column in SHOWN:
                ci = mean_ci(rows, column)
                cells[title] = f"{ci.mean:.2f} [{ci.low:.2f}, {ci.high:.2f}]"
            table.append(cells)
    with pd.option_context("display.width", 250, "display.max_columns", 30):
        print(pd.DataFrame(table).to_string(index=False))
    for label, part in subsets:
        means = part.groupby("model_choice")[HEADLINE].mean()
        print(f"  strongest floor on {label} tasks by {HEADLINE}: {means.idxmax()} ({means.max():.3f})")
    ended = Counter(str(r) for r in df["terminal_reason"])
    print(f"  runs ended: {dict(ended)}; contract valid {df['contract_valid'].mean():.3f}")


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--tasks", default="mined-test2", help="a suite id or a task file")
    parser.add_argument("--scaffolds", default="aided,plain", help="presets the loop floors run under")
    parser.add_argument("--whole", type=int, default=4, help="units F0 cites whole (0: no F0)")
    add_save_from(parser, save="write the floors' rows to this CSV", source="print from a saved CSV, no runs")
    args = parser.parse_args()
    path = task_file(args.tasks)
    started = time.monotonic()
    leaks = describe(path)
    print(f"  (counts and gold warnings: {time.monotonic() - started:.1f} s)")
    if args.source:
        report(pd.read_csv(args.source), leaks)
        return 0
    started = time.monotonic()
    df = floor_rows(path, args.scaffolds.split(","), args.whole)
    print(f"floors: {len(df)} runs in {(time.monotonic() - started) / 60:.1f} min, no model, one process")
    save_rows(df, args.save)
    report(df, leaks)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
