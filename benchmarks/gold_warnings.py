"""Gold warnings of the committed mined suites (issue 48): what can be checked from the task files
and the sdists already fetched, with no git history.

    PYTHONPATH=$PWD .venv/bin/python benchmarks/gold_warnings.py [FILE ...]

Per suite file (default: subagent_lab/bench/tasks_mined_{dev,test,test2}.yaml), tasks with each warning
of ``bench.gold_warnings``: ``leak`` (the request names a gold unit), ``class-whole`` (a gold span
that is a whole class), ``long`` (a span over 300 lines); and, for tasks whose sdist tree is in
``<cache>/workspaces`` (``subagent-lab tasks FILE`` fetches them), ``unparsable`` (a gold file that
does not parse there) and ``absent-name`` (the request names an identifier the tree lacks; without
the history a name the commit itself introduces counts too, which the miner exempts).

Two checks need the histories and are printed as such: a gold unit whose only change is a comment,
a ``# type: ignore`` or a docstring, and an sdist whose gold code is not the parent's. The miner
applies both while mining (they are filters now), so "after" figures need a re-mining, which needs
the git histories (not reachable offline): ``benchmarks/mine_suite.py`` prints them with its
per-filter table.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import yaml

from subagent_lab.bench.gold_warnings import LONG_LINES, TASK_WARNINGS, TREE_WARNINGS, count_warnings
from subagent_lab.bench.suite import load_suite
from subagent_lab.bench.workspace_spec import SdistWorkspace
from subagent_lab.bench.workspaces import sdist_fetched, sdist_root

BENCH = Path(__file__).resolve().parent.parent / "subagent_lab" / "bench"
FILES = [BENCH / "tasks_mined_dev.yaml", BENCH / "tasks_mined_test.yaml", BENCH / "tasks_mined_test2.yaml"]
HISTORY_ONLY = ("comment-only", "sdist!=parent")


def tree_of(task_workspace: object) -> Path | None:
    """The unpacked sdist tree of a task's workspace when it is in the cache, else None."""
    if not isinstance(task_workspace, SdistWorkspace):
        return None
    sdist = task_workspace.as_sdist()
    return sdist_root(sdist) if sdist_fetched(sdist) else None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("files", nargs="*", default=[str(f) for f in FILES], help="task files")
    args = parser.parse_args(argv)
    columns = ["tasks", "with-tree", *TASK_WARNINGS, *TREE_WARNINGS, *HISTORY_ONLY]
    print(f"gold warnings (tasks; long = a span over {LONG_LINES} lines; tree checks on fetched sdists only)")
    print(f"{'file':28} " + " ".join(f"{c:>14}" for c in columns))
    for name in args.files:
        path = Path(name)
        raw = {t["id"]: t for t in yaml.safe_load(path.read_text(encoding="utf-8"))["tasks"]}
        tasks = load_suite(path)
        counts = count_warnings((raw[t.id], tree_of(t.workspace)) for t in tasks)
        cells = [str(counts[c]) for c in columns[: 2 + len(TASK_WARNINGS)]]
        with_tree = counts["with-tree"]
        cells += [f"{counts[c]}/{with_tree}" if with_tree else "no sdists" for c in TREE_WARNINGS]
        cells += ["needs history"] * len(HISTORY_ONLY)
        print(f"{path.name:28} " + " ".join(f"{c:>14}" for c in cells))
    print("'after' needs re-mining from the git histories (benchmarks/mine_suite.py), not done offline.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
