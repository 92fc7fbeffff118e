"""Citation ranking: which of the lines a run's tools showed answer its task best.

The explore child's final prompt lists the citable lines in this order, each with its text; small
models cite the first locations in front of them.
"""

from __future__ import annotations

import functools
import io
import os
import re
from pathlib import Path
from typing import Any

from subagent_lab.core.contracts import parse_evidence
from subagent_lab.core.tool import ToolError

WORD = re.compile(r"[A-Za-z][A-Za-z0-9]+")
STOPWORDS = frozenset(
    [
        "the",
        "and",
        "for",
        "that",
        "this",
        "with",
        "from",
        "what",
        "where",
        "which",
        "how",
        "does",
        "find",
        "list",
        "all",
        "each",
        "defined",
        "define",
        "module",
        "code",
        "function",
        "functions",
        "class",
        "classes",
        "method",
        "methods",
        "file",
        "files",
        "when",
        "into",
        "its",
        "there",
        "say",
        "such",
        "has",
        "have",
        "not",
        "none",
        "are",
        "can",
        "will",
        "would",
        "should",
        "then",
        "than",
        "them",
        "they",
        "their",
        "used",
        "uses",
        "use",
        "using",
        "calls",
        "called",
        "call",
        "implement",
        "implements",
        "implemented",
        "explain",
        "differs",
        "default",
    ]
)
LINE_TEXT_CHARS = 70
"""Longest line text shown beside a listed location (longer is cut with an ellipsis)."""


@functools.lru_cache(maxsize=4096)
def _terms(text: str) -> frozenset[str]:
    """The lower-case words of ``text``, identifiers also split at ``_`` and case changes (kept per
    text: a sweep's repeats rank the same lines and the same task again)."""
    words = set()
    for token in re.findall(r"[A-Za-z_][A-Za-z0-9_]*", text):
        words.add(token.lower())
        words.update(
            w.lower()
            for part in token.split("_")
            for w in WORD.findall(re.sub(r"([a-z0-9])([A-Z])", r"\1 \2", part))
        )
    words |= {w[:-1] for w in words if len(w) > 4 and w.endswith("s")}  # "loaders" finds "Loader"
    return frozenset(w for w in words if len(w) >= 3 and w not in STOPWORDS)


def line_texts(items: list[str], root: Path) -> dict[str, str]:
    """The text of each ``path:line`` item under ``root`` (missing, unreadable or refused: no entry).

    Each file is opened the way Read opens it (``Workspace.open_file``: resolved by descriptor,
    links outside, secrets, hard links, FIFOs and devices refused before anything blocks) and
    read from that descriptor, at most ``LISTING_SCAN_BYTES`` of it: a directory swapped for a
    link, or a FIFO put where a cited file was, shows nothing (issue 39).
    """
    from subagent_lab.workspace.sandbox import Workspace  # the scaffold reads through the sandbox

    wanted: dict[str, set[int]] = {}
    for item in items:
        parsed = parse_evidence(item)
        if parsed is not None:
            wanted.setdefault(parsed[0], set()).add(parsed[1])
    texts: dict[str, str] = {}
    ws = Workspace(root) if wanted else None
    for rel, numbers in wanted.items():
        assert ws is not None
        last = max(numbers)
        try:
            fd, _, _ = ws.open_file(rel)
        except (ToolError, OSError):
            continue
        try:
            os.set_blocking(fd, True)
            with os.fdopen(fd, "rb", closefd=False) as raw:
                limited = io.TextIOWrapper(
                    io.BufferedReader(_Capped(raw, LISTING_SCAN_BYTES)), encoding="utf-8", errors="replace"
                )
                for number, text in enumerate(limited, start=1):
                    if number in numbers:
                        texts[f"{rel}:{number}"] = text.strip()
                    if number >= last:
                        break
        except (OSError, ValueError):
            continue
        finally:
            os.close(fd)
    return texts


LISTING_SCAN_BYTES = 64 * 1024 * 1024
"""Bytes of one cited file read at most for its lines (Read's own scan limit)."""


class _Capped(io.RawIOBase):
    """A raw reader that ends after ``limit`` bytes of ``inner``."""

    def __init__(self, inner: Any, limit: int) -> None:
        self._inner, self._left = inner, limit

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        if self._left <= 0:
            return 0
        view = memoryview(buffer)[: self._left]
        count = self._inner.readinto(view)
        self._left -= count or 0
        return count or 0


DEFINITION_LINE = re.compile(
    r"^\s*(?:async\s+def|def|class)\s+(?P<def>[A-Za-z_]\w*)|^(?P<var>[A-Za-z_]\w*)\s*(?::[^=]*)?=(?!=)"
)
"""A line that defines a name: ``def``/``class``, or a module-level assignment (``TESTS = {``)."""
DEFINITION_BONUS = 2
"""Added to a definition line that holds a task word: it is what a locate task asks for, and it
outranks a docstring that repeats more of the task's words."""
NAME_BONUS = 3
"""Added to a definition of a name the task spells out (``def get_template(`` for a task about
``Environment.get_template``): the line a person would cite first."""
KIND_BONUS = 1
"""Added to a ``class`` line when the task speaks of classes, to a ``def`` when it speaks of
functions or methods."""
CLASS_WORDS = frozenset({"class", "classes", "subclass", "subclasses", "exception", "exceptions"})
FUNCTION_WORDS = frozenset({"function", "functions", "method", "methods", "helper", "helpers"})


def citable_scores(items: list[str], texts: dict[str, str], task: str) -> dict[str, int]:
    """How well each item's line answers ``task``: the task words it holds, plus the bonuses of a
    definition holding one (``DEFINITION_BONUS``, ``NAME_BONUS``, ``KIND_BONUS``).

    The words are not weighted by rarity: every Grep match holds the searched word, which would
    then count least exactly where it matters.
    """
    wanted = _terms(task)
    spelled = {t.lower() for t in re.findall(r"[A-Za-z_][A-Za-z0-9_]*", task) if len(t) >= 3}
    said = {w.lower() for w in re.findall(r"[A-Za-z]+", task)}
    classes, functions = bool(said & CLASS_WORDS), bool(said & FUNCTION_WORDS)
    scores: dict[str, int] = {}
    for item in items:
        text = texts.get(item, "")
        score = len(_terms(text) & wanted)
        found = DEFINITION_LINE.match(text)
        if found and score:
            name, is_def = (found.group("def"), True) if found.group("def") else (found.group("var"), False)
            is_class = is_def and text.lstrip().startswith("class")
            score += DEFINITION_BONUS + (NAME_BONUS if name.lower() in spelled else 0)
            score += KIND_BONUS if (is_class and classes) or (is_def and not is_class and functions) else 0
        scores[item] = score
    return scores


def rank_citable(items: list[str], texts: dict[str, str], task: str, margin: int | None = None) -> list[str]:
    """``items`` by ``citable_scores``, best first, ties kept in their order; with ``margin``, only
    those scoring within ``margin`` of the best (and holding a task word), the best one always.

    The margin is what keeps a small model precise: it fills every evidence slot it is given
    with the lines listed first, so lines far below the best answer take slots from nothing.
    """
    scores = citable_scores(items, texts, task)
    ranked = sorted(items, key=lambda item: -scores[item])
    if margin is None or not ranked:
        return ranked
    floor = max(1, scores[ranked[0]] - margin)
    return [item for item in ranked if scores[item] >= floor] or ranked[:1]


def listed_location(item: str, texts: dict[str, str]) -> str:
    """``path:line`` with its line's text beside it, cut to ``LINE_TEXT_CHARS``."""
    text = texts.get(item, "")
    if len(text) > LINE_TEXT_CHARS:
        text = text[: LINE_TEXT_CHARS - 1] + "…"
    return f"{item}  {text}" if text else item
