"""The scorer's text rules: which keywords count, and whether an answer admits absence in its own words.

Both rules refuse credit for wording the answer could copy: the task's prompt and every text the
harness wrote to the model (its prompts, the final prompt's listing of candidate lines with their
text). No rule names a task's own nouns.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from functools import cache, lru_cache

from subagent_lab.bench.suite import BenchTask
from subagent_lab.core import prompts

SHARED_NGRAM = 4
"""A run of this many words of an answer that also occurs in the task or a harness text is not the
answer's own wording (``own_words``). Four: "has no such loader" is a copy, "jinja2 has no HTTP
loader" is not, though it shares three words with "If jinja2 has no such loader, say so"."""

ABSENCE_PATTERNS: tuple[str, ...] = (
    r"\bnot (?:be )?found\b",
    r"\bno such\b",
    r"\b(?:does|do)(?: not|n't) [a-z]+\b",
    r"\b(?:is|are)(?: not|n't) (?:present|there|supported|implemented|available|included|provided)\b",
    r"\bnot (?:present|exist|supported|implemented|available|included|provided)\b",
    r"\b(?:has|have|contains?|provides?|offers?|includes?|implements?|supports?|ships?) no\b",
    r"\babsent\b",
    r"\bthere (?:is|are|was|were) no\b",
    r"\bno (?:code|evidence|implementation|support|function|class|module|method|mechanism)s?\b",
    r"\bnone exists?\b",
    r"\bnothing (?:in|like|that|which)\b",
    r"\bnowhere\b",
)
"""Claims that the sought thing does not exist (regexes, matched case-insensitively); no task's own
nouns. A negation about the answerer's own search is no such claim: "I cannot tell", "I did not get
far enough", "I could not find it" say how far the search went, not what the code holds (a give-up
scored 1.0 on an absent task with "cannot" and "did not" among these patterns, issue 36)."""

AGENT_SUBJECTS: frozenset[str] = frozenset({"i", "we", "i'm", "i've", "we've", "we're", "me", "us"})
"""A pattern match preceded, within ``AGENT_WINDOW`` words, by one of these is about the answerer
("I do not see it", "we have no evidence"), not a claim about the code."""
AGENT_WINDOW = 2

HEDGE_PATTERNS: tuple[str, ...] = (
    r"\b(?:cannot|can't|could not|couldn't|unable to) (?:tell|say|determine|confirm|verify|be sure)\b",
    r"\bnot (?:sure|certain|clear)\b",
    r"\b(?:unsure|unclear|uncertain|undetermined)\b",
    r"\b(?:did not|didn't) get (?:far|to|through)\b",
    r"\bran out\b",
    r"\bnot enough (?:information|context|time|steps|evidence)\b",
    r"\bno way to (?:tell|know|say)\b",
)
"""Wording that withdraws a claim: an answer holding one (in its own words) does not admit absence
whatever else it says ("I cannot tell whether there is no such loader")."""

LEGACY_ABSENCE_PATTERNS: tuple[str, ...] = (
    r"\bnot (?:be )?found\b",
    r"\bno such\b",
    r"\bdoes(?: not|n't) (?:exist|have|provide|support|contain|include|implement|offer)\b",
    r"\bdo(?: not|n't) (?:exist|have|provide|support|contain|include|implement|offer)\b",
    r"\bnot (?:present|exist|supported|implemented|available|included)\b",
    r"\babsent\b",
    r"\b(?:could|can)(?: not|n't|not) (?:find|locate)\b",
    r"\bunable to (?:find|locate)\b",
    r"\bthere (?:is|are) no\b",
    r"\bno (?:code|evidence|implementation|support|loader|feature|function|class|module)s?\b",
    r"\bnone (?:found|exists?)\b",
    r"\bnowhere\b",
)
"""The patterns before issue 19, matched on the whole text (``quality_legacy`` only): "loader" and
"feature" came from the absent tasks' prompts, which the rule then credited when restated."""

_ABSENCE_RE = re.compile("|".join(ABSENCE_PATTERNS), re.IGNORECASE)
_HEDGE_RE = re.compile("|".join(HEDGE_PATTERNS), re.IGNORECASE)
_LEGACY_ABSENCE_RE = re.compile("|".join(LEGACY_ABSENCE_PATTERNS), re.IGNORECASE)
_WORD = re.compile(r"[A-Za-z0-9_]+(?:'[A-Za-z]+)?")

_FIELD = re.compile(r"\{[^{}]*\}")


@cache
def harness_prompts() -> tuple[str, ...]:
    """The harness's prompt texts (``core.prompts``, the one registry), format fields removed:
    harness wording for every answer, with a trace or without one."""
    return tuple(sorted({_FIELD.sub(" ", text) for text in prompts.harness_prompts()}))


def keyword_hits(keywords: tuple[str, ...] | list[str], text: str) -> list[str]:
    """The keywords occurring in ``text`` as whole words (case-insensitive, plural allowed).

    Whole-word matching keeps short keywords such as ``int`` from matching ``print``.
    """
    hits: list[str] = []
    for keyword in keywords:
        pattern = rf"(?<![A-Za-z0-9_]){re.escape(keyword)}(?:e?s)?(?![A-Za-z0-9_])"
        if re.search(pattern, text, re.IGNORECASE):
            hits.append(keyword)
    return hits


def countable_keywords(task: BenchTask, harness_texts: Iterable[str] = ()) -> tuple[str, ...]:
    """The task's keywords that occur neither in its prompt nor in any of ``harness_texts``.

    An answer that restates the question, or copies the lines the harness listed for it, finds
    those for free: they say nothing about what the child found.
    """
    given = set(keyword_hits(task.keywords, "\n".join([task.prompt, *harness_texts])))
    return tuple(keyword for keyword in task.keywords if keyword not in given)


def own_words(text: str, given: Iterable[str], n: int = SHARED_NGRAM) -> list[str]:
    """The stretches of ``text`` left once every run of ``n`` words (case-insensitive) that also
    occurs in one of ``given`` is cut out; the pieces stay apart, so no phrase forms across a cut."""
    shared: set[tuple[str, ...]] = set()
    for other in given:
        shared.update(_ngrams(other, n))
    tokens = list(_WORD.finditer(text))
    words = [m.group().lower() for m in tokens]
    cut = [False] * len(tokens)
    for i in range(len(tokens) - n + 1):
        if tuple(words[i : i + n]) in shared:
            cut[i : i + n] = [True] * n
    pieces: list[str] = []
    first: int | None = None
    for i in range(len(tokens) + 1):
        if i < len(tokens) and not cut[i]:
            first = i if first is None else first
        elif first is not None:
            pieces.append(text[tokens[first].start() : tokens[i - 1].end()])
            first = None
    return pieces


@lru_cache(maxsize=1024)
def _ngrams(text: str, n: int) -> frozenset[tuple[str, ...]]:
    """Every run of ``n`` words of ``text``, lower-case (kept per text: the harness's prompts and a
    task's own come back in every run)."""
    words = [m.group().lower() for m in _WORD.finditer(text)]
    return frozenset(tuple(words[i : i + n]) for i in range(len(words) - n + 1))


def admits_absence(text: str, given: Iterable[str] = ()) -> bool:
    """Whether ``text`` claims, in words of its own (``own_words``: not copied from ``given``, the
    task and the harness's texts), that the sought thing does not exist: an ``ABSENCE_PATTERNS``
    match whose subject is not the answerer (``AGENT_SUBJECTS``), in a text with no hedge
    (``HEDGE_PATTERNS``)."""
    pieces = own_words(text, given)
    if any(_HEDGE_RE.search(piece) for piece in pieces):
        return False
    return any(_claims(piece) for piece in pieces)


def _claims(piece: str) -> bool:
    for match in _ABSENCE_RE.finditer(piece):
        before = [w.lower() for w in _WORD.findall(piece[: match.start()])][-AGENT_WINDOW:]
        if not AGENT_SUBJECTS.intersection(before):
            return True
    return False


def mentions_absence(text: str) -> bool:
    """Whether an absence phrase occurs anywhere in ``text``, copied or not."""
    return _ABSENCE_RE.search(text) is not None


def legacy_admits_absence(text: str) -> bool:
    """The rule before issue 19: a ``LEGACY_ABSENCE_PATTERNS`` match anywhere in ``text``."""
    return _LEGACY_ABSENCE_RE.search(text) is not None
