"""The main agent: the parent that reads, edits a scratch copy, runs safe commands and delegates.

It runs the same ``run_loop`` as a child, with Read/Grep/Glob, Edit, Bash and Task, under the
``main_agent`` permission mode and the budgets of the ``agents.main`` profile. Children are
launched through a ``SubagentLauncher`` bound to the parent, so parent and child traces link both
ways. With verification on, a proposed final answer is checked by the ``verification`` profile;
a FAIL or PARTIAL verdict is fed back and the loop is re-entered with the conversation so far,
under what is left of the same global budgets. Only a verdict of a verification child that ended
``completed`` counts; anything else (no verdict, or one given in a grace turn after a limit) is
UNVERIFIED, which does not pass unless the profile sets ``accept_unverified``.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, replace
from pathlib import Path

from subagent_lab.agents.launcher import ModelFactory, SubagentLauncher
from subagent_lab.agents.main_tools import MainToolContext, main_tools
from subagent_lab.agents.plan import ParentLink, RunPlan, SubagentRequest, plan_main
from subagent_lab.agents.result import (
    MainRunResult,
    SubagentResult,
    VerificationRecord,
    child_record,
    cost_usd,
    gate_passes,
    merge_outcomes,
    roll_up,
    unwrap_answer,
)
from subagent_lab.agents.task_tool import (
    ContextMode,
    ConversationRecorder,
    SwapChooser,
    TaskContext,
    TaskEnvelope,
)
from subagent_lab.agents.verify import check_claim, checked_tokens
from subagent_lab.agents.verify import feedback as verification_feedback
from subagent_lab.config.agent_profile import AgentProfile
from subagent_lab.config.profiles import LabConfig
from subagent_lab.core.budget import MIN_OUTPUT_TOKENS
from subagent_lab.core.loop import LoopOutcome, LoopSpec, run_loop
from subagent_lab.core.model import Model, same_model
from subagent_lab.core.permissions import AskPolicy
from subagent_lab.core.tool import ToolError
from subagent_lab.core.trace import PromptAdded, RunEnded, TraceWriter, new_id, to_json
from subagent_lab.core.types import ConfigError, Message, ModelChoice
from subagent_lab.local_models import factory
from subagent_lab.tools.edit import ReadStamps
from subagent_lab.workspace.bwrap import BashSandbox
from subagent_lab.workspace.sandbox import Workspace
from subagent_lab.workspace.scratch import ScratchCopy, make_scratch

__all__ = ["MainAgent", "MainRunResult"]


class MainAgent:
    """A parent agent over a target repository (a scratch copy of it by default).

    Args:
        config: The lab configuration; the agent's budgets come from ``config.agents[profile]``.
        target: The repository to work on.
        model_factory: ``(choice, model_config) -> Model`` for the parent and its children.
        scratch: Work on a temporary copy (default), so the target is never modified.
        verify: Check final answers with the verification profile (None: the profile's setting).
        children_token_cap: Tokens all Task children may spend together (None: the profile's).
        ask_policy: Bash commands that need approval run ("allow") or are refused ("deny");
            None takes the profile's. Without scratch it also gates Edit and Bash as a whole.
        profile: The ``agents:`` entry to use.
        scratch_dir: Where scratch copies are created (default: the system temp directory).
        context_mode: What a Task child starts from besides its task: ``isolated``, ``brief`` (the
            parent's structured context; the default) or ``forked`` (also the parent's
            conversation so far, cut to fit the child's context budget).
        child_model: Every child runs on this model, whatever the parent asks (None: its choice).
        child_model_factory: The children's models (None: ``model_factory``).
        forced_delegation: Before the parent's first turn the harness sends the task verbatim to one
            explore child and puts its envelope after the task: the parent only composes.
        child_swap: ``(task, profile) -> ChildSwap | None``, asked before each Task child (and the
            forced child) starts: a swap runs that child otherwise (``sl.replay_parent``).
    """

    def __init__(
        self,
        config: LabConfig,
        target: str | Path,
        *,
        model_factory: ModelFactory | None = None,
        scratch: bool = True,
        verify: bool | None = None,
        children_token_cap: int | None = None,
        ask_policy: AskPolicy | None = None,
        profile: str = "main",
        scratch_dir: str | Path | None = None,
        session_id: str | None = None,
        context_mode: ContextMode = "brief",
        child_model: ModelChoice | None = None,
        child_model_factory: ModelFactory | None = None,
        forced_delegation: bool = False,
        child_swap: SwapChooser | None = None,
    ) -> None:
        self.config = config
        self.target = Path(target).resolve()
        if not self.target.is_dir():
            raise ValueError(f"target {target} is not a directory")
        if profile in config.agents:
            self.profile = config.agents[profile]
        elif profile == "main":
            self.profile = AgentProfile()
        else:
            raise ConfigError(f"unknown agent profile {profile!r}; known: {sorted(config.agents)}")
        self.model_factory = model_factory or factory.default_model_factory(config)
        self.scratch = scratch
        self.verify = self.profile.verify if verify is None else verify
        if self.verify:
            config.profile("verification")  # ConfigError now rather than at the first final answer
        self.children_token_cap = children_token_cap or self.profile.children_token_cap
        self.ask_policy: AskPolicy = ask_policy or self.profile.ask_policy
        self.scratch_dir = scratch_dir
        self.session_id = session_id or new_id("session")
        self.trace_dir = config.trace_root()
        self.context_mode: ContextMode = context_mode
        self.child_model = child_model
        self.child_model_factory = child_model_factory or self.model_factory
        self.forced_delegation = forced_delegation
        self.child_swap = child_swap

    def system_prompt(self) -> str:
        """The profile's prompt, plus the sub-agent types Task can launch."""
        text = self.profile.resolve_system_prompt(self.config.source).rstrip()
        if "Task" in self.profile.tools:
            profiles = sorted(self.config.profiles.items())
            kinds = "\n".join(f"- {name}: {p.description}" for name, p in profiles)
            text += f"\n\nSub-agent types for Task (subagent_type):\n{kinds}"
        return text + "\n"

    @staticmethod
    def _remaining(
        base: LoopSpec, done: list[LoopOutcome], started: float, checked: int = 0
    ) -> LoopSpec | None:
        """The spec for the next segment: what is left of the global budgets (``checked``: tokens the
        verification children spent, which count against the parent's total), None if too little."""
        steps = base.max_steps - sum(o.steps for o in done)
        tokens = base.total_token_budget - sum(o.usage.total_tokens for o in done) - checked
        seconds = base.timeout_s - (time.monotonic() - started)
        if steps < 1 or tokens < MIN_OUTPUT_TOKENS or seconds <= 0:
            return None
        return replace(
            base,
            max_steps=steps,
            total_token_budget=tokens,
            context_token_budget=min(base.context_token_budget, tokens),
            timeout_s=seconds,
            max_repairs=max(0, base.max_repairs - sum(o.repairs_used for o in done)),
        )

    def plan(self, task_text: str, workspace: Workspace, sandbox: BashSandbox | None = None) -> RunPlan:
        """The run's plan on ``workspace`` (``agents.plan.plan_main``): tools, gate, first message,
        limits, policies and ``RunStarted``."""
        sandbox = sandbox or self._sandbox()
        tools = main_tools(self.profile.tools)
        # On a scratch copy writes and commands are approved at the gate (Bash still classifies
        # each command); on the real checkout the ask policy gates Edit and Bash as a whole.
        gate_policy: AskPolicy = "allow" if self.scratch else self.ask_policy
        cap = self.children_token_cap
        note = sandbox.note() if "Bash" in tools else None  # disabled or unsandboxed: said in the trace too
        return plan_main(
            self.config,
            self.profile,
            workspace,
            task=task_text,
            system_prompt=self.system_prompt(),
            tools=tools,
            ask_policy=gate_policy,
            note=note,
            session_id=self.session_id,
            trace_dir=self.trace_dir,
            budgets=None if cap is None else {"children_token_cap": cap},
        )

    def run(self, task_text: str, *, cancel: threading.Event | None = None) -> MainRunResult:
        """Run the agent on ``task_text`` until it answers (and, with verification on, is accepted):
        plan, open the trace, run the loop, build the result."""
        started = time.monotonic()
        scratch = make_scratch(self.target, self.scratch_dir) if self.scratch else None
        sandbox = self._sandbox()
        plan = self.plan(task_text, Workspace(scratch.root if scratch else self.target), sandbox)
        # One redactor for parent and children: the parent's trace masks what the children's do.
        redactor = self.config.redactor()
        trace = TraceWriter(plan.trace_path, plan.run_id, redactor=redactor)
        launcher = SubagentLauncher(
            self.config,
            plan.workspace.root,
            model_factory=self.child_model_factory,
            trace_dir=self.trace_dir,
            session_id=self.session_id,
            parent=ParentLink(
                session_id=self.session_id, run_id=plan.run_id, trace_path=str(plan.trace_path)
            ),
            parent_trace=trace,
        )
        ctx = self._tool_context(plan, launcher, cancel, sandbox)
        run = _Running(plan=plan, trace=trace, ctx=ctx, scratch=scratch, started=started, cancel=cancel)
        try:
            if plan.started is not None:  # always set for a parent
                trace.emit(plan.started)
            outcomes, checks, answer = self._segments(run)
            result = self._result(run, outcomes, checks, answer)
            result = MainRunResult.model_validate_json(redactor(to_json(result)))  # masked like the trace
            trace.emit(RunEnded(run_id=plan.run_id, step=result.steps, **result.ended_fields()))
        finally:
            trace.close()
        return result

    def _sandbox(self) -> BashSandbox:
        return BashSandbox(self.profile.bash_sandbox, self.profile.bash_ro_paths, hide=(str(self.target),))

    def _tool_context(
        self,
        plan: RunPlan,
        launcher: SubagentLauncher,
        cancel: threading.Event | None,
        sandbox: BashSandbox,
    ) -> MainToolContext:
        return MainToolContext(
            workspace=plan.workspace,
            stamps=ReadStamps(),
            task=TaskContext(
                launcher=launcher,
                children_token_cap=self.children_token_cap,
                cancel=cancel,
                cost=plan.cost,  # one account: the parent's segments and its children
                context_mode=self.context_mode,
                child_model=self.child_model,
                swap_for=self.child_swap,
            ),
            ask_policy=self.ask_policy,
            bash_timeout_s=self.profile.bash_timeout_s,
            bash_sandbox=sandbox,
        )

    def _segments(
        self, run: _Running
    ) -> tuple[list[LoopOutcome], list[tuple[VerificationRecord, SubagentResult | None]], str | None]:
        """The loop, re-entered after each verdict that names something to fix, under what is left of
        the run's budgets: (each segment's outcome, each check, the last answer)."""
        outcomes: list[LoopOutcome] = []
        checks: list[tuple[VerificationRecord, SubagentResult | None]] = []
        answer: str | None = None
        messages = list(run.plan.messages)
        model = self._model(run)
        if isinstance(model, LoopOutcome):
            return [model], checks, answer
        if self.forced_delegation:
            messages.append(self._forced(run))
        spec: LoopSpec | None = run.plan.spec
        while spec is not None:
            # Step numbers continue across segments; the run's one RunEnded is written by ``run``.
            deps = run.plan.deps(
                model,
                run.trace,
                run.ctx,
                run.cancel,
                step_offset=sum(o.steps for o in outcomes),
                emit_run_ended=False,
            )
            outcome = run_loop(spec, deps, messages)
            outcomes.append(outcome)
            if outcome.contract is not None:
                answer = unwrap_answer(str(outcome.contract.get("answer", "")))
            if not (self.verify and outcome.terminal_reason == "completed" and answer is not None):
                break
            left = run.plan.spec.total_token_budget - checked_tokens(checks)
            left -= sum(o.usage.total_tokens for o in outcomes)
            record, child = check_claim(
                run.ctx.task.launcher, run.ctx.task, run.plan.task, answer, len(checks) + 1, left
            )
            checks.append((record, child))
            retries_left = self.profile.max_verification_retries - (len(checks) - 1)
            # UNVERIFIED names nothing the parent could fix: a retry would only spend again.
            if self._passes(record) or record.verdict == "UNVERIFIED" or retries_left <= 0:
                break
            # The next segment continues the conversation under what is left of the budgets.
            spec = self._remaining(run.plan.spec, outcomes, run.started, checked_tokens(checks))
            if spec is None:
                break
            feedback = verification_feedback(record, len(checks), self.profile.max_verification_retries)
            # The outcome's conversation ends with the answer as the model wrote it.
            messages = [*outcome.messages, Message(role="user", content=feedback)]
            step = sum(o.steps for o in outcomes)
            run.trace.emit(
                PromptAdded(run_id=run.plan.run_id, step=step, purpose="verification", content=feedback)
            )
        return outcomes, checks, answer

    def _model(self, run: _Running) -> Model | LoopOutcome:
        """The parent's model (recording the conversation for forked children), or the failed
        outcome of a model that cannot be set up (a model error, not a crash)."""
        try:
            model: Model = self.model_factory(run.plan.model.used, run.plan.model.config)
        except Exception as exc:
            detail = f"model setup failed: {exc}"
            return LoopOutcome(terminal_reason="model_error", status="failed", detail=detail)
        # A forked child starts from the conversation so far (a swap may fork one child).
        if self.context_mode == "forked" or self.child_swap is not None:
            model = recorder = ConversationRecorder(model)
            run.ctx.task.conversation = lambda: list(recorder.last)
        return model

    def _forced(self, run: _Running) -> Message:
        """Forced delegation: the task, verbatim, to one explore child; its envelope as the message
        that follows the task (and a ``PromptAdded`` in the trace: the harness wrote it)."""
        request = SubagentRequest(task=run.plan.task, profile="explore", model=self.child_model)
        swap = self.child_swap(run.plan.task, "explore") if self.child_swap is not None else None
        request = swap.apply(request) if swap else request
        try:
            observation = TaskEnvelope.from_result(run.ctx.task.launch_capped(request)).observation()
        except ToolError as exc:  # the cap left too little for even one child
            observation = f"[explore sub-agent: not started] {exc}"
        text = f"{FORCED_LEAD}\n{observation}"
        run.trace.emit(PromptAdded(run_id=run.plan.run_id, step=0, purpose="forced_delegation", content=text))
        return Message(role="user", content=text)

    def _passes(self, record: VerificationRecord) -> bool:
        """Whether the gate lets the answer stand on this verdict."""
        return gate_passes(record.verdict, accept_unverified=self.profile.accept_unverified)

    def _result(
        self,
        run: _Running,
        outcomes: list[LoopOutcome],
        checks: list[tuple[VerificationRecord, SubagentResult | None]],
        answer: str | None,
    ) -> MainRunResult:
        ctx, plan, scratch = run.ctx, run.plan, run.scratch
        merged = merge_outcomes(outcomes)
        verdict = checks[-1][0].verdict if checks else None
        if merged["contract"] is None and answer is not None:
            # A retry segment ended without an answer: the last answer given still stands, partially.
            merged.update(contract={"answer": answer}, status="partial")
        if checks and not self._passes(checks[-1][0]) and merged["contract"] is not None:
            why = "; ".join(checks[-1][0].reasons)
            merged.update(
                status="partial", detail=f"verification {verdict} after {len(checks)} checks: {why}"
            )
        children = [child_record(r, "task") for r in ctx.task.results]
        children += [child_record(c, "verification") for _, c in checks if c is not None]
        return MainRunResult(
            **merged,
            **roll_up(
                plan.model.used, merged["usage"], cost_usd(merged["usage"], plan.model.config), children
            ),
            elapsed_s=time.monotonic() - run.started,
            run_id=plan.run_id,
            session_id=self.session_id,
            task=plan.task,
            answer=answer,
            model_used=plan.model.used,
            model_id=plan.model.config.model,
            fallback=plan.model.fallback
            or any(not same_model(plan.model.config.model, s) for s in merged["served_model_ids"]),
            children=children,
            segments=len(outcomes),
            verifications=[record for record, _ in checks],
            verdict=verdict,
            target=str(self.target),
            workspace=str(plan.workspace.root),
            scratch_path=str(scratch.root) if scratch else None,
            changed_files=scratch.changed_files() if scratch else [],  # from the copy's own manifest
            scratch_notes=scratch.notes if scratch else [],
            bash_sandbox=ctx.bash_sandbox.status() if "Bash" in self.profile.tools else "",
            trace_path=str(plan.trace_path),
        )


@dataclass(frozen=True)
class _Running:
    """One main-agent run once its trace is open: the plan and what the run opened around it."""

    plan: RunPlan
    trace: TraceWriter
    ctx: MainToolContext
    scratch: ScratchCopy | None
    started: float
    cancel: threading.Event | None


FORCED_LEAD = (
    "The harness sent your task, word for word, to an explore sub-agent. Its report follows; answer "
    "the task from it (cite its path:line evidence):"
)
