"""The task's words worth a first search, ranked by what the workspace holds (``first_search``).

Left to itself, a small model's first action is a Glob (``**/*.py``), the task's whole sentence as a
Grep pattern or the package's own name, and such runs end with nothing to cite (docs/design.md,
``light-tuned``). Offered only the task's names that the workspace defines or mentions, best first,
its first search finds the code. The ranking uses the task text and the workspace only (never a
task's gold).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from subagent_lab.core.tool import ToolError
from subagent_lab.tools.glob import find_paths
from subagent_lab.tools.rg.search import search
from subagent_lab.tools.simple_grep import STOPWORDS, definition_strength, dotted_names
from subagent_lab.workspace.sandbox import Workspace

MAX_CANDIDATES = 12
"""Names of a task looked up in the workspace at most (one bounded search each)."""
MAX_TASK_CHARS = 20_000
"""Characters of the task read for names: the picker costs the same for any longer task."""
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,199}")
COMMON_SHARE = 0.5
"""A name in more than this share of the workspace's files is a poor first search."""
TASK_WORDS = frozenset({
    "about", "after", "also", "answer", "before", "between", "call", "called", "calls", "can",
    "each", "explain", "happens", "has", "have", "its", "list", "lists", "name", "names", "run",
    "runs", "such", "than", "that", "their", "them", "then", "there", "they", "trace", "until",
    "used", "uses", "using", "when", "whether", "why", "will", "would", "you", "your",
})  # fmt: skip
"""Words of how tasks are phrased ("trace what happens when ..."), not of the code."""


@dataclass(frozen=True)
class Candidate:
    """One name of the task and what the workspace says about it."""

    word: str
    order: int
    marked: bool
    """Written as code in the task (in backticks, dotted, snake_case or CamelCase)."""
    files: int
    defines: int
    """2: a line defines exactly this name; 1: a line defines a name containing it; 0: neither."""
    names_file: bool
    """A file is named after it (``monitor`` and ``_monitor.py``, ``filter`` and ``filters.py``)."""

    def score(self, total_files: int) -> int:
        # A name the task writes as code is meant (``Environment.compile``) however common it is.
        common = not self.marked and total_files > 0 and self.files / total_files > COMMON_SHARE
        exact, partial = self.defines == 2, self.defines == 1
        return 3 * exact + partial + 3 * self.marked + 2 * self.names_file - 3 * common


def _candidates(task: str, own_name: str, limit: int = MAX_CANDIDATES) -> list[tuple[str, bool]]:
    """(word, marked) for the first ``limit`` distinct names of the task, in task order.

    Linear in the task and bounded: only the first ``MAX_TASK_CHARS`` characters are read (a
    pasted log adds nothing a first search needs), each word costs set look-ups, and collection
    stops once ``limit`` names are in (only that many are looked up).
    """
    task = task[:MAX_TASK_CHARS]
    quoted = {w for span in re.findall(r"`([^`]{1,500})`", task) for w in _WORD.findall(span)}
    found: dict[str, tuple[str, bool]] = {}
    dotted_parts: set[str] = set()
    for dotted in dotted_names(task):
        if len(found) >= limit:
            return list(found.values())
        member = dotted.rsplit(".", 1)[-1]
        if len(member) >= 3 and member.lower() not in STOPWORDS:
            key = dotted.lower()
            if key not in found:
                found[key] = (dotted, True)
                dotted_parts.update(key.split("."))
    for word in _WORD.findall(task):
        if len(found) >= limit:
            break
        key = word.lower()
        low = key.strip("_")
        if len(low) < 3 or key in STOPWORDS or key in TASK_WORDS or key in found:
            continue
        if own_name and (key in own_name or (own_name in key and len(key) - len(own_name) <= 2)):
            continue  # the package's own name (``tqdm``, ``PyYAML`` in yaml) is in every file
        if key in dotted_parts:
            continue  # already a part of a dotted name
        compound = "_" in word.strip("_") or bool(re.search(r"[A-Z0-9]", word[1:]))
        found[key] = (word, compound or word in quoted)
    return list(found.values())


def task_search_words(ws: Workspace, task: str, limit: int) -> list[str]:
    """At most ``limit`` names from ``task`` for a first Grep, best first: names the task writes as
    code and names the workspace defines rank first, names in most files last; names no file
    holds are left out (an empty list when none is held)."""
    if limit < 1:
        return []
    own = ws.root.name.lower()
    files = [p for p in find_paths(ws, "**/*").paths if not p.endswith("/")]
    stems = {p.rsplit("/", 1)[-1].split(".", 1)[0].strip("_").lower() for p in files}
    ranked: list[Candidate] = []
    for order, (word, marked) in enumerate(_candidates(task, own)):
        looked_up = word.rsplit(".", 1)[-1]
        try:
            run = search(ws, [looked_up], ".", case_insensitive=True, fixed_strings=True, max_results=500)
        except ToolError:  # a search that cannot run ranks nothing; the first action is then free
            continue
        if not run.files:
            continue
        defines = max((definition_strength(h.text, (looked_up,)) for h in run.hits if h.is_match), default=0)
        key = looked_up.lower()
        named = key in stems or key + "s" in stems
        ranked.append(Candidate(word, order, marked, len(run.files), defines, named))
    ranked.sort(key=lambda c: (-c.score(len(files)), c.files, c.order))
    return [c.word for c in ranked[:limit]]
