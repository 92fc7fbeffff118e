"""Which tasks of the mined suites the ``no-narrowing-word`` rule (issue 48, ``bench.narrowing``)
would drop, read from the task files and their fetched sdist trees (no history needed).

    PYTHONPATH=$PWD .venv/bin/python benchmarks/narrowing_drops.py [FILE ...]

Default files: tasks_mined_test.yaml and tasks_mined_test2.yaml (both frozen: nothing is rewritten,
the drops are only printed). The tree's definitions are read from the task's sdist tree (the miner
reads the commit parent's, which is what ``sdist-differs`` keeps equal on the gold units). Prints
one line per dropped task: its id, the request and, with ``--all``, the narrowing tokens of every
kept task.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import yaml

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))  # the sibling gold_warnings script: tree_of

from gold_warnings import BENCH, tree_of  # noqa: E402

from subagent_lab.bench.gold_warnings import request_of  # noqa: E402
from subagent_lab.bench.mine import is_source  # noqa: E402
from subagent_lab.bench.narrowing import TreeNames, dir_sources, narrowing_words  # noqa: E402
from subagent_lab.bench.suite import load_suite  # noqa: E402

FILES = [BENCH / "tasks_mined_test.yaml", BENCH / "tasks_mined_test2.yaml"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("files", nargs="*", default=[str(f) for f in FILES], help="task files")
    parser.add_argument("--all", action="store_true", help="also print each kept task's narrowing tokens")
    args = parser.parse_args(argv)
    for name in args.files:
        path = Path(name)
        raw = {t["id"]: t for t in yaml.safe_load(path.read_text(encoding="utf-8"))["tasks"]}
        names: dict[Path, TreeNames] = {}
        dropped, missing, total = [], 0, 0
        for task in load_suite(path):
            total += 1
            tree = tree_of(task.workspace)
            if tree is None:
                missing += 1
                continue
            if tree not in names:
                names[tree] = TreeNames(dir_sources(tree, is_source))
            request = request_of(raw[task.id])
            words = narrowing_words(request, names[tree])
            if not words:
                dropped.append(task.id)
                print(f"  DROP {task.id:32} «{request}»")
            elif args.all:
                print(f"  keep {task.id:32} {words}  «{request}»")
        print(f"{path.name}: {len(dropped)} of {total} tasks have no narrowing word"
              + (f" ({missing} without a fetched sdist, not read)" if missing else ""))  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
