"""Gold warnings of mined tasks, read from a task file's tasks (and, where given, their trees).

From the task alone: ``leak`` (the request names a gold unit, ``meta.names_gold_symbol``),
``class-whole`` (a gold span that is a whole class: its anchor is ``class Name``; the miner now
makes a class gold only through its changed statements, or whole when the commit removed it),
``long`` (a gold span over ``LONG_LINES`` lines). With the task's workspace tree: ``unparsable``
(a gold file that does not parse there) and ``absent-name`` (the request names an identifier,
``commit_text.code_names``, that is nowhere in the tree). What needs the history (a unit whose
only change was a comment; a tree that is not the commit's parent) the miner filters while mining
and counts in its summary; it cannot be read back from a task file.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from subagent_lab.bench.commit_text import code_names
from subagent_lab.bench.units import parse_units

LONG_LINES = 300
TASK_WARNINGS = ("leak", "class-whole", "long")
TREE_WARNINGS = ("unparsable", "absent-name")
_WHOLE_CLASS = re.compile(r"class [A-Za-z_]\w*")


def request_of(task: Mapping[str, Any]) -> str:
    """The request inside a mined prompt's «...» (the whole prompt when there is none)."""
    prompt = str(task.get("prompt", ""))
    match = re.search(r"«(.*)»", prompt, re.S)
    return match.group(1) if match else prompt


def task_warnings(
    task: Mapping[str, Any], tree: Path | None = None, words: TreeWords | None = None
) -> list[str]:
    """The warnings of one task (a task file's mapping); the tree ones only with ``tree``."""
    found = []
    gold = list(task.get("gold") or [])
    if (task.get("meta") or {}).get("names_gold_symbol"):
        found.append("leak")
    if any(_WHOLE_CLASS.fullmatch(str(g.get("anchor") or "")) for g in gold):
        found.append("class-whole")
    if any(int(g["end"]) - int(g["start"]) + 1 > LONG_LINES for g in gold):
        found.append("long")
    if tree is not None:
        paths = sorted({str(g["path"]) for g in gold})
        if any(parse_units(_read(tree / p)) is None for p in paths):
            found.append("unparsable")
        words = words or TreeWords(tree)
        if any(not words.has(name) for name in code_names(request_of(task))):
            found.append("absent-name")
    return found


def count_warnings(tasks: Iterable[tuple[Mapping[str, Any], Path | None]]) -> Counter[str]:
    """Tasks per warning (and ``tasks``, ``with-tree``: tasks read, tasks whose tree was there)."""
    counts: Counter[str] = Counter()
    words: dict[Path, TreeWords] = {}
    for task, tree in tasks:
        counts["tasks"] += 1
        if tree is not None:
            counts["with-tree"] += 1
            words.setdefault(tree, TreeWords(tree))
        counts.update(task_warnings(task, tree, words.get(tree) if tree is not None else None))
    return counts


class TreeWords:
    """Whole-word search over every file of a tree (read once, on the first question)."""

    def __init__(self, tree: Path) -> None:
        self.tree = tree
        self._text: str | None = None

    def has(self, word: str) -> bool:
        """Whether ``word`` occurs as a whole word in any file under the tree."""
        if self._text is None:
            files = sorted(p for p in self.tree.rglob("*") if p.is_file() and not p.is_symlink())
            self._text = "\n".join(_read(p) for p in files)
        return re.search(rf"(?<!\w){re.escape(word)}(?!\w)", self._text) is not None


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""
