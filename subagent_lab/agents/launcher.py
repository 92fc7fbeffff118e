"""The launcher: starts a child in the sandbox its profile defines and returns one result value.

``launch`` raises only for caller mistakes (an unknown profile, bad overrides). Everything that
can go wrong at run time, a workspace that vanished, a trace directory that is a file, a harness
bug, ends as a failed ``SubagentResult`` whose ``terminal_reason`` and ``detail`` say what.
"""

from __future__ import annotations

import contextlib
import threading
import time
import traceback
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from subagent_lab.agents.launch_io import (
    GuardedTrace,
    ModelUse,
    fork_prefix,
    plain_json,
    render_task,
    run_started,
    workspace_overview,
)
from subagent_lab.agents.result import SubagentResult, cost_usd
from subagent_lab.config import build
from subagent_lab.config.agent_profile import apply_overrides
from subagent_lab.config.profiles import LabConfig, ModelConfig, RuntimeProfile
from subagent_lab.core.loop import LoopDeps, LoopOutcome, LoopSpec, run_loop
from subagent_lab.core.model import Model, same_model
from subagent_lab.core.permissions import PermissionGate
from subagent_lab.core.policy import Policy, RunContext, TaskShape, policy_names
from subagent_lab.core.trace import RunEnded, RunStarted, SubagentEvent, TraceWriter, new_id, to_json
from subagent_lab.core.types import Message, ModelChoice, Span, TerminalReason
from subagent_lab.local_models import factory
from subagent_lab.local_models.factory import ModelFactory
from subagent_lab.scaffold.retrieval_start import candidates_of_trace
from subagent_lab.tools.registry import build_tools
from subagent_lab.tools.simple import ObservationLimits
from subagent_lab.workspace.sandbox import Workspace

__all__ = ["ModelFactory", "ParentLink", "SubagentLauncher", "SubagentRequest", "SubagentResult", "cost_usd"]


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
    prior_messages: list[Message] = Field(default_factory=list)
    """A forked child's start: the parent's conversation so far (its system prompt left out), placed
    between the child's system prompt and its task; the oldest are dropped to fit (``fork_prefix``)."""


class ParentLink(BaseModel):
    """Who launched the child; written into the child's trace so traces link both ways."""

    session_id: str
    run_id: str
    trace_path: str | None = None


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
        (``model_overrides``), then the request's overrides (ConfigError on a bad override).

        The retrieval floor is defined by its tools: a ``retrieval`` run also holds Find, Refs,
        Outline and Search (``SymbolTools``) where the preset lacks them (``models.retrieval``)."""
        profile = self.config.profile(request.profile)
        choice = request.model or request.overrides.get("model") or profile.model
        used = self.config.resolve_model(choice)[0]
        tuned = profile.model_overrides.get(used, {})
        where = f"overrides for profile {request.profile!r}"
        if request.overrides or tuned:
            profile = apply_overrides(RuntimeProfile, profile, tuned, request.overrides, where=where)
        simple = profile.scaffold.observation.tool_interface == "simple"
        if used == "retrieval" and not profile.scaffold.has("SymbolTools") and simple:
            # after the request's overrides: a preset may leave SymbolTools out
            profile = apply_overrides(RuntimeProfile, profile, {"SymbolTools": {}}, where=where)
        return profile

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
        model = ModelUse(choice, *self.config.resolve_model(choice))
        spec, policies = build.build(
            profile, model.config, seed=request.seed, temperature=request.temperature
        )
        run_id = new_id("run")
        trace_path = self.trace_dir / self.session_id / f"{profile.name}-{run_id}.jsonl"
        self._parent_event("subagent_requested", request, run_id, trace_path, model_choice=choice)
        started = time.monotonic()
        trace_error: str | None = None
        try:
            trace = GuardedTrace(trace_path, run_id, redactor=self.config.redactor())
        except OSError as exc:  # a file where the directory should be, no permission, a full disk
            trace_error = f"cannot write the trace {trace_path}: {type(exc).__name__}: {exc}"
            outcome = _failed("crashed", f"{trace_error}; the child was not started", started)
        else:
            try:
                outcome = self._run(request, profile, (spec, policies), model, trace, cancel)
            except Exception as exc:  # a harness bug outside the loop: recorded, never raised
                outcome = _failed("crashed", "".join(traceback.format_exception(exc))[-4000:], started)
                if not trace.ended:
                    trace.emit(RunEnded(run_id=run_id, step=outcome.steps, **outcome.ended_fields()))
            finally:
                trace.close()
            trace_error = trace.error
        if trace_error is not None and outcome.terminal_reason != "crashed":
            outcome = outcome.model_copy(
                update={"detail": f"{outcome.detail} [trace incomplete: {trace_error}]"}
            )
        result = self._result(
            request, profile, model, spec, policies, outcome, run_id, trace_path, trace_error
        )
        kind = "subagent_failed" if result.status == "failed" else "subagent_completed"
        self._parent_event(kind, request, run_id, trace_path, result=result)
        return result

    def _result(
        self,
        request: SubagentRequest,
        profile: RuntimeProfile,
        model: ModelUse,
        spec: LoopSpec,
        policies: tuple[Policy, ...],
        outcome: LoopOutcome,
        run_id: str,
        trace_path: Path,
        trace_error: str | None,
    ) -> SubagentResult:
        """The run's result, masked: it goes to the parent's model, to sweep tables and to logs (an
        endpoint may echo the Authorization header in an error that becomes the detail)."""
        grammar, checked = self.config.grammar_aids(profile.scaffold, model.used)
        result = SubagentResult(
            run_id=run_id,
            session_id=self.session_id,
            profile=profile.name,
            **outcome.model_dump(),
            model_choice=model.choice,
            model_used=model.used,
            model_id=model.config.model,
            # Also a fallback: the endpoint served another model than asked, and the profile allowed it.
            fallback=model.fallback
            or any(not same_model(model.config.model, s) for s in outcome.served_model_ids),
            cost_usd=cost_usd(outcome.usage, model.config),
            seed=spec.seed,
            temperature=spec.temperature,
            trace_path=str(trace_path),
            trace_error=trace_error,
            rerun_of=request.rerun_of,
            policies=policy_names(policies),
            aids_grammar=grammar,
            aids_checked=checked,
            retrieval=candidates_of_trace(trace_path) if profile.scaffold.has("RetrievalStart") else [],
        )
        return SubagentResult.model_validate_json(self.config.redactor()(to_json(result)))

    def _run(
        self,
        request: SubagentRequest,
        profile: RuntimeProfile,
        scaffold: tuple[LoopSpec, tuple[Policy, ...]],
        model: ModelUse,
        trace: GuardedTrace,
        cancel: threading.Event | None,
    ) -> LoopOutcome:
        """Start the trace, check the workspace, set up the model, run the loop."""
        spec, policies = scaffold
        started = time.monotonic()
        shape, problem = self._shape(request, profile, policies)
        task = render_task(request.task, request.context, shape.overview, shape.files, shape.sections)
        system = Message(role="system", content=profile.system_prompt)
        first = Message(role="user", content=task)
        # Trimmed before the trace starts, so that RunStarted records what the child starts from.
        prior = fork_prefix(request.prior_messages, [system, first], profile.context_token_budget)
        trace.emit(self._started(request, profile, spec, policies, model, trace.run_id, task, shape, prior))
        self._parent_event(
            "subagent_started",
            request,
            trace.run_id,
            trace.path,
            model_choice=model.choice,
            model_used=model.used,
        )
        try:
            if problem is not None:
                raise _NotStarted("crashed", f"{problem}; the child was not started")
            try:
                llm = self._model(model.used, model.config)
            except Exception as exc:  # the endpoint could not be set up: a model error, not a crash
                raise _NotStarted("model_error", f"model setup failed: {exc}") from None
        except _NotStarted as failed:
            outcome = _failed(failed.reason, failed.detail, started)
            trace.emit(RunEnded(run_id=trace.run_id, step=0, **outcome.ended_fields()))
            return outcome
        deps = self._deps(request, profile, policies, llm, trace, cancel, shape)
        deps.cost = build.cost_account(profile, model.config)
        deps.allow_model_fallback = profile.allow_model_fallback
        # An aid only a grammar enforces runs as a check on an endpoint sent no grammar.
        deps.grammar = model.config.constrain_output
        return run_loop(spec, deps, [system, *prior, first])

    def _shape(
        self, request: SubagentRequest, profile: RuntimeProfile, policies: tuple[Policy, ...]
    ) -> tuple[TaskShape, str | None]:
        """The first message's parts as the policies shape them, and why the workspace is unusable
        (None when it is fine)."""
        shape = TaskShape(task=request.task)
        try:
            shape.layout = workspace_overview(self.workspace)  # also proves the workspace is readable
        except OSError as exc:  # removed or made unreadable since the launcher was created
            return shape, f"workspace {self.workspace.root} is unavailable: {type(exc).__name__}: {exc}"
        context = RunContext(request.task, self.workspace, self.workspace.root, build.tool_names(profile))
        for policy in policies:
            policy.shape_task(context, shape)
        return shape, None

    def _started(
        self,
        request: SubagentRequest,
        profile: RuntimeProfile,
        spec: LoopSpec,
        policies: tuple[Policy, ...],
        model: ModelUse,
        run_id: str,
        task: str,
        shape: TaskShape,
        prior: list[Message],
    ) -> RunStarted:
        """The child's ``RunStarted``: also all a re-run needs to start exactly like this run
        (``subagent_lab.api.runs.rerun``), and the share of the parent's conversation (``prior``)
        a forked child starts from."""
        return run_started(
            run_id,
            profile,
            model,
            policies,
            session_id=self.session_id,
            profile=profile.name,
            parent_run_id=self.parent.run_id if self.parent else None,
            parent_session_id=self.parent.session_id if self.parent else None,
            parent_trace=self.parent.trace_path if self.parent else None,
            contract=profile.contract,
            endpoint=self.config.endpoint_url(model.config),
            tools=list(build.tool_names(profile)),
            workspace=str(self.workspace.root),
            system_prompt=profile.system_prompt,
            task=task,
            request_task=request.task,
            request_context=plain_json(request.context) if request.context else None,
            overrides=plain_json(request.overrides),
            profile_fields=plain_json(profile.model_dump(exclude={"name", "description", "system_prompt"})),
            seed=spec.seed,
            temperature=spec.temperature,
            rerun_of=request.rerun_of,
            shown=[tuple(span) for span in _shown(shape)],
            prior_messages=prior,
        )

    def _deps(
        self,
        request: SubagentRequest,
        profile: RuntimeProfile,
        policies: tuple[Policy, ...],
        llm: Model,
        trace: GuardedTrace,
        cancel: threading.Event | None,
        shape: TaskShape,
    ) -> LoopDeps:
        """What the child's loop talks to: its tools sized by the profile, its gate, its policies."""
        sizes = profile.scaffold.observation
        limits = ObservationLimits(
            grep_max_matches=sizes.grep_max_matches,
            read_window=sizes.read_window,
            glob_max_results=sizes.glob_max_results,
            read_outline=sizes.read_outline,
        )
        names = build.tool_names(profile)
        return LoopDeps(
            model=llm,
            tools=build_tools(names, sizes.tool_interface, limits),
            gate=PermissionGate(mode="readonly_subagent", allowlist=frozenset(names)),
            tool_context=self.workspace,
            workspace_root=self.workspace.root,
            trace=trace,
            cancel=cancel,
            shown=_shown(shape),
            policies=policies,
            task=request.task,
            # The task as the harness restates it (the absence check, the citation ranking): the
            # first message without its appended context (a repo map, a tool guide), whose
            # identifiers are not the task's words and, cut at a length, made a restated task junk.
            task_message=render_task(request.task, request.context, shape.overview, shape.files, []).strip(),
        )

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


class _NotStarted(Exception):
    """The child cannot start (its workspace is gone, its model cannot be set up)."""

    def __init__(self, reason: TerminalReason, detail: str) -> None:
        super().__init__(detail)
        self.reason, self.detail = reason, detail


def _failed(reason: TerminalReason, detail: str, started: float) -> LoopOutcome:
    """The outcome of a run that never reached (or never left) the loop."""
    return LoopOutcome(
        terminal_reason=reason, status="failed", detail=detail, elapsed_s=time.monotonic() - started
    )


def _shown(shape: TaskShape) -> list[Span]:
    """What the first message shows before any tool runs: the files it names, then the spans its
    sections (a repo map) list."""
    return [*(Span(path) for path in shape.files), *shape.shown]
