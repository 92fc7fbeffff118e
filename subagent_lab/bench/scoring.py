"""Scoring of one explore run against a benchmark task.

``score_run`` compares a child's ``ExploreResult`` payload with the task's gold spans and
keywords. Given the run's trace (``context_from_trace``) it also knows what the harness wrote to
the model (system prompt, rendered task, the final prompt with its listing of candidate lines, the
absence check) and which locations the tools showed: credit for wording the harness supplied, and
for evidence no tool showed where the profile requires seen evidence, is then withheld. The text
rules live in ``bench.wording``, the trace's facts in ``bench.scoring_context``, the result's
fields in ``bench.score`` and the localization metrics in ``bench.locmetrics``. Pure apart from
reading workspace files (grounding, their functions) and the trace.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from subagent_lab.bench.locmetrics import ACC_KS, Cited, Item, gold_of, loc_metrics, merge_items, strict_hit
from subagent_lab.bench.score import LOC_COLUMNS, Score
from subagent_lab.bench.scoring_context import (
    ScoringContext,
    ToolOutput,
    context_from_events,
    context_from_trace,
)
from subagent_lab.bench.suite import BenchTask, GoldSpan
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

__all__ = [
    "ABSENCE_PATTERNS",
    "LOC_COLUMNS",
    "MAX_EVIDENCE",
    "Score",
    "ScoringContext",
    "ToolOutput",
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
MAX_EVIDENCE = 4
"""Items the scorer counts, the first ones in rank order (after merging): the models'
``max_evidence``. Fifty windows tiling a file are scored as their first four, as a model's are."""


def _norm_path(rel: str, root: Path) -> Path:
    """Resolve an evidence/gold path against the root so ``./a.py`` and ``a.py`` compare equal."""
    candidate = Path(rel)
    return (candidate if candidate.is_absolute() else root / candidate).resolve()


class _Paths:
    """``_norm_path`` under one root, each distinct path resolved once: a score compares the same
    gold and cited paths again for every item, span and tool output."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._resolved: dict[str, Path] = {}

    def __call__(self, rel: str) -> Path:
        path = self._resolved.get(rel)
        if path is None:
            path = self._resolved[rel] = _norm_path(rel, self.root)
        return path


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
    return strict_hit(start, end, span.start, span.end, STRICT_MAX_LINES)


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


def _mean(parts: list[float]) -> float:
    return sum(parts) / len(parts)


@dataclass
class _Matches:
    """How the counted items of one answer meet the gold spans."""

    unique: list[str] = field(default_factory=list)
    unseen: list[str] = field(default_factory=list)
    items: list[Item] = field(default_factory=list)
    """The counted items: merged, in rank order, the first ``max_evidence``."""
    ranked: list[Item] = field(default_factory=list)
    """The first ``max(max_evidence, max(ACC_KS))`` merged items: Acc@5 looks at five."""
    unmatched: list[str] = field(default_factory=list)
    hits: dict[str, int] = field(default_factory=lambda: {"file": 0, "span": 0, "strict": 0})
    """Counted credited items with at least one hit of each kind."""
    gold: dict[str, set[int]] = field(default_factory=lambda: {"file": set(), "span": set(), "strict": set()})
    """Indices of the gold spans hit, by kind."""
    covered: set[tuple[Path, int]] = field(default_factory=set)
    """Gold lines inside a strict hit."""


def _cited(evidence: list[str], paths: _Paths, ctx: ScoringContext, out: _Matches) -> list[Cited]:
    """The distinct citations (same resolved file and lines: one), each credited or not: a citation
    outside every seen location is not, where the context requires seen evidence."""
    seen = [(paths(s.path), s) for s in ctx.seen or () if s.start >= 1]
    keys: set[tuple[Any, ...]] = set()
    cited: list[Cited] = []
    for item in evidence:
        parsed = parse_evidence(item)
        key: tuple[Any, ...] = (item,) if parsed is None else (paths(parsed[0]), *parsed[1:])
        if key in keys:  # a repeat earns nothing new (the grammar cannot ask for unique items)
            continue
        keys.add(key)
        out.unique.append(item)
        if parsed is None:  # the contract already rejects malformed items; kept for hand-built dicts
            cited.append(Cited(item, None, 0, 0, False))
            continue
        path, start, end = key
        credited = True
        if ctx.seen is not None and not any(p == path and s.covers(s.path, start, end) for p, s in seen):
            out.unseen.append(item)
            credited = not ctx.require_seen
        cited.append(Cited(item, path, start, end, credited))
    return cited


def _match(
    task: BenchTask, evidence: list[str], paths: _Paths, tolerance: int, ctx: ScoringContext, max_items: int
) -> _Matches:
    gold_files = [paths(span.path) for span in task.gold]
    out = _Matches()
    ranked = merge_items(_cited(evidence, paths, ctx, out))
    out.items = ranked[:max_items]
    out.ranked = ranked[: max(max_items, *ACC_KS)]
    for item in out.items:
        if not item.credited:
            out.unmatched.append(item.label)
            continue
        start, end = item.start, item.end
        on_file = [i for i, gold_file in enumerate(gold_files) if gold_file == item.path]
        span = [i for i in on_file if _overlaps(start, end, task.gold[i], tolerance)]
        strict = [i for i in on_file if _strict_hit(start, end, task.gold[i])]
        for kind, hit in (("file", on_file), ("span", span), ("strict", strict)):
            out.hits[kind] += bool(hit)
            out.gold[kind].update(hit)
        for i in strict:
            g = task.gold[i]
            out.covered.update((item.path, n) for n in range(max(start, g.start), min(end, g.end) + 1))
        if not span:
            out.unmatched.append(item.label)
    return out


def _legacy_hits(task: BenchTask, evidence: list[str], paths: _Paths, tolerance: int) -> tuple[int, set[int]]:
    """The old precision's numerator (items as written, repeats included, seen or not, with a span
    hit) and the gold spans they hit."""
    hits, gold = 0, set()
    for item in evidence:
        parsed = parse_evidence(item)
        if parsed is None:
            continue
        path = paths(parsed[0])
        found = [
            i
            for i, span in enumerate(task.gold)
            if paths(span.path) == path and _overlaps(parsed[1], parsed[2], span, tolerance)
        ]
        hits += bool(found)
        gold.update(found)
    return hits, gold


KEYWORD_NEAR_LINES = STRICT_MAX_LINES
"""A keyword a tool printed on a located line (``path:N:`` of a listing, ``N`` of a Read) is the
answer's only when a credited item lies within this many lines of that line: one unrelated line
of a Search listing must not launder every name the listing printed."""
_LOCATED = re.compile(r"(?P<path>[\w./-]+\.\w+):(?P<line>\d+)")
_NUMBERED = re.compile(r"^\s*(?P<line>\d+)\b")


def _keyword_lines(output: ToolOutput, keyword: str) -> list[tuple[str, int]] | None:
    """Where ``output`` printed ``keyword``: the ``(path, line)`` of each text line holding it, or
    None when one of those lines names no location (then any cited line of the output counts)."""
    paths = {s.path for s in output.spans if s.start >= 1}
    found: list[tuple[str, int]] = []
    for text in output.text.splitlines():
        if not keyword_hits([keyword], text):
            continue
        located = _LOCATED.search(text)
        numbered = _NUMBERED.match(text)
        if located is not None:
            found.append((located["path"], int(located["line"])))
        elif numbered is not None and len(paths) == 1:
            found.append((next(iter(paths)), int(numbered["line"])))
        else:
            return None
    return found or None


def _tool_only(found: list[str], ctx: ScoringContext, items: list[Item], paths: _Paths) -> list[str]:
    """The keywords of ``found`` that occur in text a tool printed while the answer cites no line
    near where that output printed them (``KEYWORD_NEAR_LINES``; any line the output showed where
    the keyword's line names no location): copied from an observation, not found in the code."""
    cited = [i for i in items if i.credited]

    def cites(output: ToolOutput, keyword: str) -> bool:
        lines = _keyword_lines(output, keyword)
        if lines is None:
            return any(
                s.start >= 1 and i.path == paths(s.path) and i.start <= s.end and i.end >= s.start
                for s in output.spans
                for i in cited
            )
        near = KEYWORD_NEAR_LINES
        return any(
            i.path == paths(path) and i.start - near <= line <= i.end + near
            for path, line in lines
            for i in cited
        )

    pasted: list[str] = []
    for keyword in found:
        printed = [o for o in ctx.tool_outputs if keyword_hits([keyword], o.text)]
        if printed and not any(cites(o, keyword) for o in printed):
            pasted.append(keyword)
    return pasted


def score_run(
    task: BenchTask,
    payload: ExploreResult | Mapping[str, Any] | None,
    root: Path,
    *,
    line_tolerance: int = 3,
    context: ScoringContext | None = None,
    max_evidence: int = MAX_EVIDENCE,
) -> Score:
    """Score one explore answer (an ExploreResult or its dict; None = no contract) for ``task``.

    ``root`` is the task's workspace root. Evidence becomes *items* first: distinct citations
    (same file and lines: one), those of one file that overlap or touch merged into their union,
    in the order cited (rank), and only the first ``max_evidence`` count. An item is *credited*
    when a tool showed each line it merges, or always when ``context`` does not require seen
    evidence. A credited item hits a gold span at file level when both name the same file; a
    *span hit* when its range overlaps the span widened by ``line_tolerance`` lines (ranges far
    wider than the span never hit, WIDE_SPAN_*); a *strict hit* at tolerance 0 and at most
    ``max(STRICT_MAX_LINES, span length)`` lines wide. ``context`` (``context_from_trace``) names
    the harness's texts, the tools' outputs and the seen locations; without it only the loop's own
    prompts (``wording.harness_prompts``) count as harness wording and nothing is checked for
    being seen. The localization columns are ``bench.locmetrics``'s: Acc@k and hit@k over the
    first k merged items (k up to 5, past ``max_evidence``: Acc@5 counts five), unit recall and
    precision over the counted items.

    ``quality``:

    * contract invalid: 0;
    * ``absent`` tasks: 1 if the status is ``completed``, the answer cites nothing and it
      ``admits_absence`` in its own words (no run of ``wording.SHARED_NGRAM`` words copied from the
      task or a harness text), else 0;
    * a task without gold (not ``absent``): None, not scored;
    * ``localize`` tasks: the mean of ``unit_recall_at4`` and ``unit_precision``;
    * other present tasks: the mean of ``strict_line_recall``, ``strict_line_precision`` and
      ``keyword_recall``, the last left out when it is None (no keyword countable).
    """
    kind = str(getattr(task, "kind", "locate"))
    result, errors = _validate(payload)
    if result is None:
        zeros = dict.fromkeys(LOC_COLUMNS, 0.0) if task.gold else {}
        unscored = not task.gold and kind != "absent"
        invalid = Score(task_id=task.id, kind=kind, contract_valid=False, errors=errors)
        return invalid.model_copy(update={**zeros, "quality": None if unscored else 0.0})

    root = root.resolve()
    ctx = context or ScoringContext()
    harness = (*harness_prompts(), *ctx.harness_texts)
    text = "\n".join([result.summary, *result.findings])
    in_task = set(keyword_hits(task.keywords, task.prompt))
    # The denominator is the task's (the same for every run of it, so paired runs compare like for
    # like); a keyword the harness wrote to this run can be named but earns nothing.
    countable = countable_keywords(task)
    creditable = countable_keywords(task, harness)
    paths = _Paths(root)
    m = _match(task, result.evidence, paths, line_tolerance, ctx, max_evidence)
    found = keyword_hits(creditable, text)
    pasted = _tool_only(found, ctx, m.items, paths)
    keyword_recall = (len(found) - len(pasted)) / len(countable) if countable else None
    absence = admits_absence(text, [task.prompt, *harness])
    checks = ground_evidence(result.evidence, root)
    n_items, n_gold = len(m.items), len(task.gold)
    gold_paths = [paths(s.path) for s in task.gold]
    spans = list(zip(task.gold, gold_paths, strict=True))
    gold_lines = {(p, n) for s, p in spans for n in range(s.start, s.end + 1)}
    precision_strict = _ratio(m.hits["strict"], n_items, 0.0)
    recall_strict = _ratio(len(m.gold["strict"]), n_gold, 1.0)
    loc: dict[str, float] = {}
    if task.gold:
        gold = [gold_of(p, s.start, s.end) for s, p in spans]
        metrics = loc_metrics(m.ranked, gold, STRICT_MAX_LINES, counted=max_evidence)
        for k in ACC_KS:
            loc |= {f"file_acc_at{k}": metrics.file_acc[k], f"func_acc_at{k}": metrics.func_acc[k]}
            loc |= {f"file_hit_at{k}": metrics.file_hit[k], f"func_hit_at{k}": metrics.func_hit[k]}
        loc |= {"unit_recall_at4": metrics.unit_recall, "unit_precision": metrics.unit_precision}

    quality: float | None
    if kind == "absent":
        quality = float(result.status == "completed" and absence and not result.evidence)
    elif not task.gold:
        quality = None
    elif kind == "localize":
        quality = _mean([loc["unit_recall_at4"], loc["unit_precision"]])
    else:
        parts = [recall_strict, precision_strict]
        quality = _mean(parts if keyword_recall is None else [*parts, keyword_recall])

    legacy_hits, legacy_gold = _legacy_hits(task, result.evidence, paths, line_tolerance)
    legacy = [k for k in task.keywords if k not in in_task]
    legacy_parts = [_ratio(legacy_hits, len(result.evidence), 0.0), _ratio(len(legacy_gold), n_gold, 1.0)]
    if legacy and kind != "absent":
        legacy_parts.append(len(keyword_hits(legacy, text)) / len(legacy))
    legacy_absent = legacy_admits_absence(text) and not result.evidence
    return Score(
        task_id=task.id,
        kind=kind,
        contract_valid=True,
        status=result.status,
        trace_checked=context is not None,
        evidence_count=len(result.evidence),
        evidence_unique=len(m.unique),
        evidence_counted=n_items,
        unseen_evidence=m.unseen,
        grounded_ratio=sum(c.grounded for c in checks) / len(checks) if checks else 0.0,
        evidence_precision_file=_ratio(m.hits["file"], n_items, 0.0),
        evidence_precision_line=_ratio(m.hits["span"], n_items, 0.0),
        gold_recall_file=_ratio(len(m.gold["file"]), n_gold, 1.0),
        gold_recall_line=_ratio(len(m.gold["span"]), n_gold, 1.0),
        strict_line_precision=precision_strict,
        strict_line_recall=recall_strict,
        gold_line_share=_ratio(len(m.covered & gold_lines), len(gold_lines), 1.0),
        keyword_recall=keyword_recall,
        keywords_in_task=[k for k in task.keywords if k in in_task],
        keywords_listed=[k for k in countable if k not in creditable],
        keywords_tool_only=pasted,
        admits_absence=absence,
        absence_restated=not absence and mentions_absence(text),
        invented_evidence=kind == "absent" and bool(m.unique),
        missed_gold=[span.label for i, span in enumerate(task.gold) if i not in m.gold["span"]],
        unmatched_evidence=m.unmatched,
        quality=quality,
        quality_legacy=float(legacy_absent) if kind == "absent" else _mean(legacy_parts),
    ).model_copy(update=loc)
