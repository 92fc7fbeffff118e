"""The one thing the loop knows about the scaffold: an ordered tuple of policies and their hooks.

A policy is one aid (``subagent_lab/scaffold/``): it narrows a turn's action menu, checks a call,
answers a repeat, observes a turn's outcomes, acts before the final answer, shapes the final prompt
and the answer's schema, checks the answer, or asks for a grace turn. Every hook is a no-op here; a
policy overrides the few it needs. The loop calls each hook on every policy in tuple order, so the
order is the precedence (``scaffold.build`` writes it once). ``for_run`` gives each run a fresh
copy, so a policy may keep per-run state on ``self`` (sweeps run launches on threads).
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Protocol

from subagent_lab.core.tool import Tool
from subagent_lab.core.types import Message, Span, Stop, ToolCall, ToolOutcome

FINISH = "finish"
"""The action that ends the working phase: the final answer follows in a call of its own."""
FINISH_SCHEMA = {
    "type": "function",
    "function": {
        "name": FINISH,
        "description": "Stop searching and write the final answer.",
        "parameters": {"type": "object", "properties": {}},
    },
}
"""``finish`` as a tool schema, offered beside the tools'."""
HARNESS_CALL = "harness-"
"""The id prefix of a tool call the harness made (``RunView.call_tools``), not the model: its
``tool_started``/``tool_finished`` events carry such ids."""


@dataclass
class ActionMenu:
    """What the grammar may produce this turn: the allowed actions and, per tool and argument,
    the only values it may take. Policies narrow ``allowed``/``choices``, never the tool list."""

    allowed: list[str]
    choices: dict[str, dict[str, list[str]]] = field(default_factory=dict)


@dataclass
class TaskShape:
    """The child's first message before it is rendered: what a policy may add to the task."""

    task: str
    """The task as the caller wrote it."""
    layout: str | None = None
    """The workspace's top-level line (``launch_io.workspace_overview``), offered, not shown."""
    overview: str | None = None
    """The layout line the first message shows (None: none)."""
    files: list[str] = field(default_factory=list)
    """Files the first message names; they count as shown before the first step."""
    sections: list[str] = field(default_factory=list)
    """Texts the first message ends with, in order (a repo map); none by default."""
    shown: list[Span] = field(default_factory=list)
    """Locations those sections show; they count as shown before the first step."""


@dataclass(frozen=True)
class RunContext:
    """What ``for_run`` and ``shape_task`` may read: the run's task and workspace."""

    task: str
    """The task as the caller wrote it."""
    tool_context: Any
    """What the tools run against (a child's ``Workspace``)."""
    workspace_root: Path
    tools: tuple[str, ...]


@dataclass(frozen=True)
class CallResult:
    """One call of a turn as the loop ran it (``observe``)."""

    call: ToolCall
    outcome: ToolOutcome
    repeated: bool
    """Answered from the record of an identical earlier call."""


@dataclass(frozen=True)
class AnswerCheck:
    """A contract-valid answer, measured: its evidence items that no file holds or no tool showed."""

    payload: dict[str, Any]
    ungrounded: list[str]
    unseen: list[str]


class RunView(Protocol):
    """A policy's window on the run: read-only facts plus three verbs."""

    @property
    def task(self) -> str:
        """The task as the caller wrote it."""
        ...

    @property
    def task_message(self) -> str:
        """The task as the model was given it, which the harness restates: the run's first user
        message (layout line and named files included) without the context sections policies
        append to it (``TaskShape.sections``: a repo map, a tool guide)."""
        ...

    @property
    def contract(self) -> str | None: ...
    @property
    def workspace_root(self) -> Path: ...
    @property
    def tools(self) -> Mapping[str, Tool]: ...
    @property
    def tool_context(self) -> Any: ...
    @property
    def steps(self) -> int: ...
    @property
    def stale_turns(self) -> int: ...
    @property
    def seen(self) -> Sequence[Span]: ...
    def executed(self, tool: str | None = None) -> int:
        """Executed calls so far, of one tool or of all."""
        ...

    def add_prompt(self, purpose: str, text: str) -> None:
        """Append a harness message to the conversation (and the trace)."""
        ...

    def ask(self, purpose: str, schema: dict[str, Any], max_tokens: int) -> str:
        """One greedy model call of the harness's own, under the run's budget; its text."""
        ...

    def judge(self, messages: list[Message], item: str, rank: int) -> float:
        """One candidate judged by the model, apart from the conversation: a one-token yes/no
        call on ``messages`` under the run's budget; its P(yes) (``core.judge``), traced."""
        ...

    def call_tools(self, calls: Sequence[ToolCall]) -> None:
        """Run tool calls of the harness's own as one turn runs a model's (the gate, the trace's
        tool events, seen spans, every policy's ``observe``); the conversation shows them as an
        assistant turn, and their ids get the ``HARNESS_CALL`` prefix."""
        ...


class Policy:
    """One aid; every hook a no-op. Subclasses are dataclasses: their fields are the parameters."""

    name: ClassVar[str] = "policy"
    needs_contract: ClassVar[bool] = False
    """Acts on the final answer's contract: left out of a run whose profile asks for none."""
    adds_tools: ClassVar[tuple[str, ...]] = ()
    """Tools the child holds with this policy, after its profile's own (a preset names a tool set)."""
    grammar_only: ClassVar[tuple[str, ...]] = ()
    """What only a grammar enforces: ``"*"`` the policy itself, else the parameters that do when
    set (an endpoint without a grammar runs them as checks, ``core.schema_check``)."""
    shared: ClassVar[dict[str, str]] = {}
    """Parameters this policy takes from another's (``param -> "Policy.param"``): set once, in that
    policy's spec (the answer's evidence settings are ``CiteFromSeen``'s)."""

    def params(self) -> dict[str, Any]:
        """The parameters a trace records: the dataclass fields set at construction (per-run state
        is declared ``init=False``)."""
        if not dataclasses.is_dataclass(self):
            return {}
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.init}

    def for_run(self, ctx: RunContext) -> Policy:
        """A fresh copy for one run: the same parameters, new state (a policy may compute what it
        needs from ``ctx`` here)."""
        return dataclasses.replace(self) if dataclasses.is_dataclass(self) else copy.copy(self)

    def shape_task(self, ctx: RunContext, shape: TaskShape) -> None:
        """Add to the child's first message (before the run starts; keeps no state)."""

    def start(self, run: RunView) -> None:
        """Act once before the first action (``run.call_tools``: calls of the harness's own)."""

    def narrow(self, run: RunView, menu: ActionMenu) -> None:
        """Narrow this turn's action menu in place."""

    def check_finish(self, run: RunView) -> str | None:
        """A prompt that turns a finish away (the turn is stale), or None to let it stand."""
        return None

    def check_call(self, run: RunView, call: ToolCall) -> str | None:
        """An error text that answers ``call`` instead of running it, or None."""
        return None

    def on_repeat(self, run: RunView, call: ToolCall, step: int) -> ToolOutcome | None:
        """Answer a repeat of the call made at ``step`` otherwise than from the record, or None."""
        return None

    def repeat_note(self, run: RunView, step: int) -> str | None:
        """The text that answers a repeat from the record (the first policy's wins), or None."""
        return None

    def observe(self, run: RunView, results: Sequence[CallResult]) -> None:
        """See a turn's calls and outcomes, in call order."""

    def before_final(self, run: RunView) -> None:
        """Act before the final answer is asked for (add a prompt, ``ask`` the model)."""

    def write_answer(self, run: RunView) -> dict[str, Any] | None:
        """The final answer the harness writes instead of asking the model (checked against the
        contract like the model's; a rejected one goes to the model as a repair), or None."""
        return None

    def final_prompt(self, run: RunView, lead: str, prompt: str) -> str:
        """The final prompt so far (``lead`` is where it began); returns it, extended or replaced."""
        return prompt

    def answer_schema(self, run: RunView, schema: dict[str, Any]) -> dict[str, Any]:
        """The final answer's schema so far; returns it (a copy when changed)."""
        return schema

    def check_answer(self, run: RunView, check: AnswerCheck) -> list[str]:
        """Errors that reject a contract-valid answer (fed back in a repair turn)."""
        return []

    def grace(self, run: RunView, stop: Stop) -> bool:
        """Whether a run ended by ``stop`` gets one final-answer call without tools."""
        return False


def policy_names(policies: Sequence[Policy]) -> list[str]:
    """The names of ``policies``, in order (what a trace or a row records)."""
    return [p.name for p in policies]


def policy_params(policies: Sequence[Policy]) -> dict[str, dict[str, Any]]:
    """Each policy's parameters, by name."""
    return {p.name: p.params() for p in policies}
