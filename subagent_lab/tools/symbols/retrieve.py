"""The retrieval a task gets before any model acts, written once: Find on the request's code-like
names, then Search on the request; the units in that order, each cited by its header line.

The request is the task without a harness template around it (``query.request_of``): searching the
template's words too pulled the ranking towards code that says "function", "class" and "change"
(audit-validity turn 5 §6).

This is the floor issue 37 asks the explore child never to start below (audit-validity turn 4, Q2:
F2). Pure: the same task and index give the same units. ``scaffold/retrieval_start.py`` runs the
same lookups as tool calls before the model's first action and offers these units as the answer's
candidates; a no-model floor can cite them as given.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from subagent_lab.tools.symbols.index import SymbolIndex, is_name, symbol_name
from subagent_lab.tools.symbols.parse import Definition
from subagent_lab.tools.symbols.query import request_of
from subagent_lab.tools.symbols.search import ranked_units

MAX_NAMES = 3
"""The task's code-like names looked up at most (a turn runs at most four calls: three Finds and
one Search)."""
PER_NAME = 2
"""Definitions of one name taken at most (``__init__`` or ``get`` has dozens), library first."""
SHOWN = 8
"""Units Find and Search show per call (``symbol_tools``' ``limit``): a unit past it is never
taken, so every unit ``retrieve`` returns is one those calls show."""
SUMMARY_UNITS = 8
"""Units an answer's summary names at most (before its length cap): ``names_by_file``."""
MAX_QUERY_CHARS = 1000
"""Characters of the task ranked (as ``Search`` cuts its query)."""
CODE_NAMES = (
    re.compile(r"`([^`\s]{2,200})`"),  # written as code
    re.compile(r"\b([A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+)\b"),  # dotted
    re.compile(r"\b([a-z]\w*_\w+)\b"),  # snake_case
    re.compile(r"\b([A-Z][a-z0-9]+[A-Z]\w*)\b"),  # CamelCase
)
"""What makes a word of the task a name: how it is written, never a word list."""


@dataclass(frozen=True)
class RetrievedUnit:
    """One unit the retrieval ranks: lines ``unit.start``-``unit.end`` of ``rel``."""

    rel: str
    unit: Definition
    via: Literal["find", "search"]
    """Found by a name of the task (``find``) or ranked for its text (``search``)."""

    @property
    def item(self) -> str:
        """``path:line`` of the unit's header line: the evidence item a candidate is cited as (a
        whole unit is wider than any strict hit allows)."""
        return f"{self.rel}:{self.unit.start}"

    @property
    def label(self) -> str:
        """``path:start-end``, the unit whole."""
        return f"{self.rel}:{self.unit.start}-{self.unit.end}"


def code_names(task_text: str, limit: int = MAX_NAMES * 4) -> list[str]:
    """The task's code-like names, at most ``limit``: those in backticks first, then dotted,
    snake_case and CamelCase words in the order the task writes them; each once, as Find takes it."""
    names: dict[str, None] = {}
    quoted = [symbol_name(m.group(1)) for m in CODE_NAMES[0].finditer(task_text)]
    # A quoted name's parts are no names of their own (`Environment.get_template`, not get_template).
    rest = CODE_NAMES[0].sub(lambda m: " " * len(m.group(0)), task_text)
    spelled = sorted(
        (m.start(), m.group(1).strip(".")) for pattern in CODE_NAMES[1:] for m in pattern.finditer(rest)
    )
    for name in [*quoted, *(name for _, name in spelled)]:
        if name and is_name(name):
            names.setdefault(name, None)
    return list(names)[:limit]


def found_names(task_text: str, index: SymbolIndex, limit: int = MAX_NAMES) -> list[str]:
    """The request's code-like names the index defines, at most ``limit``: the ones worth a Find."""
    return [name for name in code_names(request_of(task_text)) if index.find(name)[0]][:limit]


def search_query(task_text: str) -> str:
    """What the retrieval's Search ranks for: the request (``query.request_of``), cut to
    ``MAX_QUERY_CHARS``."""
    return request_of(task_text)[:MAX_QUERY_CHARS]


def retrieve(
    task_text: str,
    index: SymbolIndex,
    k: int,
    *,
    per_name: int = PER_NAME,
    shown: int = SHOWN,
    request: str | None = None,
) -> list[RetrievedUnit]:
    """The task's best ``k`` units: the definitions of its request's code-like names
    (``found_names``, each name's first ``per_name`` as Find lists them), then the units Search
    ranks for the request (``search_query``), each unit once, in that order. Only units among the
    first ``shown`` a Find or Search call lists. ``request``: the text searched instead of the
    task's request (a benchmark's other query; ``benchmarks/bench_pool.py``)."""
    text = search_query(task_text) if request is None else request[:MAX_QUERY_CHARS]
    units: dict[tuple[str, int], RetrievedUnit] = {}
    for name in found_names(text, index):
        for rel, unit in index.find(name)[0][: min(per_name, shown)]:
            units.setdefault((rel, unit.start), RetrievedUnit(rel, unit, "find"))
    for hit in ranked_units(index, text, shown):
        units.setdefault((hit.rel, hit.unit.start), RetrievedUnit(hit.rel, hit.unit, "search"))
    return list(units.values())[: max(k, 0)]


def names_by_file(named: Sequence[tuple[str, str]], cap: int) -> str:
    """``(path, name)`` pairs as an answer's summary: the names grouped by file in the order first
    given (``a, B.c in x.py; d in y.py``), of the first ``SUMMARY_UNITS`` pairs as many as fit in
    ``cap`` characters; "" when not even the first does."""
    by_file: dict[str, list[str]] = {}
    text = ""
    for path, name in named[:SUMMARY_UNITS]:
        names = by_file.setdefault(path, [])
        if name not in names:
            names.append(name)
        candidate = "; ".join(f"{', '.join(n)} in {f}" for f, n in by_file.items())
        if len(candidate) > cap:
            break
        text = candidate
    return text
