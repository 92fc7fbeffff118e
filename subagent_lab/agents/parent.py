"""The main agent: the parent that reads, edits a scratch copy, runs safe commands and delegates.

It runs the same ``run_loop`` as a child, with Read/Grep/Glob, Edit, Bash and Task, under the
``main_agent`` permission mode and the budgets of the ``agents.main`` profile. Children are
launched through a ``SubagentLauncher`` bound to the parent, so parent and child traces link both
ways. With verification on, the loop's review hook (``agents.verify.Verifier``) checks each
accepted answer with the ``verification`` profile; a FAIL or PARTIAL verdict is fed back and the
loop starts another attempt on the conversation so far, under what is left of the same global
budgets less the verification children's spend. Only a verdict of a verification child that ended
``completed`` counts; anything else (no verdict, or one given in a grace turn after a limit) is
UNVERIFIED, which does not pass unless the profile sets ``accept_unverified``.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from pathlib import Path

from subagent_lab.agents.launcher import ModelFactory, SubagentLauncher
from subagent_lab.agents.main_tools import MainToolContext, main_tools
from subagent_lab.agents.plan import ParentLink, RunPlan, SubagentRequest, children_scope, plan_main
from subagent_lab.agents.result import (
    MainRunResult,
    child_record,
    cost_usd,
    roll_up,
    served_identity,
    unwrap_answer,
)
from subagent_lab.agents.task_tool import (
    ContextMode,
    ConversationRecorder,
    SwapChooser,
    TaskContext,
    TaskEnvelope,
)
from subagent_lab.agents.verify import Verifier
from subagent_lab.config.agent_profile import AgentProfile
from subagent_lab.config.profiles import LabConfig
from subagent_lab.core.loop import LoopOutcome, run_loop
from subagent_lab.core.model import Model
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
            self.profile = AgentProfile.default()
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

    def plan(
        self, task_text: str, workspace: Workspace, sandbox: BashSandbox | None = None
    ) -> RunPlan[AgentProfile]:
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
        # Guarded like a child's: a trace that fails mid-run is recorded in the result, never raised.
        trace = TraceWriter(plan.trace_path, plan.run_id, redactor=redactor, guarded=True)
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
        verifier = None
        if self.verify:
            verifier = Verifier(
                ctx.task, plan.task, self.profile.max_verification_retries, self.profile.accept_unverified
            )
        run = _Running(plan, trace, ctx, scratch, started, cancel, verifier)
        try:
            if plan.started is not None:  # always set for a parent
                trace.emit(plan.started)
            result = self._result(run, self._loop(run))
            # masked like the trace: its strings, never the JSON text
            result = MainRunResult.model_validate_json(redactor.json_line(to_json(result)))
            trace.emit(RunEnded(run_id=plan.run_id, step=result.steps, **result.ended_fields()))
        finally:
            trace.close()
        if trace.error is not None:
            detail = f"{result.detail} [trace incomplete: {trace.error}]"
            result = result.model_copy(update={"trace_error": trace.error, "detail": detail})
        return result

    def _sandbox(self) -> BashSandbox:
        return BashSandbox(self.profile.bash_sandbox, self.profile.bash_ro_paths, hide=(str(self.target),))

    def _tool_context(
        self,
        plan: RunPlan[AgentProfile],
        launcher: SubagentLauncher,
        cancel: threading.Event | None,
        sandbox: BashSandbox,
    ) -> MainToolContext:
        return MainToolContext(
            workspace=plan.workspace,
            stamps=ReadStamps(),
            task=TaskContext(
                launcher=launcher,
                # one tree: the parent's own calls and its children under one cost cap
                children=children_scope(plan, self.children_token_cap),
                cancel=cancel,
                context_mode=self.context_mode,
                child_model=self.child_model,
                swap_for=self.child_swap,
            ),
            ask_policy=self.ask_policy,
            bash_timeout_s=self.profile.bash_timeout_s,
            bash_sandbox=sandbox,
        )

    def _loop(self, run: _Running) -> LoopOutcome:
        """The loop on the plan's first messages (after forced delegation's envelope, if on), with
        verification as its review of each answer."""
        model = self._model(run)
        if isinstance(model, LoopOutcome):
            return model
        messages = list(run.plan.messages)
        if self.forced_delegation:
            messages.append(self._forced(run))
        deps = run.plan.deps(
            model, run.trace, run.ctx, run.cancel, review=run.verifier, emit_run_ended=False
        )  # the run's one RunEnded, rolled up with its children, is written by ``run``
        return run_loop(run.plan.spec, deps, messages)

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

    def _result(self, run: _Running, outcome: LoopOutcome) -> MainRunResult:
        ctx, plan, scratch = run.ctx, run.plan, run.scratch
        verifier = run.verifier
        checks = verifier.checks if verifier is not None else []
        merged = outcome.model_dump(exclude={"elapsed_s", "messages"})
        answer = verifier.answer if verifier is not None else None
        if outcome.contract is not None:
            answer = unwrap_answer(str(outcome.contract.get("answer", "")))
        verdict = checks[-1][0].verdict if checks else None
        if merged["contract"] is None and answer is not None:
            # A retry ended without an answer: the last answer given still stands, partially.
            merged.update(contract={"answer": answer}, status="partial")
        if verifier is not None and checks and not verifier.passes(checks[-1][0]) and merged["contract"]:
            why = "; ".join(checks[-1][0].reasons)
            merged.update(
                status="partial", detail=f"verification {verdict} after {len(checks)} checks: {why}"
            )
        children = [child_record(r, "task") for r in ctx.task.results]
        children += [child_record(c, "verification") for _, c in checks if c is not None]
        model_id, fallback = served_identity(
            plan.model.config.model, plan.model.fallback, outcome.served_model_ids, outcome.terminal_reason
        )
        return MainRunResult(
            **merged,
            **roll_up(plan.model.used, outcome.usage, cost_usd(outcome.usage, plan.model.config), children),
            elapsed_s=time.monotonic() - run.started,
            run_id=plan.run_id,
            session_id=self.session_id,
            task=plan.task,
            answer=answer,
            model_used=plan.model.used,
            model_id=model_id,
            fallback=fallback,
            children=children,
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

    plan: RunPlan[AgentProfile]
    trace: TraceWriter
    ctx: MainToolContext
    scratch: ScratchCopy | None
    started: float
    cancel: threading.Event | None
    verifier: Verifier | None
    """The loop's review of each answer (verification on), holding the checks made."""


FORCED_LEAD = (
    "The harness sent your task, word for word, to an explore sub-agent. Its report follows; answer "
    "the task from it (cite its path:line evidence):"
)
