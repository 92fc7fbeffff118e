"""The child starts where its own search ends: before the model's first action the harness runs
the task's retrieval as tool calls, and the final answer starts from the retrieval's best units.

Issue 37: on code nobody here tuned on, the explore child answered worse than one call of its own
``Search``. So the harness makes that call first (``tools/symbols/retrieve.py``: Find on the
request's code-like names, then Search on the request, the task without the harness's template),
through the real tools, so the trace records harness calls (ids ``HARNESS_CALL``) and what they
printed counts as seen. A short note after them numbers the best ``k`` units: the *candidates*,
each cited by its header line. The final prompt lists them first, numbered, and the answer's
grammar offers them first, then what the model's own calls showed: the model keeps, drops, narrows
(a line inside a candidate) or adds. The harness never fills in an answer the model left empty; the
no-model policy, taking the first offered items, cites the candidates as given, which makes it this
scaffold's own floor.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, ClassVar

from pydantic import Field

from subagent_lab.core.evidence import constrain_evidence
from subagent_lab.core.policy import HARNESS_CALL, CallResult, Policy, RunView
from subagent_lab.core.trace import CandidateJudged, Event, PromptAdded, read_trace
from subagent_lab.core.types import Span, ToolCall
from subagent_lab.scaffold.cite_from_seen import unit_items
from subagent_lab.scaffold.ranking import LINE_TEXT_CHARS, line_texts
from subagent_lab.tools.symbols import SYMBOL_TOOLS
from subagent_lab.tools.symbols.index import index_for
from subagent_lab.tools.symbols.retrieve import (
    SHOWN,
    RetrievedUnit,
    found_names,
    retrieve,
    search_query,
)

PURPOSE = "retrieval"
"""The ``prompt_added`` purpose of the candidates note (what ``parse_candidates`` reads back)."""
NEEDED = ("Find", "Search")
"""The tools the retrieval calls: a run without both gets no retrieval (nothing would show it)."""
OWN_LISTED = 8
"""Items of the model's own calls listed after the candidates, at most."""
NOTE_HEAD = (
    "The harness ran these searches for your task. Candidates, best first: your answer starts from "
    "them. Keep each that answers the task, drop the others, cite a narrower line inside one, or "
    "add what your own calls find:"
)
FINAL_HEAD = (
    " Candidates from the harness's search, best first (cite each that answers the task by the "
    "location listed, or a narrower line inside it; leave out those that do not):"
)
OWN_HEAD = "Other places your own calls showed (cite those that answer the task):"
CANDIDATE_LINE = re.compile(
    r"^(?P<n>\d+)\. (?P<item>(?P<path>\S+):\d+)  \S+ \S+ \(lines (?P<start>\d+)-(?P<end>\d+)\)",
    re.MULTILINE,
)
"""One candidate line of the note or the final prompt: ``1. path:line  kind qualname (lines s-e): …``."""


def candidate_line(n: int, unit: RetrievedUnit) -> str:
    """``n. path:line  kind qualname (lines start-end): signature`` (the signature cut)."""
    d = unit.unit
    head = f"{n}. {unit.item}  {d.kind} {d.qualname} (lines {d.start}-{d.end})"
    signature = " ".join(d.signature.split())
    if len(signature) > LINE_TEXT_CHARS:
        signature = signature[: LINE_TEXT_CHARS - 1] + "…"
    return f"{head}: {signature}" if signature else head


def parse_candidates(text: str) -> list[tuple[str, Span]]:
    """The candidates a note lists, in order: (the item cited, the unit's span)."""
    return [
        (m["item"], Span(m["path"], int(m["start"]), int(m["end"]))) for m in CANDIDATE_LINE.finditer(text)
    ]


def candidates_in_trace(events: Sequence[Event]) -> list[str]:
    """The candidates (``path:line``, best first) a run's retrieval note listed; [] without one."""
    for event in events:
        if isinstance(event, PromptAdded) and event.purpose == PURPOSE:
            return [item for item, _ in parse_candidates(event.content)]
    return []


def candidates_of_trace(path: str | Path) -> list[str]:
    """``candidates_in_trace`` of the trace at ``path``; [] when it cannot be read (the run's own
    ``trace_error`` says why)."""
    try:
        return candidates_in_trace(read_trace(path))
    except (OSError, ValueError):
        return []


def pool_in_trace(events: Sequence[Event]) -> list[str]:
    """The retrieval's pool a run had (``path:line`` items): the units the model judged
    (``candidate_judged``, ``RankStart``), else the candidates the note listed; [] without either.
    Candidate recall@K is measured on it (``bench.pool``)."""
    judged = list(dict.fromkeys(e.item for e in events if isinstance(e, CandidateJudged)))
    return judged or candidates_in_trace(events)


def scores_of_trace(path: str | Path) -> dict[str, float]:
    """Each judged candidate's P(yes) in the trace at ``path`` (its ``candidate_judged`` events), by
    item, in the order judged; {} without any or when it cannot be read."""
    try:
        events = read_trace(path)
    except (OSError, ValueError):
        return {}
    return {e.item: e.p_yes for e in events if isinstance(e, CandidateJudged)}


@dataclass
class RetrievalStart(Policy):
    """The harness's retrieval before the first action; its best ``k`` units are the candidates.
    Ordered after ``CiteFromSeen``, whose listing and choices it replaces once there are
    candidates (and whose evidence settings it takes), and before ``AbsenceCheck``, whose "no"
    empties them."""

    k: Annotated[int, Field(ge=1, le=8)] = 4
    constrain: bool = True
    """The grammar offers only the candidates and the own calls' listed items."""
    min_evidence: int = 0
    max_evidence: int = 4
    name = "retrieval_start"
    needs_contract = True
    shared: ClassVar[dict[str, str]] = {
        "constrain": "CiteFromSeen.constrain",
        "min_evidence": "CiteFromSeen.min_evidence",
        "max_evidence": "CiteFromSeen.max_evidence",
    }
    _candidates: list[RetrievedUnit] = field(default_factory=list, init=False)
    _started: bool = field(default=False, init=False)
    """The harness's own calls have run: what ``observe`` sees from now on is the model's."""
    _own_units: list[Span] = field(default_factory=list, init=False)
    _own_lines: list[Span] = field(default_factory=list, init=False)

    def start(self, run: RunView) -> None:
        if not all(tool in run.tools for tool in NEEDED):
            return
        index = index_for(run.tool_context)
        shown = min(int(run.tools[t].bound.get("limit", SHOWN)) for t in NEEDED)
        pool = self.pool_size()
        self._candidates = retrieve(run.task, index, max(self.k, pool), shown=max(shown, pool))
        calls = [
            ToolCall(id=f"{HARNESS_CALL}find-{i}", name="Find", arguments={"name": name})
            for i, name in enumerate(found_names(run.task, index))
        ]
        query = search_query(run.task)  # the request, not the harness's template around it
        calls.append(ToolCall(id=f"{HARNESS_CALL}search", name="Search", arguments={"query": query}))
        run.call_tools(calls)
        self._candidates = self.reranked(run, shown)[: self.k]
        self._started = True
        if self._candidates:
            lines = [candidate_line(n, unit) for n, unit in enumerate(self._candidates, start=1)]
            run.add_prompt(PURPOSE, "\n".join([NOTE_HEAD, *lines]))

    def pool_size(self) -> int:
        """Units the retrieval returns before any re-ranking (``RankStart`` judges more)."""
        return self.k

    def reranked(self, run: RunView, shown: int) -> list[RetrievedUnit]:
        """The retrieval's units in the order the candidates take (here: as retrieved)."""
        return self._candidates

    def observe(self, run: RunView, results: Sequence[CallResult]) -> None:
        if not self._started:
            return
        for result in results:
            if result.repeated:
                continue
            spans = [s for s in result.outcome.spans if s.start >= 1]
            if result.call.name in SYMBOL_TOOLS:
                self._own_units += [s for s in spans if s.end > s.start]
            self._own_lines += [s for s in spans if s.end == s.start]

    def own_items(self, run: RunView) -> dict[str, str]:
        """What the model's own calls showed, beside the candidates: the units its structure tools
        showed (as ``CiteFromSeen.units`` lists them), then the single lines its tools marked, newest first;
        the candidates and their units whole left out; item -> its first line's ``path:line``."""
        taken = {c.item for c in self._candidates} | {c.label for c in self._candidates}
        heads = [f"{u.path}:{u.start}" for u in self._own_units]
        shown = unit_items(self._own_units, line_texts(heads, run.workspace_root), limit=2 * OWN_LISTED)
        units = {item: head for item, head in shown.items() if item not in taken}
        # A unit's header line is that unit again (Find marks both): the unit stands for it.
        lines = {f"{s.path}:{s.start}": f"{s.path}:{s.start}" for s in reversed(self._own_lines)}
        taken |= set(shown.values())
        own = {**units, **{item: head for item, head in lines.items() if item not in taken}}
        return dict(list(own.items())[:OWN_LISTED])

    def final_prompt(self, run: RunView, lead: str, prompt: str) -> str:
        if not self._candidates:
            return prompt
        listing = [FINAL_HEAD, *(candidate_line(n, c) for n, c in enumerate(self._candidates, start=1))]
        own = self.own_items(run)
        if own:
            texts = line_texts(list(own.values()), run.workspace_root)
            rows = [f"- {item}  {texts.get(head, '')[:LINE_TEXT_CHARS]}" for item, head in own.items()]
            rows = [row.rstrip() for row in rows]
            listing += [OWN_HEAD, *rows]
        return lead + "\n".join(listing)

    def answer_schema(self, run: RunView, schema: dict[str, Any]) -> dict[str, Any]:
        if not self.constrain or not self._candidates:
            return schema
        choices = [c.item for c in self._candidates] + list(self.own_items(run))
        return constrain_evidence(schema, choices, self.min_evidence, self.max_evidence)
