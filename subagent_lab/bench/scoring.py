"""Scoring of one explore run against a benchmark task.

``score_run`` compares a child's ``ExploreResult`` payload with the task's gold spans and
keywords. Given the run's trace (``context_from_trace``) it also knows what the harness wrote to
the model (system prompt, rendered task, the final prompt with its listing of candidate lines, the
absence check) and which locations the tools showed: credit for wording the harness supplied, and
for evidence no tool showed where the profile requires seen evidence, is then withheld. The text
rules live in ``bench.wording``. Pure apart from reading workspace files (grounding) and the trace.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field, ValidationError

from subagent_lab.bench.suite import BenchTask, GoldSpan, TaskKind
from subagent_lab.bench.wording import (
    ABSENCE_PATTERNS,
    admits_absence,
    countable_keywords,
    harness_prompts,
    keyword_hits,
    legacy_admits_absence,
    mentions_absence,
)
from subagent_lab.core.contracts import ExploreResult, ground_evidence, parse_evidence
from subagent_lab.core.trace import Event, PromptAdded, RunStarted, ToolFinished, read_trace
from subagent_lab.core.types import Span

__all__ = [
    "ABSENCE_PATTERNS",
    "Score",
    "ScoringContext",
    "admits_absence",
    "context_from_events",
    "context_from_trace",
    "countable_keywords",
    "keyword_hits",
    "score_run",
]

WIDE_SPAN_FACTOR = 4
"""An evidence range wider than this many times the gold span ..."""
WIDE_SPAN_MIN_LINES = 100
"""... and wider than this many lines is no span hit: citing a whole file (``loaders.py:1-700``)
must not earn credit for every span inside it. (Span hits only; strict hits cap far lower.)"""
STRICT_MAX_LINES = 10
"""A strict line hit may be at most this many lines wide, or as wide as the gold span it hits:
a 100-line window over a 66-line function is no strict hit, the function cited whole is."""


@dataclass(frozen=True)
class ScoringContext:
    """What the run showed its model, for the rules that need more than the answer.

    ``harness_texts``: text the harness wrote (system prompt, rendered task, every prompt it added,
    the final prompt's listing of candidate lines included). ``seen``: the locations the tools
    showed, None when unknown. ``require_seen``: evidence outside ``seen`` scores nothing.
    """

    harness_texts: tuple[str, ...] = ()
    seen: tuple[Span, ...] | None = None
    require_seen: bool = False


def context_from_events(events: Iterable[Event], *, require_seen: bool | None = None) -> ScoringContext:
    """The ``ScoringContext`` of one run's trace events.

    ``require_seen`` defaults to the run's resolved profile: ``evidence_from_seen`` (the grammar
    offers only seen lines) or ``require_seen`` (unseen evidence triggers a repair). A scripted
    model, or an endpoint without constrained output, is not held by the grammar; the scorer is.
    """
    texts: list[str] = []
    seen: list[Span] = []
    profile: dict[str, Any] = {}
    for event in events:
        if isinstance(event, RunStarted):
            texts += [event.system_prompt, event.task]
            profile = event.profile_fields
            seen += [Span(str(s[0]), int(s[1]), int(s[2])) for s in event.shown]
        elif isinstance(event, PromptAdded):
            texts.append(event.content)
        elif isinstance(event, ToolFinished) and event.status == "ok":
            seen += [Span(str(s[0]), int(s[1]), int(s[2])) for s in event.spans if len(s) == 3]
    if require_seen is None:
        require_seen = bool(profile.get("evidence_from_seen") or profile.get("require_seen"))
    return ScoringContext(harness_texts=tuple(texts), seen=tuple(seen), require_seen=require_seen)


def context_from_trace(path: str | Path, *, require_seen: bool | None = None) -> ScoringContext:
    """``context_from_events`` of the trace file at ``path``."""
    return context_from_events(read_trace(path), require_seen=require_seen)


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
    trace_checked: bool = False
    """A ``ScoringContext`` was given: harness wording and (where known) seen locations were checked."""
    evidence_count: int = 0
    """Evidence items as written, repeats included."""
    evidence_unique: int = 0
    """Distinct evidence items (same file and lines = one item); every ratio below counts these."""
    unseen_evidence: list[str] = Field(default_factory=list)
    """Distinct items outside every location the tools showed (with a context that knows them)."""
    grounded_ratio: float = 0.0
    """Share of evidence items pointing at real lines in the workspace (0 with no evidence)."""
    evidence_precision_file: float = 0.0
    """Share of distinct, credited items whose file is a gold file (0 with no evidence)."""
    evidence_precision_line: float = 0.0
    """Span-hit precision: share of distinct items overlapping a gold span within the tolerance."""
    gold_recall_file: float = 0.0
    """Share of gold spans whose file is cited by some credited item (1 with no gold)."""
    gold_recall_line: float = 0.0
    """Span recall: share of gold spans overlapped by a credited item within the tolerance."""
    strict_line_precision: float = 0.0
    """Share of distinct items that are strict hits: overlap a gold span at tolerance 0 and are at
    most ``max(STRICT_MAX_LINES, span length)`` lines wide (0 with no evidence)."""
    strict_line_recall: float = 0.0
    """Share of gold spans strictly hit by some item (1 with no gold)."""
    gold_line_share: float = 0.0
    """Share of the gold lines that strict hits cover, line by line (1 with no gold)."""
    keyword_recall: float | None = 0.0
    """Creditable keywords found in summary + findings, over the countable ones (those not in the
    task's prompt); creditable: countable and in no harness text (``keywords_listed`` are not).
    None when none is countable (then left out of ``quality``)."""
    keywords_in_task: list[str] = Field(default_factory=list)
    """Keywords not counted because the task text already contains them (restating earns nothing)."""
    keywords_listed: list[str] = Field(default_factory=list)
    """Countable keywords that earn nothing because a harness text (above all the final prompt's
    listing of candidate lines) holds them: they still count in ``keyword_recall``'s denominator."""
    admits_absence: bool = False
    """The answer says, in its own words (``own_words``), that the thing does not exist."""
    absence_restated: bool = False
    """An absence phrase occurs only inside wording copied from the task or the harness."""
    invented_evidence: bool = False
    """An ``absent`` task's answer cites evidence anyway."""
    missed_gold: list[str] = Field(default_factory=list)
    """Gold spans (``path:start-end``) no credited item hit at span level."""
    unmatched_evidence: list[str] = Field(default_factory=list)
    """Distinct evidence items that hit no gold span at span level (or were not credited)."""
    quality: float = 0.0
    """Overall score in [0, 1]; see ``score_run``."""
    quality_legacy: float = 0.0
    """The scorer before issue 19 (repeats counted, ±tolerance span hits, absence and keywords on
    the raw text); kept only to compare with figures reported before it."""


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


def _strict_hit(start: int, end: int, span: GoldSpan) -> bool:
    """Overlap at tolerance 0 by a range no wider than ``max(STRICT_MAX_LINES, span length)``."""
    if end - start + 1 > max(STRICT_MAX_LINES, span.end - span.start + 1):
        return False
    return start <= span.end and end >= span.start


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


def _ratio(hits: int, total: int, empty: float) -> float:
    return hits / total if total else empty


def _quality(kind: TaskKind, absent_ok: bool, parts: list[float], keywords: float | None) -> float:
    if kind == "absent":
        return 1.0 if absent_ok else 0.0
    parts = parts if keywords is None else [*parts, keywords]
    return sum(parts) / len(parts)


@dataclass
class _Matches:
    """How the distinct evidence items of one answer meet the gold spans."""

    n_gold: int
    unique: list[str] = field(default_factory=list)
    unseen: list[str] = field(default_factory=list)
    unmatched: list[str] = field(default_factory=list)
    items: dict[str, int] = field(default_factory=lambda: {"file": 0, "span": 0, "strict": 0})
    """Distinct credited items with at least one hit of each kind."""
    gold: dict[str, set[int]] = field(default_factory=lambda: {"file": set(), "span": set(), "strict": set()})
    """Indices of the gold spans hit, by kind."""
    covered: set[tuple[Path, int]] = field(default_factory=set)
    """Gold lines inside a strict hit."""
    legacy_hits: int = 0
    """Items as written (repeats included, seen or not) with a span hit: the old precision's numerator."""
    legacy_gold: set[int] = field(default_factory=set)


def _match(task: BenchTask, evidence: list[str], root: Path, tolerance: int, ctx: ScoringContext) -> _Matches:
    gold_files = [_norm_path(span.path, root) for span in task.gold]
    seen = [(_norm_path(s.path, root), s) for s in ctx.seen or () if s.start >= 1]
    out = _Matches(n_gold=len(task.gold))
    first: dict[tuple[Any, ...], list[int]] = {}
    for item in evidence:
        parsed = parse_evidence(item)
        key: tuple[Any, ...] = (item,) if parsed is None else (_norm_path(parsed[0], root), *parsed[1:])
        if key in first:  # a repeat earns nothing new (the grammar cannot ask for unique items)
            out.legacy_hits += bool(first[key])
            continue
        out.unique.append(item)
        if parsed is None:  # the contract already rejects malformed items; kept for hand-built dicts
            first[key] = []
            out.unmatched.append(item)
            continue
        path, start, end = key
        on_file = [i for i, gold_file in enumerate(gold_files) if gold_file == path]
        first[key] = [i for i in on_file if _overlaps(start, end, task.gold[i], tolerance)]
        out.legacy_hits += bool(first[key])
        out.legacy_gold.update(first[key])
        if ctx.seen is not None and not any(p == path and s.covers(s.path, start, end) for p, s in seen):
            out.unseen.append(item)
            if ctx.require_seen:
                out.unmatched.append(item)
                continue
        strict = [i for i in on_file if _strict_hit(start, end, task.gold[i])]
        for kind, hit in (("file", on_file), ("span", first[key]), ("strict", strict)):
            out.items[kind] += bool(hit)
            out.gold[kind].update(hit)
        for i in strict:
            span = task.gold[i]
            out.covered.update((path, n) for n in range(max(start, span.start), min(end, span.end) + 1))
        if not first[key]:
            out.unmatched.append(item)
    return out


def score_run(
    task: BenchTask,
    payload: ExploreResult | Mapping[str, Any] | None,
    root: Path,
    *,
    line_tolerance: int = 3,
    context: ScoringContext | None = None,
) -> Score:
    """Score one explore answer (an ExploreResult or its dict; None = no contract) for ``task``.

    ``root`` is the task's workspace root. Evidence is de-duplicated first (same file and lines:
    one item). An item is *credited* when a tool showed it, or always when ``context`` does not
    require seen evidence. A credited item hits a gold span at file level when both name the same
    file; a *span hit* when its range overlaps the span widened by ``line_tolerance`` lines (ranges
    far wider than the span never hit, WIDE_SPAN_*); a *strict hit* at tolerance 0 and at most
    ``max(STRICT_MAX_LINES, span length)`` lines wide. ``context`` (``context_from_trace``) names
    the harness's texts and the seen locations; without it only the loop's own prompts
    (``wording.harness_prompts``) count as harness wording and nothing is checked for being seen.

    ``quality``:

    * contract invalid: 0;
    * present tasks: the mean of ``strict_line_recall``, ``strict_line_precision`` and
      ``keyword_recall``, the last left out when it is None (no keyword countable);
    * ``absent`` tasks: 1 if the answer cites nothing and ``admits_absence`` in its own words
      (no run of ``wording.SHARED_NGRAM`` words copied from the task or a harness text), else 0.
    """
    result, errors = _validate(payload)
    if result is None:
        return Score(task_id=task.id, kind=task.kind, contract_valid=False, errors=errors)

    root = root.resolve()
    ctx = context or ScoringContext()
    harness = (*harness_prompts(), *ctx.harness_texts)
    text = "\n".join([result.summary, *result.findings])
    in_task = set(keyword_hits(task.keywords, task.prompt))
    # The denominator is the task's (the same for every run of it, so paired runs compare like for
    # like); a keyword the harness wrote to this run can be named but earns nothing.
    countable = countable_keywords(task)
    creditable = countable_keywords(task, harness)
    keyword_recall = len(keyword_hits(creditable, text)) / len(countable) if countable else None
    absence = admits_absence(text, [task.prompt, *harness])
    checks = ground_evidence(result.evidence, root)
    m = _match(task, result.evidence, root, line_tolerance, ctx)
    n_unique, n_gold = len(m.unique), m.n_gold
    gold_lines = {(_norm_path(s.path, root), n) for s in task.gold for n in range(s.start, s.end + 1)}
    precision_strict = _ratio(m.items["strict"], n_unique, 0.0)
    recall_strict = _ratio(len(m.gold["strict"]), n_gold, 1.0)

    legacy = [k for k in task.keywords if k not in in_task]
    legacy_keywords = len(keyword_hits(legacy, text)) / len(legacy) if legacy else None
    legacy_parts = [_ratio(m.legacy_hits, len(result.evidence), 0.0), _ratio(len(m.legacy_gold), n_gold, 1.0)]
    return Score(
        task_id=task.id,
        kind=task.kind,
        contract_valid=True,
        status=result.status,
        trace_checked=context is not None,
        evidence_count=len(result.evidence),
        evidence_unique=n_unique,
        unseen_evidence=m.unseen,
        grounded_ratio=sum(c.grounded for c in checks) / len(checks) if checks else 0.0,
        evidence_precision_file=_ratio(m.items["file"], n_unique, 0.0),
        evidence_precision_line=_ratio(m.items["span"], n_unique, 0.0),
        gold_recall_file=_ratio(len(m.gold["file"]), n_gold, 1.0),
        gold_recall_line=_ratio(len(m.gold["span"]), n_gold, 1.0),
        strict_line_precision=precision_strict,
        strict_line_recall=recall_strict,
        gold_line_share=_ratio(len(m.covered & gold_lines), len(gold_lines), 1.0),
        keyword_recall=keyword_recall,
        keywords_in_task=[k for k in task.keywords if k in in_task],
        keywords_listed=[k for k in countable if k not in creditable],
        admits_absence=absence,
        absence_restated=not absence and mentions_absence(text),
        invented_evidence=task.kind == "absent" and n_unique > 0,
        missed_gold=[span.label for i, span in enumerate(task.gold) if i not in m.gold["span"]],
        unmatched_evidence=m.unmatched,
        quality=_quality(
            task.kind, absence and not n_unique, [recall_strict, precision_strict], keyword_recall
        ),
        quality_legacy=_quality(
            task.kind, legacy_admits_absence(text) and not result.evidence, legacy_parts, legacy_keywords
        ),
    )
