"""The loop's value types: its limits (``LoopSpec``), what it talks to (``LoopDeps``), its mutable
per-run state, and its one return type (``LoopOutcome``)."""

from __future__ import annotations

import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from subagent_lab.context import ContextMeter
from subagent_lab.models.base import Model
from subagent_lab.permissions import PermissionGate
from subagent_lab.tools.base import Tool
from subagent_lab.trace import TraceWriter
from subagent_lab.types import Message, RunStatus, TerminalReason, Usage


@dataclass(frozen=True)
class LoopSpec:
    """Limits and rules of one run (built from a profile and its model)."""

    max_steps: int
    context_token_budget: int
    total_token_budget: int
    timeout_s: float
    contract: str | None
    max_output_tokens: int = 1024
    max_repairs: int = 2
    require_grounded: bool = False
    max_tool_calls_per_step: int = 4
    loop_repeat_limit: int = 3
    grace_turn: bool = True
    temperature: float = 0.0
    seed: int | None = 0
    max_parallel_tools: int = 4
    min_tool_calls: int = 0
    """Executed tool calls required before a final answer is accepted (grounds small models)."""


@dataclass
class LoopDeps:
    """What the loop talks to."""

    model: Model
    tools: dict[str, Tool]
    gate: PermissionGate
    tool_context: Any
    workspace_root: Path
    trace: TraceWriter
    cancel: threading.Event | None = None


class LoopOutcome(BaseModel):
    """How a run ended and what it used; the loop's only return type."""

    terminal_reason: TerminalReason
    status: RunStatus
    detail: str = ""
    contract: dict[str, Any] | None = None
    usage: Usage = Field(default_factory=Usage)
    usage_by_call: list[Usage] = Field(default_factory=list)
    tool_usage: dict[str, dict[str, int]] = Field(default_factory=dict)
    steps: int = 0
    model_calls: int = 0
    repairs_used: int = 0
    grace_used: bool = False
    elapsed_s: float = 0.0
    model_time_s: float = 0.0
    grounded_ratio: float | None = None


@dataclass
class RunState:
    messages: list[Message]
    started: float = field(default_factory=time.monotonic)
    usage: Usage = field(default_factory=Usage)
    usage_by_call: list[Usage] = field(default_factory=list)
    steps: int = 0
    repairs: int = 0
    grace_used: bool = False
    model_time_s: float = 0.0
    tool_usage: dict[str, Counter[str]] = field(default_factory=dict)
    signatures: Counter[str] = field(default_factory=Counter)
    lock: threading.Lock = field(default_factory=threading.Lock)
    meter: ContextMeter = field(default_factory=ContextMeter)
    grounded: float | None = None
