"""Core value types shared by every layer: messages, tool calls, usage, terminal reasons.

This module depends on nothing else in the package.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, Literal, NamedTuple

from pydantic import BaseModel, ConfigDict, Field

TerminalReason = Literal[
    "completed",
    "max_steps",
    "token_budget",
    "context_budget",
    "cost_budget",
    "timeout",
    "invalid_output",
    "model_error",
    "loop_detected",
    "cancelled",
    "crashed",
    "model_mismatch",
]
"""Why a run ended. ``crashed`` is a harness bug (an unexpected exception), kept apart from
``model_error`` so a broken tool is never blamed on the model. ``cost_budget``: the next call could pass the
run's cost cap (USD). ``model_mismatch``: the endpoint served another model than the one asked for."""

RunStatus = Literal["completed", "partial", "failed"]
ModelChoice = Literal["light", "main", "none", "retrieval"]
"""``none`` is the no-model baseline (``subagent_lab.models.baseline``) and ``retrieval`` the
retrieval floor (``subagent_lab.models.retrieval``), both configured by the harness."""
FLOOR_CHOICES: frozenset[str] = frozenset({"none", "retrieval"})
"""The model choices that run no language model (no endpoint, no server, no price): the floors."""
ToolOutcomeStatus = Literal["ok", "error", "denied"]

LIMIT_REASONS: frozenset[str] = frozenset(
    {"max_steps", "token_budget", "context_budget", "cost_budget", "loop_detected"}
)
"""Limits after which the loop grants one grace turn to collect partial findings."""


class ToolCall(BaseModel):
    """One tool invocation requested by the model."""

    model_config = ConfigDict(frozen=True)

    id: str
    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)
    raw_arguments: str | None = None
    """The argument text as the model produced it, kept when it failed to parse as JSON."""

    def signature(self) -> str:
        """A stable key identifying the call, used for loop detection."""
        import json

        return f"{self.name}:{json.dumps(self.arguments, sort_keys=True, default=str)}"


class Message(BaseModel):
    """A chat message in the provider-neutral form the loop keeps."""

    role: Literal["system", "user", "assistant", "tool"]
    content: str = ""
    tool_calls: list[ToolCall] = Field(default_factory=list)
    tool_call_id: str | None = None
    name: str | None = None
    """For ``tool`` messages: the tool's name."""


class Usage(BaseModel):
    """Token usage of one or more model calls."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0
    estimated: bool = False
    """True when at least one figure was estimated because the provider omitted ``usage``."""

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            prompt_tokens=self.prompt_tokens + other.prompt_tokens,
            completion_tokens=self.completion_tokens + other.completion_tokens,
            cached_tokens=self.cached_tokens + other.cached_tokens,
            estimated=self.estimated or other.estimated,
        )


class ModelRequest(BaseModel):
    """Everything a model needs for one completion."""

    messages: list[Message]
    tools: list[dict[str, Any]] = Field(default_factory=list)
    """OpenAI-style function schemas; empty for a turn without tools (grace, repair)."""
    final_schema: dict[str, Any] | None = None
    """JSON schema of the final answer (the contract, with this run's constraints applied)."""
    phase: Literal["act", "final"] = "act"
    """``act``: one action (a tool call or ``finish``); ``final``: the final answer, nothing else."""
    allowed_tools: list[str] | None = None
    """Act phase: the actions constrained decoding may produce this turn (None: every tool and
    ``finish``). ``tools`` stays the full list, so the prompt (and its cached prefix) is stable."""
    arg_choices: dict[str, dict[str, list[str]]] = Field(default_factory=dict)
    """Act phase: tool -> argument -> the only values decoding may produce (e.g. paths seen)."""
    thought_max_chars: int = 200
    """Act phase: the cap on the brief reasoning that precedes an action."""
    arg_max_chars: int = 160
    """Act phase: the cap on each string argument of an action."""
    text_tools: list[str] | None = None
    """Act phase: the tools a call read out of prose may name (those without side effects), and on
    the native protocol the tools a call written as text instead of a tool call may name at all.
    None: none of them (only ``finish``). The loop sets it from the tools' kinds; it derives from
    ``tools``, so ``request_digest`` leaves it out."""
    max_spent_attempts: int = 2
    """Retries the adapter may make after attempts that cost tokens (a timeout, an unusable 200):
    the loop sets what the remaining budget affords, so such retries cannot overshoot it."""
    max_tokens: int = 1024
    temperature: float = 0.0
    seed: int | None = 0
    timeout_s: float = 120.0
    top_logprobs: int = Field(default=0, ge=0, le=20)
    """Ask the endpoint for the log-probabilities of this many likeliest alternatives of each
    generated token (OpenAI ``logprobs``/``top_logprobs``); 0: none asked (a judged candidate's
    one-token yes/no asks for them, ``core.judge``)."""


class ModelResponse(BaseModel):
    """One completion, normalised."""

    text: str = ""
    tool_calls: list[ToolCall] = Field(default_factory=list)
    usage: Usage = Field(default_factory=Usage)
    finish_reason: str = "stop"
    model_id: str = ""
    """The model the endpoint reported serving (its reply's ``model``), or the adapter's own name."""
    requested_model: str = ""
    """The model id the adapter asked the endpoint for; "" when it asked for none (a scripted or
    no-model stand-in). The loop checks ``model_id`` against it (``core.model.same_model``)."""
    latency_s: float = 0.0
    attempts: int = 1
    """HTTP attempts made, retries included."""
    spent_attempts: int = 0
    """Failed attempts before this one that likely cost tokens (see ``ModelCallError``)."""
    parse_ok: bool = True
    """False when the provider's output could not be parsed into a text or an action."""
    cache_hit: bool = False
    """Served from the model-call cache (usage is what the original call spent)."""
    raw_text: str = ""
    """The reply as the endpoint sent it, where the adapter rewrote ``text`` ("" when it did not):
    an answer read out of fenced text or a tool call, or cut to its grammar (``adapted``)."""
    adapted: list[str] = Field(default_factory=list)
    """The cuts the adapter made to an answer decoded without its grammar, one note each."""
    top_logprobs: dict[str, float] | None = None
    """Where the request asked for them: the first generated token's likeliest alternatives, token
    text -> log-probability, as the endpoint returned them; None when it returned none."""


class Span(NamedTuple):
    """A location a tool observation showed the model: lines ``start..end`` of ``path``.

    ``path`` is workspace-relative, as the tool printed it (a directory keeps its trailing
    ``/``). ``start == end == 0`` means the path was shown without any of its lines (a Glob
    listing, a file name in a Grep summary).
    """

    path: str
    start: int = 0
    end: int = 0

    def covers(self, path: str, start: int, end: int | None = None) -> bool:
        """Whether lines ``start..end`` (default: just ``start``) of ``path`` lie inside this span."""
        last = start if end is None else end
        return path == self.path and self.start >= 1 and self.start <= start <= last <= self.end


class ToolOutcome(BaseModel):
    """What running (or refusing) one tool call produced; ``text`` is what the model sees."""

    status: ToolOutcomeStatus
    text: str
    truncated: bool = False
    spans: list[Span] = Field(default_factory=list)
    """The locations ``text`` shows (empty for errors and denials); see ``Span``."""


# --- termination: a small exception family, caught in one place by the loop ---------------


class Stop(Exception):
    """Ends a run. Raised inside a step, caught only by the loop, turned into a value."""

    reason: TerminalReason = "completed"

    def __init__(self, detail: str = "") -> None:
        super().__init__(detail)
        self.detail = detail


class Finished(Stop):
    """The model produced a valid contract."""

    reason: TerminalReason = "completed"

    def __init__(self, payload: dict[str, Any]) -> None:
        super().__init__("contract accepted")
        self.payload = payload


class LimitReached(Stop):
    """A budget or guard tripped; the loop may grant a grace turn."""

    def __init__(self, reason: TerminalReason, detail: str) -> None:
        super().__init__(detail)
        self.reason = reason


class ModelFailed(Stop):
    """The model endpoint failed after the allowed retries (or with a non-retryable error)."""

    reason: TerminalReason = "model_error"


class ModelMismatch(Stop):
    """The endpoint reported serving another model than the one the run asked for."""

    reason: TerminalReason = "model_mismatch"


class OutputInvalid(Stop):
    """The contract was still invalid after the allowed repairs."""

    reason: TerminalReason = "invalid_output"


class Cancelled(Stop):
    """The caller cancelled the run."""

    reason: TerminalReason = "cancelled"


class ConfigError(ValueError):
    """A configuration file or value is invalid; the message names the file and the field."""


_UNHASHED = frozenset({"timeout_s", "text_tools"})
"""Request fields left out of its digest: the timeout shrinks with the wall clock, and
``text_tools`` derives from ``tools``."""


def request_digest(request: ModelRequest) -> str:
    """SHA-256 over the whole request except its timeout (which shrinks with the wall clock): two
    requests with the same digest ask a model the same thing.

    Data nested past the serialiser's depth limit (a Python-level model's Task context 300 levels
    deep) is hashed through ``canonical_json``, which recurses on nothing: a digest, not a crash.
    A request that asks for no log-probabilities hashes as it did before the field existed.
    """
    unhashed = _UNHASHED | ({"top_logprobs"} if not request.top_logprobs else set())
    try:
        blob = json.dumps(
            request.model_dump(mode="json", exclude=set(unhashed)), sort_keys=True, ensure_ascii=False
        )
    except (ValueError, RecursionError):  # "Maximum serialization depth exceeded"
        fields = {name: getattr(request, name) for name in type(request).model_fields if name not in unhashed}
        blob = canonical_json(fields)
    # surrogatepass: a hostile server's lone surrogates reach the request as text and must hash
    return hashlib.sha256(blob.encode("utf-8", "surrogatepass")).hexdigest()


class _Literal(str):
    """Text ``canonical_json`` writes as it is (punctuation), not as a JSON string."""


def canonical_json(value: Any) -> str:
    """``json.dumps(value, sort_keys=True, ensure_ascii=False)`` for JSON-shaped data (pydantic
    models as their fields), without recursion: any depth, no ``RecursionError``. Values JSON has
    no form for are written as their ``str``."""
    out: list[str] = []
    stack: list[Any] = [value]
    while stack:
        item = stack.pop()
        if type(item) is _Literal:
            out.append(item)
            continue
        if isinstance(item, BaseModel):
            item = {name: getattr(item, name) for name in type(item).model_fields}
        if isinstance(item, dict):
            parts: list[Any] = []
            for key in sorted(item, key=str):
                parts += [_Literal(", ") if parts else _Literal("{")]
                parts += [_Literal(json.dumps(str(key), ensure_ascii=False) + ": "), item[key]]
            stack.extend(reversed([*(parts or [_Literal("{")]), _Literal("}")]))
        elif isinstance(item, (list, tuple)):
            parts = []
            for child in item:
                parts += [_Literal(", ") if parts else _Literal("["), child]
            stack.extend(reversed([*(parts or [_Literal("[")]), _Literal("]")]))
        elif item is None or isinstance(item, (str, int, float, bool)):
            out.append(json.dumps(item, ensure_ascii=False))
        else:
            out.append(json.dumps(str(item), ensure_ascii=False))
    return "".join(out)


_SCALARS = frozenset({str, int, float, bool, type(None)})
"""The types ``json_copy`` shares as they are, without a call per value (most of a schema)."""


def json_copy(value: Any) -> Any:
    """A copy of JSON-shaped data (dicts, lists, scalars) that shares nothing mutable with it:
    ``copy.deepcopy`` for such data, several times cheaper (a cached schema is copied per call)."""
    if isinstance(value, dict):
        return {k: v if type(v) in _SCALARS else json_copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [v if type(v) in _SCALARS else json_copy(v) for v in value]
    return value
