"""The final answer cites what the tools showed: the prompt lists those locations, the grammar
offers only them.

Small models leave evidence empty unless the citable places are in front of them, and cite the
first ones listed: with ``anchors``, the listing holds the lines the tools marked as citable,
ranked by the task's words (``ranking``), each with its text.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Annotated, Any

from pydantic import Field

from subagent_lab.core.evidence import MAX_EVIDENCE_CHOICES, constrain_evidence, evidence_choices
from subagent_lab.core.policy import CallResult, Policy, RunView
from subagent_lab.core.tool import ToolError
from subagent_lab.core.types import Span
from subagent_lab.scaffold.ranking import LINE_TEXT_CHARS, line_texts, listed_location, rank_citable
from subagent_lab.tools.symbols import SYMBOL_TOOLS
from subagent_lab.tools.symbols.index import index_for

CITABLE_LISTED = 8
"""Citable locations listed in the final prompt (small models cite what is in front of them)."""
SEEN_LISTED = 12
"""Seen locations listed without ``anchors``."""


def seen_locations(seen: Sequence[Span], limit: int = SEEN_LISTED) -> list[str]:
    """The first locations the run's tools showed, as ``path:line`` / ``path:start-end``."""
    items = [
        f"{s.path}:{s.start}" if s.start == s.end else f"{s.path}:{s.start}-{s.end}" for s in seen if s.start
    ]
    return list(dict.fromkeys(items))[:limit]


def unit_items(
    units: Sequence[Span],
    headers: Mapping[str, str],
    limit: int = CITABLE_LISTED,
    printed: Sequence[Span] | None = None,
) -> dict[str, str]:
    """The units (functions, classes) the structure tools showed, in the order shown (the model's
    own walk, the task's target first), each followed by the shown units nested in it, at most
    ``limit``: item -> the ``path:line`` naming it.

    A function or method is cited whole (``path:start-end``) when ``printed`` (the seen spans; None:
    not checked) holds all its lines, else by its header line, the line the tool printed (seen
    means printed, issue 36); a class by its header line (``headers``: each unit's first line's
    text), since its body is its methods, units of their own.
    Nesting is what the code's structure says belongs together: after ``Find FileSystemLoader``
    then ``Outline loaders.py``, the class's own methods come next, not the file's first units.
    """
    shown = list(dict.fromkeys(s for s in units if s.start >= 1 and s.end > s.start))
    ordered: list[Span] = []
    placed: set[Span] = set()

    def place(unit: Span) -> None:
        placed.add(unit)
        ordered.append(unit)
        for inner in shown:
            if inner not in placed and _nested(inner, unit):
                place(inner)

    for unit in shown:
        if unit not in placed:
            place(unit)
    items: dict[str, str] = {}
    for span in ordered:
        head = f"{span.path}:{span.start}"
        all_printed = printed is None or any(p.covers(span.path, span.start, span.end) for p in printed)
        whole = all_printed and not headers.get(head, "").startswith("class ")
        items.setdefault(f"{head}-{span.end}" if whole else head, head)
    return dict(list(items.items())[:limit])


def _units_named(run: RunView, spans: Sequence[Span]) -> list[Span]:
    """The units whose first line a structure tool printed (its spans are the printed lines
    only), each as its whole range from the symbol index, in the order shown."""
    try:
        index = index_for(run.tool_context)
    except (OSError, ToolError):
        return []
    units: list[Span] = []
    for span in spans:
        entry = index.files.get(span.path)
        if entry is None or span.start < 1 or span.start != span.end:
            continue
        units += [
            Span(span.path, d.start, d.end)
            for d in entry.parse.definitions
            if d.start == span.start and d.end > d.start and d.kind != "constant"
        ][:1]
    return units


def _nested(inner: Span, outer: Span) -> bool:
    """Whether ``inner`` lies within ``outer`` in the same file and is not ``outer`` itself."""
    return (
        inner.path == outer.path
        and outer.start <= inner.start
        and inner.end <= outer.end
        and (inner.start, inner.end) != (outer.start, outer.end)
    )


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


@dataclass
class CiteFromSeen(Policy):
    """What the final answer may cite, and how much: the answer's evidence settings, written once
    (``RetrievalStart`` and ``AbsenceCheck`` take theirs from here)."""

    constrain: bool = True
    """The grammar limits the evidence items to seen lines."""
    anchors: bool = False
    """Only the citable lines, ranked."""
    margin: Annotated[int, Field(ge=0, le=20)] | None = None
    """With ``anchors``: list and allow only the lines scoring within this many points of the best
    (``ranking.rank_citable``); None lists the best ``CITABLE_LISTED`` of all."""
    min_evidence: Annotated[int, Field(ge=0, le=10)] = 0
    max_evidence: Annotated[int, Field(ge=1, le=50)] = 6
    units: bool = False
    """Once a structure tool showed a unit, list and allow the units shown instead
    of lines: a function whole, a class by its header line, in the order the tools showed them, never
    re-ranked by the task's words (a word ranking dropped the very definitions Find returned)."""
    name = "cite_from_seen"
    grammar_only = ("constrain", "anchors", "units")
    needs_contract = True
    _groups: list[list[Span]] = field(default_factory=list, init=False)
    """The seen spans, one list per observation, oldest first."""
    _listed: list[str] | None = field(default=None, init=False)
    """With ``margin`` (or ``units``): what the final prompt listed, the only items the answer may cite."""
    _units: list[Span] = field(default_factory=list, init=False)
    """With ``units``: the multi-line spans the structure tools showed, oldest first."""

    def observe(self, run: RunView, results: Sequence[CallResult]) -> None:
        self._groups += [list(r.outcome.spans) for r in results if not r.repeated]
        if self.units:
            shown = [r for r in results if not r.repeated and r.call.name in SYMBOL_TOOLS]
            self._units += _units_named(run, [s for r in shown for s in r.outcome.spans])

    def final_prompt(self, run: RunView, lead: str, prompt: str) -> str:
        if self.units and self._units:
            return prompt + self._unit_listing(run)
        if self.anchors:
            return prompt + self._citable_listing(run)
        locations = seen_locations(run.seen)
        if locations:
            prompt += " Locations the tools showed you (cite those that answer the task): " + ", ".join(
                locations
            )
        return prompt

    def _unit_listing(self, run: RunView) -> str:
        """The units shown, in order, each with its first line's text; the answer may cite only these."""
        headers = line_texts([f"{u.path}:{u.start}" for u in self._units], run.workspace_root)
        units = unit_items(self._units, headers, printed=list(run.seen))
        self._listed = list(units)
        lines = "\n".join(
            f"- {item}  {headers.get(head, '')[:LINE_TEXT_CHARS]}".rstrip() for item, head in units.items()
        )
        head = " Code units the tools showed you, each followed by those inside it"
        head += " (cite those that answer the task):"
        return f"{head}\n{lines}"

    def _citable_listing(self, run: RunView) -> str:
        """The citable lines, those holding the task's words first, each with its text (a listing in
        the order seen put the asked line first and unrelated outline entries next, which halved
        precision)."""
        items = citable(self._groups)
        if not items:
            return ""
        texts = line_texts(items, run.workspace_root)
        ranked = rank_citable(items, texts, run.task_message, self.margin)[:CITABLE_LISTED]
        if self.margin is not None:
            self._listed = ranked  # the answer may cite only what is listed
        lines = "\n".join(f"- {listed_location(item, texts)}" for item in ranked)
        head = " Locations the tools showed you, most relevant first (cite those that answer the task):"
        return f"{head}\n{lines}"

    def answer_schema(self, run: RunView, schema: dict[str, Any]) -> dict[str, Any]:
        if not self.constrain:
            return schema
        if self._listed is not None and self.units:
            choices = self._listed
        elif self.anchors:
            choices = self._listed if self._listed is not None else citable(self._groups)
        else:
            choices = evidence_choices(list(run.seen))
        return constrain_evidence(schema, choices, self.min_evidence, self.max_evidence)
