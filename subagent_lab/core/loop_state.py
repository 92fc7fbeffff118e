"""The loop's value types: its limits and scaffold (``LoopSpec``), what it talks to (``LoopDeps``),
its mutable per-run state, and its one return type (``LoopOutcome``)."""

from __future__ import annotations

import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import Field

from subagent_lab.core.budget import Budget
from subagent_lab.core.model import Model
from subagent_lab.core.permissions import PermissionGate
from subagent_lab.core.tokens import PromptCounter
from subagent_lab.core.tool import Tool
from subagent_lab.core.trace import RunTotals, TraceSink
from subagent_lab.core.types import Message, Span, Usage


@dataclass(frozen=True)
class LoopSpec:
    """Limits, rules and scaffold choices of one run (built from a profile and its model)."""

    max_steps: int
    context_token_budget: int
    total_token_budget: int
    timeout_s: float
    contract: str | None
    max_output_tokens: int = 1024
    """Output cap of a final-answer call (and of a repair or grace call)."""
    action_max_tokens: int = 160
    """Output cap of an action call: a brief thought plus one tool call."""
    max_repairs: int = 2
    require_grounded: bool = False
    require_seen: bool = False
    """Evidence the run's tools never showed triggers a contract repair."""
    max_tool_calls_per_step: int = 4
    max_stale_turns: int = 3
    """Consecutive turns without a new observation that end the run as ``loop_detected``."""
    grace_turn: bool = True
    temperature: float = 0.0
    seed: int | None = 0
    max_parallel_tools: int = 4
    min_tool_calls: int = 0
    """Executed tool calls required before a final answer is accepted (grounds small models)."""
    constrain_paths: bool = False
    """Read may name only files a tool has shown (enforced by the grammar where there is one)."""
    evidence_from_seen: bool = False
    """The final answer's evidence items are limited by the grammar to lines a tool has shown."""
    min_evidence: int = 0
    """With ``evidence_from_seen``: the least number of seen lines the final answer must cite."""
    max_evidence: int = 6
    """The most evidence items the final answer may cite."""
    cite_anchors: bool = False
    """With ``evidence_from_seen``: evidence only from the lines tools marked as citable."""
    cite_margin: int | None = None
    """With ``cite_anchors``: list and allow only the citable lines scoring within this many points
    of the best one (``provenance.rank_citable``); None lists the best ``CITABLE_LISTED`` of all."""
    absence_check: bool = False
    """A yes/no call before the final answer; "no" makes the answer cite nothing."""
    finish_after_stale: int = 0
    """After this many consecutive stale turns the grammar offers only ``finish`` (0: never)."""
    finish_after_reads: int = 0
    """After this many executed Reads the grammar offers only ``finish`` (0: never)."""
    read_after_hits: bool = False
    """After a Grep that showed matching lines, the grammar offers only Read and finish."""
    read_on: int = 0
    """Repeated Reads (at most this many per run) that show the next window instead of the record."""
    first_search: int = 0
    """The first action is a Grep for one of ``LoopDeps.search_words`` (0: no such limit)."""
    thought_max_chars: int = 80
    arg_max_chars: int = 160


@dataclass
class LoopDeps:
    """What the loop talks to."""

    model: Model
    tools: dict[str, Tool]
    gate: PermissionGate
    tool_context: Any
    workspace_root: Path
    trace: TraceSink
    cancel: threading.Event | None = None
    counter: PromptCounter | None = None
    """Counts a request's prompt tokens; None takes the model's own counter, else the estimate."""
    shown: list[Span] = field(default_factory=list)
    """Locations counted as shown before the first step (the files a task names)."""
    step_offset: int = 0
    """Steps earlier loop segments of the same run took (a parent re-entering its loop after a
    verification verdict): added to the step of every event, so the trace's steps continue."""
    emit_run_ended: bool = True
    """False when the caller writes the run's one ``RunEnded`` itself (a run of several segments)."""
    search_words: tuple[str, ...] = ()
    """With ``LoopSpec.first_search``: the patterns the first Grep may use, best first."""


class LoopOutcome(RunTotals):
    """How a run ended and what it used (``RunTotals``), per call and per tool; the loop's only
    return type."""

    usage_by_call: list[Usage] = Field(default_factory=list)
    tool_usage: dict[str, dict[str, int]] = Field(default_factory=dict)
    messages: list[Message] = Field(default_factory=list, exclude=True, repr=False)
    """The conversation as the run left it, an accepted final answer last (a caller continues it
    from here). In memory only: never serialized, so a result built from a dump of the outcome
    (``SubagentResult``, ``MainRunResult``) does not carry it; the trace holds the run's text."""

    def ended_fields(self) -> dict[str, Any]:
        """The fields of the run's ``RunEnded`` event: all the event and the outcome share."""
        return self.model_dump(include=set(RunTotals.model_fields))


@dataclass
class Record:
    """Where the result of one distinct tool call sits in the conversation."""

    step: int
    index: int
    """Index of its tool message in ``RunState.messages``."""


@dataclass
class RunState:
    messages: list[Message]
    budget: Budget
    started: float = field(default_factory=time.monotonic)
    usage_by_call: list[Usage] = field(default_factory=list)
    steps: int = 0
    repairs: int = 0
    grace_used: bool = False
    model_time_s: float = 0.0
    tool_usage: dict[str, Counter[str]] = field(default_factory=dict)
    records: dict[str, Record] = field(default_factory=dict)
    """Call signature -> its last result; a repeat is answered from here instead of re-run."""
    observations: set[int] = field(default_factory=set)
    """Hashes of observation texts so far: a turn that adds none is a stale turn."""
    stale_turns: int = 0
    read_windows: dict[str, tuple[str, int]] = field(default_factory=dict)
    """Read call signature -> (file, last line) of the latest window it showed (for ``read_on``)."""
    read_ons: int = 0
    last_hits: bool = False
    """Last turn's search showed matching lines."""
    repeated_tools: set[str] = field(default_factory=set)
    """Tools whose call last turn repeated an earlier one: not offered this turn."""
    seen: list[Span] = field(default_factory=list)
    absent: bool = False
    """The absence check answered "no": the final answer cites nothing."""
    cite_choices: list[str] | None = None
    """With ``cite_margin``: the citable lines the final prompt listed, the only ones it may cite."""
    seen_groups: list[list[Span]] = field(default_factory=list)
    """``seen``, one list per observation, oldest first (what to offer as citable, newest first)."""
    lock: threading.Lock = field(default_factory=threading.Lock)
    grounded: float | None = None
    seen_ratio: float | None = None
    counts_exact: bool = True

    @property
    def usage(self) -> Usage:
        return self.budget.used
