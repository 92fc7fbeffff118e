"""The final answer cites what the tools showed: the prompt lists those locations, the grammar
offers only them.

Small models leave evidence empty unless the citable places are in front of them, and cite the
first ones listed: with ``anchors``, the listing holds the lines the tools marked as citable,
ranked by the task's words (``ranking``), each with its text.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from subagent_lab.core.policy import CallResult, Policy, RunView
from subagent_lab.core.provenance import MAX_EVIDENCE_CHOICES, constrain_evidence, evidence_choices
from subagent_lab.core.types import Span
from subagent_lab.scaffold.ranking import line_texts, listed_location, rank_citable

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
    """``evidence_from_seen``, ``cite_anchors``, ``cite_margin``, ``min_evidence``, ``max_evidence``:
    one aid's parameters."""

    constrain: bool = True
    """The grammar limits the evidence items to seen lines (``evidence_from_seen``)."""
    anchors: bool = False
    """Only the citable lines, ranked (``cite_anchors``)."""
    margin: int | None = None
    """With ``anchors``: list and allow only the lines scoring within this many points of the best
    (``ranking.rank_citable``); None lists the best ``CITABLE_LISTED`` of all."""
    min_evidence: int = 0
    max_evidence: int = 6
    name = "cite_from_seen"
    _groups: list[list[Span]] = field(default_factory=list, init=False)
    """The seen spans, one list per observation, oldest first."""
    _listed: list[str] | None = field(default=None, init=False)
    """With ``margin``: the lines the final prompt listed, the only ones the answer may cite."""

    def observe(self, run: RunView, results: Sequence[CallResult]) -> None:
        self._groups += [list(r.outcome.spans) for r in results if not r.repeated]

    def final_prompt(self, run: RunView, lead: str, prompt: str) -> str:
        if self.anchors:
            return prompt + self._citable_listing(run)
        locations = seen_locations(run.seen)
        if locations:
            prompt += " Locations the tools showed you (cite those that answer the task): " + ", ".join(
                locations
            )
        return prompt

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
        if self.anchors:
            choices = self._listed if self._listed is not None else citable(self._groups)
        else:
            choices = evidence_choices(list(run.seen))
        return constrain_evidence(schema, choices, self.min_evidence, self.max_evidence)
