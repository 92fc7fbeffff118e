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

from subagent_lab.agents.plan import ModelUse, ParentLink, RunPlan, SubagentRequest, plan_run, resolve_profile
from subagent_lab.agents.result import SubagentResult, cost_usd, served_identity
from subagent_lab.config.profiles import LabConfig, ModelConfig, RuntimeProfile
from subagent_lab.core.loop import LoopOutcome, run_loop
from subagent_lab.core.model import Model
from subagent_lab.core.policy import policy_names
from subagent_lab.core.trace import RunEnded, SubagentEvent, TraceWriter, new_id, to_json
from subagent_lab.core.types import ModelChoice, TerminalReason
from subagent_lab.local_models import factory
from subagent_lab.local_models.factory import ModelFactory
from subagent_lab.scaffold.retrieval_start import candidates_of_trace, scores_of_trace
from subagent_lab.workspace.sandbox import Workspace

__all__ = [
    "ModelFactory",
    "ModelUse",
    "ParentLink",
    "SubagentLauncher",
    "SubagentRequest",
    "SubagentResult",
    "cost_usd",
]


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
        """The profile as the request runs it (``plan.resolve_profile``)."""
        return resolve_profile(self.config, request)

    def _model(self, choice: ModelChoice, cfg: ModelConfig) -> Model:
        with self._lock:
            if choice not in self._models:
                self._models[choice] = self.model_factory(choice, cfg)
            return self._models[choice]

    def launch(self, request: SubagentRequest, *, cancel: threading.Event | None = None) -> SubagentResult:
        """Run one child to its end and return its result: plan, open the trace, run the loop,
        build the result.

        Raises only for caller mistakes (ConfigError: unknown profile, bad overrides). A runtime
        problem is a failed result: a missing or unreadable workspace or a trace that cannot be
        opened (``crashed``, nothing run), a model that cannot be set up (``model_error``), a
        trace that fails mid-run (the run's own outcome, with ``trace_error`` set).
        """
        plan = plan_run(
            self.config, request, self.workspace, session_id=self.session_id, trace_dir=self.trace_dir,
            parent=self.parent,
        )  # fmt: skip
        self._parent_event("subagent_requested", request, plan, model_choice=plan.model.choice)
        started = time.monotonic()
        trace_error: str | None = None
        try:
            trace = TraceWriter(plan.trace_path, plan.run_id, redactor=self.config.redactor(), guarded=True)
        except OSError as exc:  # a file where the directory should be, no permission, a full disk
            trace_error = f"cannot write the trace {plan.trace_path}: {type(exc).__name__}: {exc}"
            outcome = _failed("crashed", f"{trace_error}; the child was not started", started)
        else:
            try:
                outcome = self._run(request, plan, trace, cancel)
            except Exception as exc:  # a harness bug outside the loop: recorded, never raised
                outcome = _failed("crashed", "".join(traceback.format_exception(exc))[-4000:], started)
                if not trace.ended:
                    trace.emit(RunEnded(run_id=plan.run_id, step=outcome.steps, **outcome.ended_fields()))
            finally:
                trace.close()
            trace_error = trace.error
        if trace_error is not None and outcome.terminal_reason != "crashed":
            outcome = outcome.model_copy(
                update={"detail": f"{outcome.detail} [trace incomplete: {trace_error}]"}
            )
        result = self._result(request, plan, outcome, trace_error)
        kind = "subagent_failed" if result.status == "failed" else "subagent_completed"
        self._parent_event(kind, request, plan, result=result)
        return result

    def _run(
        self,
        request: SubagentRequest,
        plan: RunPlan[RuntimeProfile],
        trace: TraceWriter,
        cancel: threading.Event | None,
    ) -> LoopOutcome:
        """Start the trace, set up the model, run the loop (or fail a run that cannot start)."""
        started = time.monotonic()
        if plan.started is not None:
            trace.emit(plan.started)
        self._parent_event(
            "subagent_started", request, plan, model_choice=plan.model.choice, model_used=plan.model.used
        )
        try:
            if plan.problem is not None:
                raise _NotStarted("crashed", f"{plan.problem}; the child was not started")
            try:
                llm = self._model(plan.model.used, plan.model.config)
            except Exception as exc:  # the endpoint could not be set up: a model error, not a crash
                raise _NotStarted("model_error", f"model setup failed: {exc}") from None
        except _NotStarted as failed:
            outcome = _failed(failed.reason, failed.detail, started)
            trace.emit(RunEnded(run_id=trace.run_id, step=0, **outcome.ended_fields()))
            return outcome
        return run_loop(plan.spec, plan.deps(llm, trace, self.workspace, cancel), list(plan.messages))

    def _result(
        self,
        request: SubagentRequest,
        plan: RunPlan[RuntimeProfile],
        outcome: LoopOutcome,
        trace_error: str | None,
    ) -> SubagentResult:
        """The run's result, masked: it goes to the parent's model, to sweep tables and to logs (an
        endpoint may echo the Authorization header in an error that becomes the detail)."""
        profile, model = plan.profile, plan.model
        grammar, checked = self.config.grammar_aids(profile.scaffold, model.used)
        model_id, fallback = served_identity(
            model.config.model, model.fallback, outcome.served_model_ids, outcome.terminal_reason
        )
        starts = profile.scaffold.has("RetrievalStart") or profile.scaffold.has("RankStart")
        result = SubagentResult(
            run_id=plan.run_id,
            session_id=self.session_id,
            profile=profile.name,
            **outcome.model_dump(),
            model_choice=model.choice,
            model_used=model.used,
            # The model that answered; a fallback also when the endpoint served another model than
            # asked and the profile let the run go on with it (a ``model_mismatch`` run stopped).
            model_id=model_id,
            fallback=fallback,
            cost_usd=cost_usd(outcome.usage, model.config),
            seed=plan.spec.sampling.seed,
            temperature=plan.spec.sampling.temperature,
            trace_path=str(plan.trace_path),
            trace_error=trace_error,
            rerun_of=request.rerun_of,
            policies=policy_names(plan.policies),
            aids_grammar=grammar,
            aids_checked=checked,
            retrieval=candidates_of_trace(plan.trace_path) if starts else [],
            candidate_scores=scores_of_trace(plan.trace_path) if starts else {},
        )
        return SubagentResult.model_validate_json(self.config.redactor().json_line(to_json(result)))

    def _parent_event(
        self,
        kind: Any,
        request: SubagentRequest,
        plan: RunPlan[RuntimeProfile],
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
                    child_run_id=plan.run_id,
                    child_session_id=self.session_id,
                    child_trace=str(plan.trace_path),
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
