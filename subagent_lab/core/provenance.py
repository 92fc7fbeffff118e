"""Evidence provenance: was an evidence item shown to the child, and which items may the grammar offer.

``grounded`` (see ``contracts.ground_evidence``) says a cited file and lines exist; ``seen`` says a
tool of this run showed them to the model: a Grep match line, or lines inside a Read window.
"""

from __future__ import annotations

import copy
import re
from pathlib import Path
from typing import Any

from subagent_lab.core.contracts import parse_evidence
from subagent_lab.core.types import Span

MAX_EVIDENCE_CHOICES = 400
"""The newest seen lines offered to constrained decoding (a grammar alternation per item)."""


def seen_check(items: list[str], seen: list[Span]) -> tuple[float | None, list[str]]:
    """(share of items inside a seen span, the items that are not); (None, []) for no items."""
    if not items:
        return None, []
    unseen = []
    for item in items:
        parsed = parse_evidence(item)
        if parsed is None or not any(span.covers(*parsed) for span in seen):
            unseen.append(item)
    return 1 - len(unseen) / len(items), unseen


def evidence_choices(seen: list[Span], limit: int = MAX_EVIDENCE_CHOICES) -> list[str]:
    """Every ``path:line`` a tool has shown, newest last, at most ``limit`` (the newest)."""
    items: dict[str, None] = {}
    for span in seen:
        if span.start >= 1:
            for line in range(span.start, span.end + 1):
                items.pop(f"{span.path}:{line}", None)
                items[f"{span.path}:{line}"] = None
    return list(items)[-limit:]


def citable(groups: list[list[Span]], limit: int = MAX_EVIDENCE_CHOICES) -> list[str]:
    """The ``path:line`` items worth citing, newest observation first: the single-line spans the
    tools marked (Grep matches, a Read's asked line and the definitions it showed, outline
    entries), at most ``limit``; every seen line (``evidence_choices``) when no tool marked one.

    Offered as the final answer's evidence, they keep a small model from citing a whole window
    line by line: the lines it is shown in the prompt are the ones a person would cite.
    """
    items: dict[str, None] = {}
    for group in reversed(groups):
        for span in group:
            if span.start >= 1 and span.start == span.end:
                items.setdefault(f"{span.path}:{span.start}", None)
    if not items:
        return evidence_choices([s for g in groups for s in g], limit)
    return list(items)[:limit]


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


def _terms(text: str) -> set[str]:
    """The lower-case words of ``text``, identifiers also split at ``_`` and case changes."""
    words = set()
    for token in re.findall(r"[A-Za-z_][A-Za-z0-9_]*", text):
        words.add(token.lower())
        words.update(
            w.lower()
            for part in token.split("_")
            for w in WORD.findall(re.sub(r"([a-z0-9])([A-Z])", r"\1 \2", part))
        )
    words |= {w[:-1] for w in words if len(w) > 4 and w.endswith("s")}  # "loaders" finds "Loader"
    return {w for w in words if len(w) >= 3 and w not in STOPWORDS}


def line_texts(items: list[str], root: Path) -> dict[str, str]:
    """The text of each ``path:line`` item under ``root`` (missing or unreadable: no entry)."""
    wanted: dict[str, set[int]] = {}
    for item in items:
        parsed = parse_evidence(item)
        if parsed is not None:
            wanted.setdefault(parsed[0], set()).add(parsed[1])
    texts: dict[str, str] = {}
    for rel, numbers in wanted.items():
        last = max(numbers)
        try:
            with open(root / rel, encoding="utf-8", errors="replace") as fh:
                for number, text in enumerate(fh, start=1):
                    if number in numbers:
                        texts[f"{rel}:{number}"] = text.strip()
                    if number >= last:
                        break
        except OSError:
            continue
    return texts


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


def constrain_evidence(
    schema: dict[str, Any], choices: list[str], min_items: int = 0, max_items: int | None = None
) -> dict[str, Any]:
    """A copy of a contract schema whose ``evidence`` items can only be ``choices`` (none if empty),
    at least ``min_items`` of them (as many as there are, if fewer) and at most ``max_items``.

    ``evidence`` also moves up to follow ``status``/``verdict``: decoding writes properties in
    schema order, and a small model that has written its findings first tends to leave the
    evidence empty; right after the locations listed in the prompt, it cites them.
    """
    out = copy.deepcopy(schema)
    props = out.get("properties", {})
    evidence = props.get("evidence")
    if evidence is None:
        return out
    lead = [k for k in ("status", "verdict") if k in props]
    order = [*lead, "evidence", *(k for k in props if k not in (*lead, "evidence"))]
    out["properties"] = {k: props[k] for k in order}
    # Required, so the grammar cannot skip it (an optional property may be left out entirely).
    out["required"] = [k for k in order if k in {*out.get("required", []), "evidence"}]
    if choices:
        evidence["items"] = {"type": "string", "enum": choices}
        if min_items:
            evidence["minItems"] = min(min_items, len(choices))
        if max_items is not None:
            # No more slots than choices: a grammar cannot ask for unique items, and a small
            # model fills every slot, so extra slots would only repeat a location.
            evidence["maxItems"] = max(min(max_items, len(choices)), evidence.get("minItems", 0))
    else:
        evidence["items"] = {"type": "string"}
        evidence["maxItems"] = 0
    return out


def bounded_answer(schema: dict[str, Any], max_tokens: int) -> dict[str, Any]:
    """A copy of a contract schema whose strings and lists fit in ``max_tokens`` output tokens.

    A final answer cut at its output cap is unterminated JSON, and a repair costs a whole call:
    the grammar instead keeps top-level strings to ~1/9 and list items to ~1/24 of the cap
    (at ~3 characters a token), and lists to 4 items, so a complete answer fits. Short answers are
    also fast ones: on a CPU every output token of the answer is ~0.1 s of a run's wall time.
    """
    out = copy.deepcopy(schema)
    text, item, items = max(max_tokens // 3, 40), max(max_tokens // 8, 20), 4
    for prop in out.get("properties", {}).values():
        if prop.get("type") == "string" and "enum" not in prop:
            prop["maxLength"] = min(prop.get("maxLength", text), text)
        elif prop.get("type") == "array":
            prop["maxItems"] = min(prop.get("maxItems", items), items)
            sub = prop.get("items", {})
            if sub.get("type") == "string" and "enum" not in sub:
                cap = 80 if "pattern" in sub else item  # a patterned item is a location, path:line
                sub["maxLength"] = min(sub.get("maxLength", cap), cap)
    return out
