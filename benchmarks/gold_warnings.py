"""Gold warnings of the committed mined suites (issue 48): what can be checked from the task files
and the sdists already fetched, with no git history.

    PYTHONPATH=$PWD .venv/bin/python benchmarks/gold_warnings.py [FILE ...]

Per suite file (default: subagent_lab/bench/tasks_mined_{dev,dev2,test,test2}.yaml), tasks with each warning
of ``bench.gold_warnings``: ``leak`` (the request names a gold unit), ``class-whole`` (a gold span
that is a whole class), ``long`` (a span over 300 lines); and, for tasks whose sdist tree is in
``<cache>/workspaces`` (``subagent-lab tasks FILE`` fetches them), ``unparsable`` (a gold file that
does not parse there) and ``absent-name`` (the request names an identifier the tree lacks; without
the history a name the commit itself introduces counts too, which the miner exempts).

Two checks need the histories (``bench.gold_history``): ``comment-only`` (a gold unit whose code,
comments and docstrings aside, the commit did not change) and ``sdist!=parent`` (a gold span whose
text in the sdist is not the parent's). With ``--mirrors DIR`` (bare clones at
``DIR/<owner>+<name>/repo``, as ``mine_suite.py`` reads them) they are counted; without, printed as
"needs history". ``no-narrowing`` counts the tasks ``bench.narrowing`` would drop (on the tree).

    PYTHONPATH=$PWD .venv/bin/python benchmarks/gold_warnings.py --before-after --mirrors /work/.mirror \
        [--remine-test]

prints the table of docs/benchmarks-mined.md, before and after the fixed miner on every mined
split: dev (before: tasks_mined_dev.yaml, after: tasks_mined_dev2.yaml), test (before:
tasks_mined_test.yaml, after: the same packages re-mined by ``mine_suite.py --split test`` into a
temporary file with ``--remine-test``, or the file ``--test-after`` names), test2 (after only: it
was mined with the fixed miner).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from collections import Counter
from pathlib import Path

import yaml

from subagent_lab.bench.gold_history import HISTORY_WARNINGS, History, history_warnings
from subagent_lab.bench.gold_warnings import (
    LONG_LINES,
    TASK_WARNINGS,
    TREE_WARNINGS,
    count_warnings,
    request_of,
)
from subagent_lab.bench.mine import is_source
from subagent_lab.bench.narrowing import TreeNames, dir_sources, narrowing_words
from subagent_lab.bench.suite import load_suite
from subagent_lab.bench.workspace_spec import SdistWorkspace
from subagent_lab.bench.workspaces import sdist_fetched, sdist_root

BENCH = Path(__file__).resolve().parent.parent / "subagent_lab" / "bench"
FILES = [BENCH / f"tasks_mined_{s}.yaml" for s in ("dev", "dev2", "test", "test2")]


def tree_of(task_workspace: object) -> Path | None:
    """The unpacked sdist tree of a task's workspace when it is in the cache, else None."""
    if not isinstance(task_workspace, SdistWorkspace):
        return None
    sdist = task_workspace.as_sdist()
    return sdist_root(sdist) if sdist_fetched(sdist) else None


def file_counts(path: Path, mirrors: Path | None) -> dict[str, str]:
    """Column -> cell for one task file (tree checks on fetched sdists, history checks with mirrors)."""
    raw = {t["id"]: t for t in yaml.safe_load(path.read_text(encoding="utf-8"))["tasks"]}
    tasks = [(raw[t.id], tree_of(t.workspace)) for t in load_suite(path)]
    counts = count_warnings(tasks)
    cells = {c: str(counts[c]) for c in ("tasks", "with-tree", *TASK_WARNINGS)}
    with_tree = counts["with-tree"]
    for column in TREE_WARNINGS:
        cells[column] = f"{counts[column]}/{with_tree}" if with_tree else "no sdists"
    names: dict[Path, TreeNames] = {}
    vague = 0
    for task, tree in tasks:
        if tree is not None:
            names.setdefault(tree, TreeNames(dir_sources(tree, is_source)))
            vague += not narrowing_words(request_of(task), names[tree])
    cells["no-narrowing"] = f"{vague}/{with_tree}" if with_tree else "no sdists"
    if mirrors is None:
        return cells | dict.fromkeys(HISTORY_WARNINGS, "needs history")
    histories: dict[str, History] = {}
    found: Counter[str] = Counter()
    read = 0
    for task, tree in tasks:
        repo = (
            mirrors / str(task["meta"]["repo"]).removeprefix("https://github.com/").replace("/", "+") / "repo"
        )
        if not repo.is_dir():
            continue
        read += 1
        history = histories.setdefault(str(repo), History(repo, is_source))
        found.update(history_warnings(task, tree, history))
    for column in HISTORY_WARNINGS:
        cells[column] = f"{found[column]}/{read}" if read else "no history"
    return cells


COLUMNS = ["tasks", "with-tree", *TASK_WARNINGS, *TREE_WARNINGS, *HISTORY_WARNINGS, "no-narrowing"]


def remined_test(mirrors: Path, downloads: Path, out: Path) -> Path:
    """The test split's packages re-mined with the current miner into ``out`` (not the package)."""
    import mine_suite  # the sibling script

    mine_suite.main(["--split", "test", "--mirrors", str(mirrors), "--downloads", str(downloads),
                     "--write", "--out", str(out)])  # fmt: skip
    return out / "tasks_mined_test.yaml"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("files", nargs="*", default=[str(f) for f in FILES], help="task files")
    parser.add_argument("--mirrors", default=None, help="bare clones, <owner>+<name>/repo: history checks")
    parser.add_argument("--before-after", action="store_true", help="the before/after table of every split")
    parser.add_argument("--remine-test", action="store_true", help="re-mine the test split (temporary file)")
    parser.add_argument("--test-after", default=None, help="a re-mined test file (instead of --remine-test)")
    parser.add_argument("--downloads", default="/tmp/mined-sdists", help="sdist cache for --remine-test")
    args = parser.parse_args(argv)
    mirrors = Path(args.mirrors) if args.mirrors else None
    print(f"gold warnings (tasks; long = a span over {LONG_LINES} lines; tree checks on fetched sdists only)")
    if not args.before_after:
        print(f"{'file':28} " + " ".join(f"{c:>14}" for c in COLUMNS))
        for name in args.files:
            cells = file_counts(Path(name), mirrors)
            print(f"{Path(name).name:28} " + " ".join(f"{cells[c]:>14}" for c in COLUMNS))
        return 0
    with tempfile.TemporaryDirectory() as work:
        test_after: Path | None = Path(args.test_after) if args.test_after else None
        if test_after is None and args.remine_test and mirrors is not None:
            test_after = remined_test(mirrors, Path(args.downloads), Path(work))
        rows: list[tuple[str, str, Path | None]] = [
            ("dev", "before", BENCH / "tasks_mined_dev.yaml"),
            ("dev", "after", BENCH / "tasks_mined_dev2.yaml"),
            ("test", "before", BENCH / "tasks_mined_test.yaml"),
            ("test", "after", test_after),
            ("test2", "after", BENCH / "tasks_mined_test2.yaml"),
        ]
        print("| split | miner | file | " + " | ".join(COLUMNS) + " |")
        print("|---|---|---|" + "---:|" * len(COLUMNS))
        for split, when, path in rows:
            if path is None:
                print(f"| {split} | {when} | (not re-mined: --remine-test) |" + " |" * len(COLUMNS))
                continue
            cells = file_counts(path, mirrors)
            label = path.name if path.parent == BENCH else f"{path.name} (re-mined, temporary)"
            print(f"| {split} | {when} | {label} | " + " | ".join(cells[c] for c in COLUMNS) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
