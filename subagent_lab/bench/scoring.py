"""Scoring of one explore run against a benchmark task.

``score_run`` compares a child's ``ExploreResult`` payload with the task's gold spans and
keywords. The functions are pure apart from reading workspace files to ground evidence.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field, ValidationError

from subagent_lab.bench.suite import BenchTask, GoldSpan, TaskKind
from subagent_lab.core.contracts import ExploreResult, ground_evidence, parse_evidence

WIDE_SPAN_FACTOR = 4
"""An evidence range wider than this many times the gold span ..."""
WIDE_SPAN_MIN_LINES = 100
"""... and wider than this many lines does not count as a line-level hit: citing a whole
file (``loaders.py:1-700``) must not earn credit for every span inside it."""

ABSENCE_PATTERNS: tuple[str, ...] = (
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
"""Phrases (regexes, matched case-insensitively) by which an answer admits absence."""

_ABSENCE_RE = re.compile("|".join(ABSENCE_PATTERNS), re.IGNORECASE)


class Score(BaseModel):
    """How well one explore answer fits one task. Ratios lie in [0, 1]."""

    task_id: str
    kind: TaskKind
    contract_valid: bool
    """The payload parsed as an ExploreResult; when False every metric below is zero."""
    errors: list[str] = Field(default_factory=list)
    """Why the contract check failed, if it did."""
    status: str | None = None
    """The child's own ``status`` (``completed`` or ``partial``)."""
    evidence_count: int = 0
    grounded_ratio: float = 0.0
    """Share of evidence items pointing at real lines in the workspace (0 with no evidence)."""
    evidence_precision_file: float = 0.0
    """Share of evidence items whose file is a gold file (0 with no evidence)."""
    evidence_precision_line: float = 0.0
    """Share of evidence items overlapping some gold span, within the line tolerance."""
    gold_recall_file: float = 0.0
    """Share of gold spans whose file is cited by some evidence item (1 with no gold)."""
    gold_recall_line: float = 0.0
    """Share of gold spans overlapped by some evidence item, within the line tolerance."""
    keyword_recall: float | None = 0.0
    """Share of the countable keywords (``countable_keywords``: the task's keywords that its
    prompt does not already contain) found in summary + findings; None when there is none to
    count, and then left out of ``quality``."""
    keywords_in_task: list[str] = Field(default_factory=list)
    """Keywords not counted because the task text already contains them (restating earns nothing)."""
    admits_absence: bool = False
    """The summary or findings say the thing was not found / does not exist."""
    invented_evidence: bool = False
    """An ``absent`` task's answer cites evidence anyway."""
    missed_gold: list[str] = Field(default_factory=list)
    """Gold spans (``path:start-end``) no evidence item hit at line level."""
    unmatched_evidence: list[str] = Field(default_factory=list)
    """Evidence items that hit no gold span at line level."""
    quality: float = 0.0
    """Overall score in [0, 1]; see ``score_run``."""


def _norm_path(rel: str, root: Path) -> Path:
    """Resolve an evidence/gold path against the root so ``./a.py`` and ``a.py`` compare equal."""
    candidate = Path(rel)
    return (candidate if candidate.is_absolute() else root / candidate).resolve()


def _overlaps(start: int, end: int, span: GoldSpan, tolerance: int) -> bool:
    """Whether ``start..end`` overlaps the gold span widened by ``tolerance`` on both sides,
    without being so wide that it would cover anything (see WIDE_SPAN_*)."""
    gold_len = span.end - span.start + 1
    width = end - start + 1
    if width > max(WIDE_SPAN_FACTOR * gold_len, WIDE_SPAN_MIN_LINES):
        return False
    return start <= span.end + tolerance and end >= span.start - tolerance


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


def countable_keywords(task: BenchTask) -> tuple[str, ...]:
    """The task's keywords that do not already occur in its prompt (matched as ``keyword_hits``).

    An answer that restates the question would find those for free, so they say nothing about
    what the child found; only the others count toward ``keyword_recall``.
    """
    given = set(keyword_hits(task.keywords, task.prompt))
    return tuple(keyword for keyword in task.keywords if keyword not in given)


def admits_absence(text: str) -> bool:
    """Whether ``text`` says the sought thing is not present (see ABSENCE_PATTERNS)."""
    return _ABSENCE_RE.search(text) is not None


def _validate(payload: ExploreResult | Mapping[str, Any] | None) -> tuple[ExploreResult | None, list[str]]:
    if payload is None:
        return None, ["no contract payload (the child produced no valid ExploreResult)"]
    if isinstance(payload, ExploreResult):
        return payload, []
    if not isinstance(payload, Mapping):
        return None, [f"payload must be a mapping, got {type(payload).__name__}"]
    try:
        return ExploreResult.model_validate(dict(payload)), []
    except ValidationError as exc:
        return None, [
            f"{'.'.join(str(p) for p in err['loc']) or '(root)'}: {err['msg']}" for err in exc.errors()
        ]


def _mean(values: list[float]) -> float:
    return sum(values) / len(values) if values else 0.0


def score_run(
    task: BenchTask,
    payload: ExploreResult | Mapping[str, Any] | None,
    root: Path,
    *,
    line_tolerance: int = 3,
) -> Score:
    """Score one explore answer (an ExploreResult or its dict; None = no contract) for ``task``.

    ``root`` is the task's workspace root (``package_root(task.package)``). An evidence item
    hits a gold span at file level when both name the same file, and at line level when its
    range also overlaps the span widened by ``line_tolerance`` lines on each side (ranges
    far wider than the span never hit, see WIDE_SPAN_*).

    ``quality``:

    * contract invalid: 0;
    * present tasks (locate/trace/enumerate/explain): the mean of ``gold_recall_line``,
      ``evidence_precision_line`` and ``keyword_recall``, the last left out when it is None
      (no keyword to count: the task has none, or its prompt already contains them all, so
      neither 0 nor 1 would be earned);
    * ``absent`` tasks: 1 if the answer admits absence and cites no evidence, else 0.
    """
    result, errors = _validate(payload)
    if result is None:
        return Score(task_id=task.id, kind=task.kind, contract_valid=False, errors=errors)

    root = root.resolve()
    text = "\n".join([result.summary, *result.findings])
    countable = countable_keywords(task)
    keyword_recall = len(keyword_hits(countable, text)) / len(countable) if countable else None
    absence = admits_absence(text)
    evidence = result.evidence
    checks = ground_evidence(evidence, root)
    grounded = sum(c.grounded for c in checks) / len(checks) if checks else 0.0

    gold_files = [_norm_path(span.path, root) for span in task.gold]
    file_hit_items = 0
    line_hit_items = 0
    gold_file_hit = [False] * len(task.gold)
    gold_line_hit = [False] * len(task.gold)
    unmatched: list[str] = []
    for item in evidence:
        parsed = parse_evidence(item)
        if parsed is None:
            # The contract already rejects malformed items; kept for dicts built by hand.
            unmatched.append(item)
            continue
        rel, start, end = parsed
        path = _norm_path(rel, root)
        file_hit = False
        line_hit = False
        for i, span in enumerate(task.gold):
            if path != gold_files[i]:
                continue
            file_hit = gold_file_hit[i] = True
            if _overlaps(start, end, span, line_tolerance):
                line_hit = gold_line_hit[i] = True
        file_hit_items += file_hit
        line_hit_items += line_hit
        if not line_hit:
            unmatched.append(item)

    n_evidence = len(evidence)
    n_gold = len(task.gold)
    precision_file = file_hit_items / n_evidence if n_evidence else 0.0
    precision_line = line_hit_items / n_evidence if n_evidence else 0.0
    recall_file = sum(gold_file_hit) / n_gold if n_gold else 1.0
    recall_line = sum(gold_line_hit) / n_gold if n_gold else 1.0
    invented = task.kind == "absent" and n_evidence > 0

    if task.kind == "absent":
        quality = 1.0 if absence and n_evidence == 0 else 0.0
    else:
        parts = [recall_line, precision_line]
        quality = _mean(parts if keyword_recall is None else [*parts, keyword_recall])

    return Score(
        task_id=task.id,
        kind=task.kind,
        contract_valid=True,
        status=result.status,
        evidence_count=n_evidence,
        grounded_ratio=grounded,
        evidence_precision_file=precision_file,
        evidence_precision_line=precision_line,
        gold_recall_file=recall_file,
        gold_recall_line=recall_line,
        keyword_recall=keyword_recall,
        keywords_in_task=[k for k in task.keywords if k not in countable],
        admits_absence=absence,
        invented_evidence=invented,
        missed_gold=[span.label for span, hit in zip(task.gold, gold_line_hit, strict=True) if not hit],
        unmatched_evidence=unmatched,
        quality=quality,
    )
