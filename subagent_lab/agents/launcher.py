"""The launcher: starts a child in the sandbox its profile defines and returns one result value.

``launch`` raises only for caller mistakes (an unknown profile, bad overrides). Everything that
can go wrong at run time, a workspace that vanished, a trace directory that is a file, a harness
bug, ends as a failed ``SubagentResult`` whose ``terminal_reason`` and ``detail`` say what.
"""

from __future__ import annotations

import contextlib
import dataclasses
import threading
import time
import traceback
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field, ValidationError

from subagent_lab.agents.launch_io import (
    GuardedTrace,
    plain_json,
    render_task,
    task_files,
    workspace_overview,
)
from subagent_lab.agents.result import RunResult
from subagent_lab.config.agent_profile import AgentProfile
from subagent_lab.config.profiles import LabConfig, ModelConfig, RuntimeProfile
from subagent_lab.core.loop import LoopDeps, LoopOutcome, LoopSpec, run_loop
from subagent_lab.core.model import Model
from subagent_lab.core.permissions import PermissionGate
from subagent_lab.core.trace import (
    Redactor,
    RunEnded,
    RunStarted,
    SubagentEvent,
    TraceWriter,
    new_id,
    to_json,
)
from subagent_lab.core.types import ConfigError, Message, ModelChoice, Span, TerminalReason, Usage
from subagent_lab.local_models import factory
from subagent_lab.local_models.factory import ModelFactory
from subagent_lab.tools.registry import build_tools
from subagent_lab.tools.search_words import task_search_words
from subagent_lab.tools.simple import ObservationLimits
from subagent_lab.workspace.sandbox import Workspace

__all__ = [  # workspace_overview and render_task live in launch_io; imported from here by callers
    "ModelFactory", "ParentLink", "SubagentLauncher", "SubagentRequest", "SubagentResult", "cost_usd",
    "loop_spec", "render_task", "workspace_overview",
]  # fmt: skip


class SubagentRequest(BaseModel):
    """What the parent asks for."""

    task: str = Field(min_length=1)
    profile: str = "explore"
    context: dict[Any, Any] | None = None
    """Structured context from the parent (earlier findings, file hints), rendered into the prompt
    as JSON; keys and values that JSON cannot hold are rendered as text."""
    model: ModelChoice | None = None
    """Overrides the profile's model choice."""
    overrides: dict[str, Any] = Field(default_factory=dict)
    """Profile field overrides (e.g. ``max_steps``), validated like the YAML."""
    seed: int | None = None
    """Replaces the model's sampling seed for this run (independent sweep repeats); None keeps it."""
    temperature: float | None = Field(default=None, ge=0.0, le=2.0)
    """Replaces the model's temperature for this run; None keeps the model's."""
    rerun_of: str | None = None
    """Trace of the run this request re-runs (``subagent_lab.api.runs.rerun``); recorded in the new trace."""


class ParentLink(BaseModel):
    """Who launched the child; written into the child's trace so traces link both ways."""

    session_id: str
    run_id: str
    trace_path: str | None = None


class SubagentResult(RunResult):
    """Everything about one child run (``RunResult``), with the model it asked for and how it was
    sampled. ``launch`` returns this for every runtime outcome.
    """

    model_choice: ModelChoice
    model_used: ModelChoice
    seed: int | None = None
    """The sampling seed every model call of the run was sent with."""
    temperature: float = 0.0
    """The sampling temperature every model call of the run was sent with."""
    trace_error: str | None = None
    """Why the trace is missing or incomplete; None when every event was written."""
    rerun_of: str | None = None
    """Trace of the run this one re-ran; None for a fresh run."""

    @property
    def summary(self) -> str:
        """The text the parent's model reads."""
        if self.contract and isinstance(self.contract.get("summary"), str):
            return str(self.contract["summary"])
        if self.contract and "verdict" in self.contract:
            return f"{self.contract['verdict']}: " + "; ".join(self.contract.get("reasons", []))
        return f"Sub-agent ended without a result ({self.terminal_reason}): {self.detail[:300]}"


_RENAMED: dict[str, str] = {
    "max_repairs": "max_contract_repairs",
    "require_grounded": "require_grounded_evidence",
}
"""LoopSpec field -> the child profile's name for it (a parent profile uses the LoopSpec name)."""


def loop_spec(
    profile: RuntimeProfile | AgentProfile,
    model: ModelConfig,
    *,
    seed: int | None = None,
    temperature: float | None = None,
) -> LoopSpec:
    """The loop limits a profile (a child's or a parent's) and its model imply: the one spec builder.

    Every ``LoopSpec`` field the profile holds (by the same name, or its name in ``_RENAMED``) is
    taken from the profile, so a field added to both can never be dropped for one kind of agent.
    The output cap falls back to the model's; ``seed`` and ``temperature`` replace the model's
    when given (a sweep's independent repeats). A parent has no contract.
    """
    held = type(profile).model_fields
    values: dict[str, Any] = {"contract": None}
    for f in dataclasses.fields(LoopSpec):
        for name in (f.name, _RENAMED.get(f.name, f.name)):
            if name in held:
                values[f.name] = getattr(profile, name)
                break
    values["max_output_tokens"] = profile.max_output_tokens or model.max_output_tokens
    values["temperature"] = model.temperature if temperature is None else temperature
    values["seed"] = model.seed if seed is None else seed
    return LoopSpec(**values)


def cost_usd(usage: Usage, model: ModelConfig) -> float:
    return (
        usage.prompt_tokens * model.price_per_mtok_input
        + usage.completion_tokens * model.price_per_mtok_output
    ) / 1e6


class SubagentLauncher:
    """Launches children of any read-only profile against one workspace."""

    def __init__(
        self,
        config: LabConfig,
        workspace: str | Path,
        *,
        model_factory: ModelFactory | None = None,
        trace_dir: str | Path | None = None,
        session_id: str | None = None,
        parent: ParentLink | None = None,
        parent_trace: TraceWriter | None = None,
    ) -> None:
        self.config = config
        self.workspace = Workspace(Path(workspace))
        self.model_factory = model_factory or factory.default_model_factory(config)
        self.trace_dir = Path(trace_dir) if trace_dir else config.trace_root()
        self.session_id = session_id or new_id("session")
        self.parent = parent
        self.parent_trace = parent_trace
        self._models: dict[ModelChoice, Model] = {}
        self._lock = threading.Lock()

    def resolve_profile(self, request: SubagentRequest) -> RuntimeProfile:
        """The profile as the request runs it: its per-model tuning for the model that will run
        (``model_overrides``), then the request's overrides (ConfigError on a bad override)."""
        profile = self.config.profile(request.profile)
        choice = request.model or request.overrides.get("model") or profile.model
        tuned = profile.model_overrides.get(self.config.resolve_model(choice)[0], {})
        if not request.overrides and not tuned:
            return profile
        try:
            return RuntimeProfile.model_validate({**profile.model_dump(), **tuned, **request.overrides})
        except ValidationError as exc:
            problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
            raise ConfigError(f"overrides for profile {request.profile!r}: {problems}") from None

    def _redactor(self) -> Redactor:
        """Masks secrets, including every configured model's key whatever its variable is called."""
        return self.config.redactor()

    def _model(self, choice: ModelChoice, cfg: ModelConfig) -> Model:
        with self._lock:
            if choice not in self._models:
                self._models[choice] = self.model_factory(choice, cfg)
            return self._models[choice]

    def launch(self, request: SubagentRequest, *, cancel: threading.Event | None = None) -> SubagentResult:
        """Run one child to its end and return its result.

        Raises only for caller mistakes (ConfigError: unknown profile, bad overrides). A runtime
        problem is a failed result: a missing or unreadable workspace or a trace that cannot be
        opened (``crashed``, nothing run), a model that cannot be set up (``model_error``), a
        trace that fails mid-run (the run's own outcome, with ``trace_error`` set).
        """
        profile = self.resolve_profile(request)
        choice: ModelChoice = request.model or profile.model
        used, model_cfg, fallback = self.config.resolve_model(choice)
        spec = loop_spec(profile, model_cfg, seed=request.seed, temperature=request.temperature)
        run_id = new_id("run")
        trace_path = self.trace_dir / self.session_id / f"{profile.name}-{run_id}.jsonl"
        redactor = self._redactor()
        link: dict[str, Any] = {"run_id": run_id, "session_id": self.session_id, "profile": profile.name}
        self._parent_event("subagent_requested", request, run_id, trace_path, model_choice=choice)
        started = time.monotonic()
        trace_error: str | None = None
        try:
            trace = GuardedTrace(trace_path, run_id, redactor=redactor)
        except OSError as exc:  # a file where the directory should be, no permission, a full disk
            trace_error = f"cannot write the trace {trace_path}: {type(exc).__name__}: {exc}"
            outcome = _failed("crashed", f"{trace_error}; the child was not started", started)
        else:
            try:
                models = (choice, used, model_cfg, fallback)
                outcome = self._run(request, profile, spec, models, trace, cancel)
            except Exception as exc:  # a harness bug outside the loop: recorded, never raised
                detail = "".join(traceback.format_exception(exc))[-4000:]
                outcome = _failed("crashed", detail, started)
                if not trace.ended:
                    trace.emit(RunEnded(run_id=run_id, step=outcome.steps, **outcome.ended_fields()))
            finally:
                trace.close()
            trace_error = trace.error
        if trace_error is not None and outcome.terminal_reason != "crashed":
            detail = f"{outcome.detail} [trace incomplete: {trace_error}]"
            outcome = outcome.model_copy(update={"detail": detail})
        result = SubagentResult(
            **link,
            **outcome.model_dump(),
            model_choice=choice,
            model_used=used,
            model_id=model_cfg.model,
            fallback=fallback,
            cost_usd=cost_usd(outcome.usage, model_cfg),
            seed=spec.seed,
            temperature=spec.temperature,
            trace_path=str(trace_path),
            trace_error=trace_error,
            rerun_of=request.rerun_of,
        )
        # The result goes to the parent's model, to sweep tables and to logs: no keys in it either
        # (an endpoint may echo the Authorization header in an error that becomes the detail).
        result = SubagentResult.model_validate_json(redactor(to_json(result)))
        kind = "subagent_failed" if result.status == "failed" else "subagent_completed"
        self._parent_event(kind, request, run_id, trace_path, result=result)
        return result

    def _run(
        self,
        request: SubagentRequest,
        profile: RuntimeProfile,
        spec: LoopSpec,
        models: tuple[ModelChoice, ModelChoice, ModelConfig, bool],
        trace: GuardedTrace,
        cancel: threading.Event | None,
    ) -> LoopOutcome:
        """Start the trace, check the workspace, set up the model, run the loop."""
        choice, used, model_cfg, fallback = models
        started = time.monotonic()
        try:
            layout = workspace_overview(self.workspace)  # also proves the workspace is readable
            overview: str | None = layout if profile.show_layout else None
            problem = None
        except OSError as exc:  # removed or made unreadable since the launcher was created
            overview = None
            problem = f"workspace {self.workspace.root} is unavailable: {type(exc).__name__}: {exc}"
        named = task_files(self.workspace, request.task) if profile.task_paths and problem is None else []
        system_prompt = profile.system_prompt
        task = render_task(request.task, request.context, overview, named)
        trace.emit(
            RunStarted(
                run_id=trace.run_id,
                session_id=self.session_id,
                profile=profile.name,
                parent_run_id=self.parent.run_id if self.parent else None,
                parent_session_id=self.parent.session_id if self.parent else None,
                parent_trace=self.parent.trace_path if self.parent else None,
                contract=profile.contract,
                model_choice=choice,
                model_used=used,
                model_id=model_cfg.model,
                endpoint=self.config.endpoint_url(model_cfg),
                fallback=fallback,
                tools=list(profile.tools),
                workspace=str(self.workspace.root),
                system_prompt=system_prompt,
                task=task,
                budgets={
                    "max_steps": profile.max_steps,
                    "context_token_budget": profile.context_token_budget,
                    "total_token_budget": profile.total_token_budget,
                    "timeout_s": profile.timeout_s,
                },
                # What a re-run needs to start exactly like this run (subagent_lab.api.runs.rerun).
                request_task=request.task,
                request_context=plain_json(request.context) if request.context else None,
                overrides=plain_json(request.overrides),
                profile_fields=plain_json(
                    profile.model_dump(exclude={"name", "description", "system_prompt"})
                ),
                seed=spec.seed,
                temperature=spec.temperature,
                rerun_of=request.rerun_of,
            )
        )
        self._parent_event(
            "subagent_started", request, trace.run_id, trace.path, model_choice=choice, model_used=used
        )
        if problem is not None:
            outcome = _failed("crashed", f"{problem}; the child was not started", started)
            trace.emit(RunEnded(run_id=trace.run_id, step=0, **outcome.ended_fields()))
            return outcome
        try:
            model = self._model(used, model_cfg)
        except Exception as exc:  # the endpoint could not be set up: a model error, not a crash
            outcome = _failed("model_error", f"model setup failed: {exc}", started)
            trace.emit(RunEnded(run_id=trace.run_id, step=0, **outcome.ended_fields()))
            return outcome
        deps = LoopDeps(
            model=model,
            tools=build_tools(
                profile.tools,
                profile.tool_interface,
                ObservationLimits(
                    grep_max_matches=profile.grep_max_matches,
                    read_window=profile.read_window,
                    glob_max_results=profile.glob_max_results,
                    read_outline=profile.read_outline,
                ),
            ),
            gate=PermissionGate(mode="readonly_subagent", allowlist=frozenset(profile.tools)),
            tool_context=self.workspace,
            workspace_root=self.workspace.root,
            trace=trace,
            cancel=cancel,
            shown=[Span(path) for path in named],
            search_words=tuple(task_search_words(self.workspace, request.task, profile.first_search)),
        )
        messages = [Message(role="system", content=system_prompt), Message(role="user", content=task)]
        return run_loop(spec, deps, messages)

    def _parent_event(
        self,
        kind: Any,
        request: SubagentRequest,
        run_id: str,
        trace_path: Path,
        *,
        model_choice: ModelChoice | None = None,
        model_used: ModelChoice | None = None,
        result: SubagentResult | None = None,
    ) -> None:
        if self.parent_trace is None:
            return
        extra: dict[str, Any] = {}
        if result is not None:
            extra = dict(
                terminal_reason=result.terminal_reason,
                status=result.status,
                usage=result.usage,
                tool_usage=result.tool_usage,
                elapsed_s=result.elapsed_s,
                error=result.detail if result.status == "failed" else None,
            )
        # The parent's trace is the parent's to guard; failing to note a child never loses the child.
        with contextlib.suppress(OSError, ValueError):
            self.parent_trace.emit(
                SubagentEvent(
                    kind=kind,
                    run_id=self.parent_trace.run_id,
                    child_run_id=run_id,
                    child_session_id=self.session_id,
                    child_trace=str(trace_path),
                    profile=request.profile,
                    model_choice=result.model_choice if result else model_choice,
                    model_used=result.model_used if result else model_used,
                    **extra,
                )
            )


def _failed(reason: TerminalReason, detail: str, started: float) -> LoopOutcome:
    """The outcome of a run that never reached (or never left) the loop."""
    return LoopOutcome(
        terminal_reason=reason, status="failed", detail=detail, elapsed_s=time.monotonic() - started
    )
