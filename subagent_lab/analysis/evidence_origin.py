"""What the model added to the retrieval it was given: each evidence item's origin, from the trace.

Under the ``RetrievalStart`` aid the harness runs the task's retrieval before the first action and
numbers its best units, the *candidates* (``scaffold.retrieval_start``). For each item of the final
answer this says

* ``source``: ``retrieval`` when the harness's calls gave it (a candidate, or a location they
  showed and the model's own calls did not), ``model`` when the model's own calls showed it,
  ``other`` when no tool call of the run showed it (a file the task names, or unseen);
* ``action``: ``kept`` (a candidate's header line, or its unit whole), ``narrowed`` (inside a
  candidate's unit, narrower), ``added`` (inside no candidate's unit);

and which candidates were ``dropped`` (neither kept nor narrowed into). A pure function of the
events: the same trace gives the same origins.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from pydantic import BaseModel, Field

from subagent_lab.core.contracts import parse_evidence
from subagent_lab.core.policy import HARNESS_CALL
from subagent_lab.core.trace import Event, PromptAdded, RunEnded, ToolFinished
from subagent_lab.core.types import Span
from subagent_lab.scaffold.retrieval_start import PURPOSE, parse_candidates

Source = Literal["retrieval", "model", "other"]
Action = Literal["kept", "narrowed", "added"]


class ItemOrigin(BaseModel):
    """One evidence item of the final answer and where it came from."""

    item: str
    source: Source
    action: Action
    candidate: int | None = None
    """The candidate (1-based, as numbered) it keeps or narrows; None for an added item."""


class EvidenceOrigin(BaseModel):
    """The candidates a run was given and what its answer made of them."""

    candidates: list[str] = Field(default_factory=list)
    """The candidates' items, in their numbered order."""
    items: list[ItemOrigin] = Field(default_factory=list)
    """The answer's evidence items in its order (none without a contract)."""
    dropped: list[int] = Field(default_factory=list)
    """The candidates (1-based) no item kept or narrowed into."""

    def count(self, *, action: Action | None = None, source: Source | None = None) -> int:
        """Items with that action and/or source."""
        return sum(
            (action is None or i.action == action) and (source is None or i.source == source)
            for i in self.items
        )


def evidence_origin(events: Sequence[Event]) -> EvidenceOrigin | None:
    """The origin of each evidence item of the run's answer; None for a run given no candidates
    (no ``retrieval`` note in its trace)."""
    note = next((e for e in events if isinstance(e, PromptAdded) and e.purpose == PURPOSE), None)
    if note is None:
        return None
    candidates = parse_candidates(note.content)
    harness: list[Span] = []
    own: list[Span] = []
    for event in events:
        if isinstance(event, ToolFinished) and event.status == "ok":
            spans = [Span(str(s[0]), int(s[1]), int(s[2])) for s in event.spans if len(s) == 3 and s[1]]
            (harness if event.call_id.startswith(HARNESS_CALL) else own).extend(spans)
    end = next((e for e in events if isinstance(e, RunEnded)), None)
    answer = [str(i) for i in ((end.contract or {}).get("evidence") or [])] if end is not None else []
    items = [_origin(item, candidates, harness, own) for item in answer]
    taken = {i.candidate for i in items if i.candidate is not None}
    dropped = [n for n in range(1, len(candidates) + 1) if n not in taken]
    return EvidenceOrigin(candidates=[c for c, _ in candidates], items=items, dropped=dropped)


def _origin(
    item: str, candidates: list[tuple[str, Span]], harness: list[Span], own: list[Span]
) -> ItemOrigin:
    parsed = parse_evidence(item)
    if parsed is None:  # not a location: it came from no tool
        return ItemOrigin(item=item, source="other", action="added")
    path, start, end = parsed
    action: Action = "added"
    candidate: int | None = None
    for n, (cited, unit) in enumerate(candidates, start=1):
        if item.strip() == cited or (path, start, end) == tuple(unit):
            action, candidate = "kept", n
            break
        if candidate is None and unit.covers(path, start, end):
            action, candidate = "narrowed", n  # the innermost is not sought: the first listed holds it
    source: Source
    if action == "kept" or any((path, start, end) == tuple(s) for s in harness):
        source = "retrieval"
    elif any(s.covers(path, start, end) for s in own):
        source = "model"
    elif any(s.covers(path, start, end) for s in harness):
        source = "retrieval"
    else:
        source = "other"
    return ItemOrigin(item=item, source=source, action=action, candidate=candidate)
