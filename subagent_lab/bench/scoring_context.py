"""What a run showed its model, for the scoring rules that need more than the answer.

Read from the run's trace: the texts the harness wrote (system prompt, task, added prompts), what
each tool printed with the locations it showed, and whether the profile required seen evidence.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from subagent_lab.config.legacy import scaffold_of_fields
from subagent_lab.config.scaffolds import PLAIN
from subagent_lab.core.trace import Event, PromptAdded, RunStarted, ToolFinished, read_trace
from subagent_lab.core.types import Span

__all__ = ["ScoringContext", "ToolOutput", "context_from_events", "context_from_trace"]


@dataclass(frozen=True)
class ToolOutput:
    """What one tool call printed (``text``) and the lines that text shows (``spans``)."""

    text: str
    spans: tuple[Span, ...] = ()


@dataclass(frozen=True)
class ScoringContext:
    """What the run showed its model, for the rules that need more than the answer.

    ``harness_texts``: text the harness wrote (system prompt, rendered task, every prompt it added,
    the final prompt's listing of candidate lines included). ``seen``: the locations the tools
    showed, None when unknown. ``require_seen``: evidence outside ``seen`` scores nothing.
    ``tool_outputs``: what each successful tool call printed, with its spans: a keyword found only
    in such text earns nothing unless the answer cites a line of that output.
    """

    harness_texts: tuple[str, ...] = ()
    seen: tuple[Span, ...] | None = None
    require_seen: bool = False
    tool_outputs: tuple[ToolOutput, ...] = ()


def context_from_events(events: Iterable[Event], *, require_seen: bool | None = None) -> ScoringContext:
    """The ``ScoringContext`` of one run's trace events.

    ``require_seen`` defaults to the run's resolved scaffold: ``CiteFromSeen.constrain`` (the grammar
    offers only seen lines) or ``RequireEvidence.seen`` (unseen evidence triggers a repair). A scripted
    model, or an endpoint without constrained output, is not held by the grammar; the scorer is.
    """
    texts: list[str] = []
    seen: list[Span] = []
    outputs: list[ToolOutput] = []
    profile: dict[str, Any] = {}
    for event in events:
        if isinstance(event, RunStarted):
            texts += [event.system_prompt, event.task]
            profile = event.profile_fields
            seen += [Span(str(s[0]), int(s[1]), int(s[2])) for s in event.shown]
        elif isinstance(event, PromptAdded):
            texts.append(event.content)
        elif isinstance(event, ToolFinished) and event.status == "ok":
            spans = [Span(str(s[0]), int(s[1]), int(s[2])) for s in event.spans if len(s) == 3]
            seen += spans
            outputs.append(ToolOutput(event.text, tuple(spans)))
    if require_seen is None:
        scaffold = scaffold_of_fields(profile, PLAIN)  # an older trace: its flat fields
        held = scaffold.param("CiteFromSeen", "constrain") or scaffold.param("RequireEvidence", "seen")
        require_seen = bool(profile) and bool(held)
    return ScoringContext(
        harness_texts=tuple(texts), seen=tuple(seen), require_seen=require_seen, tool_outputs=tuple(outputs)
    )


def context_from_trace(path: str | Path, *, require_seen: bool | None = None) -> ScoringContext:
    """``context_from_events`` of the trace file at ``path``."""
    return context_from_events(read_trace(path), require_seen=require_seen)
