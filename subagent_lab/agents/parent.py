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

import json
import threading
import time
from dataclasses import dataclass, replace
from pathlib import Path

from subagent_lab.agents.launcher import (
    ModelFactory,
    ParentLink,
    SubagentLauncher,
    SubagentRequest,
    SubagentResult,
    cost_usd,
    loop_spec,
    workspace_overview,
)
from subagent_lab.agents.main_tools import MainToolContext, main_tools
from subagent_lab.agents.result import (
    MainRunResult,
    Verdict,
    VerificationRecord,
    child_record,
    gate_passes,
    merge_outcomes,
    roll_up,
)
from subagent_lab.agents.task_tool import TaskContext
from subagent_lab.config.agent_profile import AgentProfile
from subagent_lab.config.profiles import LabConfig, ModelConfig
from subagent_lab.core.budget import MIN_OUTPUT_TOKENS
from subagent_lab.core.loop import LoopDeps, LoopOutcome, LoopSpec, run_loop
from subagent_lab.core.permissions import AskPolicy, PermissionGate
from subagent_lab.core.trace import PromptAdded, RunEnded, RunStarted, TraceWriter, new_id, to_json
from subagent_lab.core.types import ConfigError, Message
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

    def system_prompt(self) -> str:
        """The profile's prompt, plus the sub-agent types Task can launch."""
        text = self.profile.resolve_system_prompt(self.config.source).rstrip()
        if "Task" in self.profile.tools:
            profiles = sorted(self.config.profiles.items())
            kinds = "\n".join(f"- {name}: {p.description}" for name, p in profiles)
            text += f"\n\nSub-agent types for Task (subagent_type):\n{kinds}"
        return text + "\n"

    def _spec(self, model: ModelConfig) -> LoopSpec:
        """The loop limits of the whole run (a retry segment gets what is left of them)."""
        return loop_spec(self.profile, model)  # the same builder as every child's

    @staticmethod
    def _remaining(base: LoopSpec, done: list[LoopOutcome], started: float) -> LoopSpec | None:
        """The spec for the next segment: what is left of the global budgets, None if too little."""
        steps = base.max_steps - sum(o.steps for o in done)
        tokens = base.total_token_budget - sum(o.usage.total_tokens for o in done)
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

    def run(self, task_text: str, *, cancel: threading.Event | None = None) -> MainRunResult:
        """Run the agent on ``task_text`` until it answers (and, with verification on, is accepted)."""
        started = time.monotonic()
        scratch = make_scratch(self.target, self.scratch_dir) if self.scratch else None
        workspace = Workspace(scratch.root if scratch else self.target)
        run_id = new_id("run")
        trace_path = self.trace_dir / self.session_id / f"main-{run_id}.jsonl"
        used, model_cfg, fallback = self.config.resolve_model(self.profile.model)
        launcher = SubagentLauncher(
            self.config,
            workspace.root,
            model_factory=self.model_factory,
            trace_dir=self.trace_dir,
            session_id=self.session_id,
            parent=ParentLink(session_id=self.session_id, run_id=run_id, trace_path=str(trace_path)),
        )
        # One redactor for parent and children: the parent's trace masks what the children's do.
        redactor = launcher._redactor()
        trace = TraceWriter(trace_path, run_id, redactor=redactor)
        launcher.parent_trace = trace
        ctx = MainToolContext(
            workspace=workspace,
            stamps=ReadStamps(),
            task=TaskContext(launcher=launcher, children_token_cap=self.children_token_cap, cancel=cancel),
            ask_policy=self.ask_policy,
            bash_timeout_s=self.profile.bash_timeout_s,
            bash_sandbox=BashSandbox(
                self.profile.bash_sandbox, self.profile.bash_ro_paths, hide=(str(self.target),)
            ),
        )
        tools = main_tools(self.profile.tools)
        # On a scratch copy writes and commands are approved at the gate (Bash still classifies
        # each command); on the real checkout the ask policy gates Edit and Bash as a whole.
        gate_policy: AskPolicy = "allow" if scratch is not None else self.ask_policy
        gate = PermissionGate(mode="main_agent", allowlist=frozenset(tools), ask_policy=gate_policy)
        system_prompt = self.system_prompt()
        budgets: dict[str, float] = {
            "max_steps": self.profile.max_steps,
            "context_token_budget": self.profile.context_token_budget,
            "total_token_budget": self.profile.total_token_budget,
            "timeout_s": self.profile.timeout_s,
        }
        if self.children_token_cap is not None:
            budgets["children_token_cap"] = self.children_token_cap
        # The same one-line layout a child gets: without it small models guess paths.
        first_message = f"{task_text.strip()}\n\n{workspace_overview(workspace)}"
        if "Bash" in tools and ctx.bash_sandbox.note():  # disabled or unsandboxed: said in the trace too
            first_message += f"\n{ctx.bash_sandbox.note()}"
        trace.emit(
            RunStarted(
                run_id=run_id,
                session_id=self.session_id,
                profile="main",
                model_choice=self.profile.model,
                model_used=used,
                model_id=model_cfg.model,
                endpoint=self.config.endpoint_url(model_cfg),
                fallback=fallback,
                budgets=budgets,
                tools=list(tools),
                workspace=str(workspace.root),
                system_prompt=system_prompt,
                task=first_message,
            )
        )
        messages = [
            Message(role="system", content=system_prompt),
            Message(role="user", content=first_message),
        ]
        outcomes: list[LoopOutcome] = []
        checks: list[tuple[VerificationRecord, SubagentResult]] = []
        answer: str | None = None
        try:
            try:
                model = self.model_factory(used, model_cfg)
            except Exception as exc:  # the endpoint could not be set up: a model error, not a crash
                detail = f"model setup failed: {exc}"
                outcomes.append(LoopOutcome(terminal_reason="model_error", status="failed", detail=detail))
            spec: LoopSpec | None = None if outcomes else self._spec(model_cfg)
            while spec is not None:
                deps = LoopDeps(
                    model=model,
                    tools=tools,
                    gate=gate,
                    tool_context=ctx,
                    workspace_root=workspace.root,
                    trace=trace,
                    cancel=cancel,
                    # Step numbers continue across segments; the run's one RunEnded is written below.
                    step_offset=sum(o.steps for o in outcomes),
                    emit_run_ended=False,
                )
                outcome = run_loop(spec, deps, messages)
                outcomes.append(outcome)
                if outcome.contract is not None:
                    answer = unwrap_answer(str(outcome.contract.get("answer", "")))
                if not (self.verify and outcome.terminal_reason == "completed" and answer is not None):
                    break
                record, child = self._check(launcher, task_text, answer, len(checks) + 1)
                checks.append((record, child))
                retries_left = self.profile.max_verification_retries - (len(checks) - 1)
                # UNVERIFIED names nothing the parent could fix: a retry would only spend again.
                if self._passes(record) or record.verdict == "UNVERIFIED" or retries_left <= 0:
                    break
                # The next segment continues the conversation under what is left of the budgets.
                spec = self._remaining(self._spec(model_cfg), outcomes, started)
                if spec is None:
                    break
                feedback = _feedback(record, len(checks), self.profile.max_verification_retries)
                # The outcome's conversation ends with the answer as the model wrote it.
                messages = [*outcome.messages, Message(role="user", content=feedback)]
                step = sum(o.steps for o in outcomes)
                trace.emit(PromptAdded(run_id=run_id, step=step, purpose="verification", content=feedback))
            result = self._result(
                _Run(task_text, run_id, trace_path, used, model_cfg.model, fallback, started),
                outcomes,
                checks,
                answer,
                ctx,
                workspace,
                scratch,
            )
            result = MainRunResult.model_validate_json(redactor(to_json(result)))  # masked like the trace
            trace.emit(RunEnded(run_id=run_id, step=result.steps, **result.ended_fields()))
        finally:
            trace.close()
        return result

    def _check(
        self, launcher: SubagentLauncher, task_text: str, answer: str, attempt: int
    ) -> tuple[VerificationRecord, SubagentResult]:
        """Launch the verification child on the claim.

        Its verdict counts only when the child ended ``completed``: a child that hit a limit and
        answered in its grace turn (or gave no verdict at all) is UNVERIFIED, whatever it said.
        """
        claim = (
            "Check whether the main agent's claim below is true of the workspace.\n\n"
            f"The task the main agent was given:\n{task_text.strip()}\n\n"
            f"The main agent's final answer (the claim to check):\n{answer.strip() or '(empty)'}\n\n"
            "Answer PASS only if the files show that the claim holds; FAIL with reasons otherwise."
        )
        child = launcher.launch(SubagentRequest(task=claim, profile="verification"))
        contract = child.contract or {}
        given = contract.get("verdict")
        finished = child.terminal_reason == "completed" and not child.grace_used
        verdict: Verdict = given if finished and given in ("PASS", "FAIL", "PARTIAL") else "UNVERIFIED"
        reasons = [str(r) for r in contract.get("reasons") or []]
        if not child.contract:
            reasons = [child.summary]
        elif not finished:
            reasons.insert(
                0,
                f"the verification child ended {child.terminal_reason}; its verdict {given!r} was given "
                "in a grace turn after a limit and does not count",
            )
        record = VerificationRecord(
            attempt=attempt,
            verdict=verdict,
            reasons=reasons,
            child_run_id=child.run_id,
            child_status=child.status,
            child_terminal_reason=child.terminal_reason,
            child_verdict=given if isinstance(given, str) else None,
        )
        return record, child

    def _passes(self, record: VerificationRecord) -> bool:
        """Whether the gate lets the answer stand on this verdict."""
        return gate_passes(record.verdict, accept_unverified=self.profile.accept_unverified)

    def _result(
        self,
        run: _Run,
        outcomes: list[LoopOutcome],
        checks: list[tuple[VerificationRecord, SubagentResult]],
        answer: str | None,
        ctx: MainToolContext,
        workspace: Workspace,
        scratch: ScratchCopy | None,
    ) -> MainRunResult:
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
        children += [child_record(c, "verification") for _, c in checks]
        _, model_cfg, _ = self.config.resolve_model(self.profile.model)
        return MainRunResult(
            **merged,
            **roll_up(run.model_used, merged["usage"], cost_usd(merged["usage"], model_cfg), children),
            elapsed_s=time.monotonic() - run.started,
            run_id=run.run_id,
            session_id=self.session_id,
            task=run.task,
            answer=answer,
            model_used=run.model_used,
            model_id=run.model_id,
            fallback=run.fallback,
            children=children,
            segments=len(outcomes),
            verifications=[record for record, _ in checks],
            verdict=verdict,
            target=str(self.target),
            workspace=str(workspace.root),
            scratch_path=str(scratch.root) if scratch else None,
            changed_files=scratch.changed_files() if scratch else [],  # from the copy's own manifest
            scratch_notes=scratch.notes if scratch else [],
            bash_sandbox=ctx.bash_sandbox.status() if "Bash" in self.profile.tools else "",
            trace_path=str(run.trace_path),
        )


@dataclass(frozen=True)
class _Run:
    task: str
    run_id: str
    trace_path: Path
    model_used: str
    model_id: str
    fallback: bool
    started: float


def unwrap_answer(text: str) -> str:
    """The answer text: ``{"answer": "..."}`` (how JSON-protocol models must answer) is unwrapped."""
    try:
        data = json.loads(text)
    except ValueError:
        return text
    if isinstance(data, dict) and set(data) == {"answer"} and isinstance(data["answer"], str):
        return data["answer"].strip()
    return text


def _feedback(record: VerificationRecord, retry: int, max_retries: int) -> str:
    reasons = "\n".join(f"- {r}" for r in record.reasons or ["(no reasons given)"])
    return (
        "A verification sub-agent checked your final answer against the workspace and did not accept "
        f"it (verdict {record.verdict}). Reasons:\n{reasons}\nFix what is wrong using your tools, then "
        f"give your final answer again (verification retry {retry} of {max_retries})."
    )
