"""Re-running a recorded parent with one child changed: ``replay_parent`` (``sl.replay_parent``).

Every ``model_called`` event of a trace holds the response and the SHA-256 of the request it
answered (``request_key``). A replay builds from the parent's trace and its children's an
in-memory call record keyed by (the model choice, the request's digest), then runs the parent
again: a request identical to a recorded one, to the same model choice, is served from the record
(no call is sent); any other goes to the live model. So the parent's calls up to the swapped child
and every other child's calls are served, the swapped child runs live, and the parent goes on live
from the first request its changed result makes different. With nothing swapped every request is
identical: the run is the recorded one, with 0 live calls (``ParentReplay.live_calls``).

The swapped child is the ``child``-th Task child in the order the parent requested them (a forced
delegation's child is child 0); it is found again by its task and profile (the n-th child with the
same task), so parallel Task calls replay in any order.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from subagent_lab.agents.launcher import ModelFactory
from subagent_lab.agents.parent import MainAgent
from subagent_lab.agents.result import MainRunResult
from subagent_lab.agents.task_tool import ChildSwap, ContextMode
from subagent_lab.api.rerun import LAYOUT_PREFIX, split_rendered_task
from subagent_lab.api.runs import ConfigArg, as_choice, as_config
from subagent_lab.api.views import RunLike, trace_of
from subagent_lab.config.agent_profile import apply_overrides
from subagent_lab.config.endpoints import ModelConfig
from subagent_lab.config.profiles import LabConfig
from subagent_lab.config.runtime_profile import RuntimeProfile
from subagent_lab.core.model import Model
from subagent_lab.core.tokens import CountsPrompts
from subagent_lab.core.trace import Event, ModelCalled, PromptAdded, RunStarted, SubagentEvent, read_trace
from subagent_lab.core.types import ModelChoice, ModelRequest, ModelResponse, ToolCall, Usage, request_digest

SWAP_KEYS = ("model", "context_mode", "scaffold")
"""What a swap names besides profile fields (``max_steps``, ``total_token_budget``, ...)."""
Role = Literal["parent", "children"]


@dataclass(frozen=True)
class RecordedChild:
    """One Task child of a recorded parent, in request order."""

    index: int
    task: str
    profile: str
    model_choice: str
    trace_path: str
    context: dict[str, Any] | None = None
    forked: bool = False


@dataclass
class Tally:
    """What a replay served from the record and what it sent live, for the parent and its children."""

    served: dict[Role, int] = field(default_factory=lambda: {"parent": 0, "children": 0})
    live: dict[Role, int] = field(default_factory=lambda: {"parent": 0, "children": 0})
    live_usage: dict[Role, Usage] = field(default_factory=lambda: {"parent": Usage(), "children": Usage()})
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, role: Role, response: ModelResponse, *, served: bool) -> None:
        with self._lock:
            if served:
                self.served[role] += 1
            else:
                self.live[role] += 1
                self.live_usage[role] = self.live_usage[role] + response.usage


class CallRecord:
    """Recorded responses by (model choice, request digest); identical requests are served in the
    order they were recorded, the last one again after that (as the call cache would)."""

    def __init__(self) -> None:
        self._calls: dict[tuple[str, str], list[ModelResponse]] = {}
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return sum(len(v) for v in self._calls.values())

    def add_trace(self, events: list[Event], path: str | Path) -> None:
        """Every answered call of one run's trace (ValueError for a trace without request keys)."""
        start = next((e for e in events if isinstance(e, RunStarted)), None)
        choice = start.model_used if start else ""
        for event in (e for e in events if isinstance(e, ModelCalled)):
            if not event.request_key:
                raise ValueError(
                    f"{path}: its model calls carry no request_key (written before replay existed); "
                    "it cannot be replayed call for call"
                )
            response = ModelResponse(
                text=event.text, tool_calls=[ToolCall.model_validate(c) for c in event.tool_calls],
                usage=event.usage, finish_reason=event.finish_reason, model_id=event.model_id,
                parse_ok=event.parse_ok, cache_hit=True, latency_s=0.0, attempts=0,
                raw_text=event.raw_text, adapted=list(event.adapted), top_logprobs=event.top_logprobs,
            )  # fmt: skip
            self._calls.setdefault((choice, event.request_key), []).append(response)

    def take(self, choice: str, key: str) -> ModelResponse | None:
        with self._lock:
            queue = self._calls.get((choice, key))
            if not queue:
                return None
            response = queue.pop(0) if len(queue) > 1 else queue[0]
            return response.model_copy(deep=True)


class ReplayingModel:
    """A model choice's calls: from the record when identical to a recorded request, else live."""

    def __init__(self, choice: str, record: CallRecord, live: Model, tally: Tally, role: Role) -> None:
        self.choice, self.record, self.live, self.tally, self.role = choice, record, live, tally, role
        if isinstance(live, CountsPrompts):  # counting is no model call: the live counter, as the cache
            self.count_prompt = live.count_prompt

    def complete(self, request: ModelRequest) -> ModelResponse:
        served = self.record.take(self.choice, request_digest(request))
        response = served if served is not None else self.live.complete(request)
        self.tally.add(self.role, response, served=served is not None)
        return response


@dataclass(frozen=True)
class ParentReplay:
    """One replay of a recorded parent: its new result and what was served and sent live."""

    result: MainRunResult
    recorded_trace: str
    child: int | None
    """The swapped child's index (None: nothing swapped)."""
    swap: dict[str, Any]
    children: list[RecordedChild]
    tally: Tally

    @property
    def served_calls(self) -> int:
        return sum(self.tally.served.values())

    @property
    def live_calls(self) -> int:
        """Calls not served from the record: the replay's cache misses."""
        return sum(self.tally.live.values())

    @property
    def live_usage(self) -> Usage:
        """The tokens the live calls spent: what finding out cost."""
        return self.tally.live_usage["parent"] + self.tally.live_usage["children"]


def recorded_children(parent_trace: str | Path) -> list[RecordedChild]:
    """The Task children of the parent recorded at ``parent_trace``, in the order it requested them
    (verification children left out: the harness, not the parent, launches them)."""
    out: list[RecordedChild] = []
    for event in read_trace(parent_trace):
        if not (isinstance(event, SubagentEvent) and event.kind == "subagent_requested"):
            continue
        if event.profile == "verification" or not Path(event.child_trace).is_file():
            continue
        start = next((e for e in read_trace(event.child_trace) if isinstance(e, RunStarted)), None)
        if start is None:
            continue
        task, context = (
            (start.request_task, start.request_context)
            if start.request_task is not None
            else split_rendered_task(start.task)
        )
        out.append(RecordedChild(len(out), task, start.profile, start.model_choice, event.child_trace,
                                 context, bool(start.prior_messages)))  # fmt: skip
    return out


def _swap_of(lab: LabConfig, child: RecordedChild, swap: Mapping[str, Any]) -> ChildSwap:
    """``swap`` as a ``ChildSwap`` (ConfigError now for a field the child's profile lacks)."""
    fields = {k: v for k, v in swap.items() if k not in SWAP_KEYS}
    if swap.get("scaffold") is not None:
        fields = {**lab.scaffold(str(swap["scaffold"])).resolved(), **fields}
    where = f"replay_parent: swap of child {child.index}"
    apply_overrides(RuntimeProfile, lab.profile(child.profile), fields, where=where)
    mode = swap.get("context_mode")
    if mode is not None and mode not in ("isolated", "brief", "forked"):
        raise ValueError(f"{where}: context_mode must be isolated, brief or forked, got {mode!r}")
    model = as_choice(str(swap["model"])) if swap.get("model") is not None else None
    return ChildSwap(model=model, context_mode=mode, overrides=fields)


def _chooser(children: list[RecordedChild], index: int, swap: ChildSwap) -> Any:
    """The swap for the ``index``-th child, found by its task and profile: the n-th child asked the
    same, n as many times as children before it were."""
    target = children[index]
    nth = sum(1 for c in children[:index] if (c.task, c.profile) == (target.task, target.profile))
    seen = [0]
    lock = threading.Lock()

    def choose(task: str, profile: str) -> ChildSwap | None:
        if (task, profile) != (target.task, target.profile):
            return None
        with lock:
            seen[0] += 1
            return swap if seen[0] - 1 == nth else None

    return choose


def _agent_defaults(events: list[Event], children: list[RecordedChild]) -> dict[str, Any]:
    """The ``MainAgent`` arguments a recorded parent ran with, as far as its trace shows them: its
    children's cap, forced delegation, the children's context mode and their one model choice."""
    start = next((e for e in events if isinstance(e, RunStarted)), None)
    out: dict[str, Any] = {}
    if start is not None and "children_token_cap" in start.budgets:
        out["children_token_cap"] = int(start.budgets["children_token_cap"])
    out["forced_delegation"] = any(
        isinstance(e, PromptAdded) and e.purpose == "forced_delegation" for e in events
    )
    asked = [
        c.get("arguments", {}).get("context")
        for e in events
        if isinstance(e, ModelCalled)
        for c in e.tool_calls
        if c.get("name") == "Task"
    ]
    mode: ContextMode = "brief"
    if any(c.forked for c in children):
        mode = "forked"
    elif any(asked) and children and all(c.context is None for c in children):
        mode = "isolated"  # the parent passed context and no child got it
    out["context_mode"] = mode
    choices = {c.model_choice for c in children}
    if len(choices) == 1:  # every child on one model: hold it, whatever a live parent asks
        out["child_model"] = as_choice(choices.pop())
    return out


def _task_and_target(run: RunLike, start: RunStarted, target: str | Path | None) -> tuple[str, Path]:
    """The parent's task (before the layout line the agent adds) and the directory it ran on."""
    if isinstance(run, MainRunResult):
        return run.task, Path(target or run.target)
    text = start.task
    at = text.rfind(LAYOUT_PREFIX)
    task = text[:at] if at >= 0 else text
    return task, Path(target or start.workspace)


def replay_parent(
    run: RunLike,
    swap: Mapping[int, Mapping[str, Any]] | None = None,
    *,
    config: ConfigArg = None,
    live: ModelFactory | None = None,
    child_live: ModelFactory | None = None,
    target: str | Path | None = None,
    **agent: Any,
) -> ParentReplay:
    """Run a recorded parent again with (at most) one child changed, the rest served from its record.

    Args:
        run: The recorded parent: its ``MainRunResult``, trace path or study row.
        swap: ``{child_index: {...}}`` for at most one child: ``model`` (``light``, ``main``,
            ``none``, ``retrieval``), ``context_mode``, ``scaffold`` (a preset's name) and profile
            fields (``max_steps``, ``total_token_budget``, ...). None or ``{}``: nothing swapped.
        config: The configuration the run ran with (the delegation study's ``study_config``): the
            same prompts and budgets make the same requests.
        live: The parent's model factory for calls the record does not hold (default: the
            configuration's models). It is also asked for the prompt counter.
        child_live: The children's (default: ``live``).
        target: The directory the parent ran on (default: the result's ``target``, else the
            trace's workspace).
        **agent: ``MainAgent`` arguments that differ from what the trace shows (``scratch``,
            ``verify``, ``profile``, ``child_model``, ``context_mode``, ...).

    Raises ValueError for a trace without request keys, an unknown child index or two swaps.
    """
    path = trace_of(run)
    events = read_trace(path)
    start = next((e for e in events if isinstance(e, RunStarted)), None)
    if start is None:
        raise ValueError(f"{path}: no run_started event; this is not a run trace")
    lab = as_config(config)
    children = recorded_children(path)
    swaps = dict(swap or {})
    if len(swaps) > 1:
        raise ValueError(f"replay_parent swaps one child at a time, got {sorted(swaps)}")
    record = CallRecord()
    record.add_trace(events, path)
    for child_path in _all_children(events):
        record.add_trace(read_trace(child_path), child_path)
    chosen: ChildSwap | None = None
    index = next(iter(swaps), None)
    if index is not None:
        if not 0 <= index < len(children):
            raise ValueError(f"{path}: no child {index}; the parent requested {len(children)} Task children")
        chosen = _swap_of(lab, children[index], swaps[index])
    tally = Tally()
    parent_live = live or _default_factory(lab)
    kids_live = child_live or parent_live

    def parents(choice: ModelChoice, cfg: ModelConfig) -> Model:
        return ReplayingModel(choice, record, parent_live(choice, cfg), tally, "parent")

    def kids(choice: ModelChoice, cfg: ModelConfig) -> Model:
        return ReplayingModel(choice, record, kids_live(choice, cfg), tally, "children")

    task, root = _task_and_target(run, start, target)
    kwargs = {**_agent_defaults(events, children), **agent}
    if chosen is not None and index is not None:
        kwargs["child_swap"] = _chooser(children, index, chosen)
    result = MainAgent(lab, root, model_factory=parents, child_model_factory=kids, **kwargs).run(task)
    return ParentReplay(result, str(path), index, dict(swaps.get(index, {})) if index is not None else {},
                        children, tally)  # fmt: skip


def _all_children(events: list[Event]) -> list[str]:
    """Every child trace a parent trace names (Task and verification children) that exists."""
    paths = [e.child_trace for e in events if isinstance(e, SubagentEvent) and e.kind == "subagent_requested"]
    return [p for p in dict.fromkeys(paths) if Path(p).is_file()]


def _default_factory(lab: LabConfig) -> ModelFactory:
    from subagent_lab.local_models.factory import default_model_factory

    return default_model_factory(lab)
