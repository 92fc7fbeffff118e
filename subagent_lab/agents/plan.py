"""The run plan: everything one run needs, built once before its trace opens.

A child (``plan_run``) and a main agent (``plan_main``) are planned here and nowhere else: the
profile as the request runs it, the model, the loop's limits and policies (``config.build``, whose
only caller in ``agents/`` this module is), the tools and the gate, the first messages, the task as
the model is given it, the spans the first message shows and the ``RunStarted`` event. The launcher
and the main agent then only open the trace, run the loop on the plan and build the result.
"""

from __future__ import annotations

import re
import traceback
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Generic, TypeVar

from pydantic import BaseModel, ConfigDict, Field

from subagent_lab.agents.launch_io import fork_prefix, plain_json, render_task, workspace_overview
from subagent_lab.config import build
from subagent_lab.config.agent_profile import AgentProfile, apply_overrides
from subagent_lab.config.limits import Limits
from subagent_lab.config.profiles import LabConfig, ModelConfig, RuntimeProfile
from subagent_lab.core.budget import BudgetNode, CostAccount
from subagent_lab.core.loop import LoopDeps, LoopSpec, Reviewer
from subagent_lab.core.model import Model
from subagent_lab.core.permissions import AskPolicy, PermissionGate
from subagent_lab.core.policy import Policy, RunContext, TaskShape, policy_names, policy_params
from subagent_lab.core.tool import Tool
from subagent_lab.core.trace import RunStarted, TraceSink, new_id
from subagent_lab.core.types import Message, ModelChoice, Span
from subagent_lab.tools.registry import build_tools
from subagent_lab.tools.simple import ObservationLimits
from subagent_lab.workspace.sandbox import Workspace


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
    budget: BudgetNode | None = Field(default=None, exclude=True, repr=False)
    """The budget scope the parent granted this child (``BudgetNode.grant``): its token and USD caps
    tighten the profile's, and its spend is charged up the parent's tree as it goes. None: a run
    on its own, in a scope made from its profile's limits."""

    model_config = ConfigDict(arbitrary_types_allowed=True)


class ParentLink(BaseModel):
    """Who launched the child; written into the child's trace so traces link both ways."""

    session_id: str
    run_id: str
    trace_path: str | None = None


@dataclass(frozen=True)
class ModelUse:
    """The model a run asked for and the one it got."""

    choice: ModelChoice
    used: ModelChoice
    config: ModelConfig
    fallback: bool


P = TypeVar("P", RuntimeProfile, AgentProfile)
"""The kind of profile a plan runs: a child's (``plan_run``) or a main agent's (``plan_main``)."""


@dataclass(frozen=True)
class RunPlan(Generic[P]):
    """One run, planned: what its trace, its loop and its result read. ``cost`` is the run's one
    cost account (a parent's is shared with its children); everything else is fixed."""

    run_id: str
    trace_path: Path
    profile: P
    model: ModelUse
    spec: LoopSpec
    policies: tuple[Policy, ...]
    tools: dict[str, Tool]
    gate: PermissionGate
    workspace: Workspace
    messages: tuple[Message, ...]
    """The conversation the loop starts from: the system prompt, a fork's prior turns, the task."""
    task: str
    """The task as the caller wrote it."""
    task_message: str
    """The task as the harness restates it (the absence check, the citation ranking)."""
    shown: tuple[Span, ...]
    started: RunStarted | None
    """The run's first event; None when planning failed (``problem`` says why)."""
    cost: CostAccount | None
    budget: BudgetNode
    """The run's scope in the budget tree: a child's grant, a parent's own calls, or a run's own."""
    grammar: bool
    """The endpoint decodes under a grammar; False: an aid only a grammar enforces runs as a check."""
    problem: str | None = None
    """Why the run cannot start (its workspace is unreadable); None when it can."""

    def deps(
        self,
        model: Model,
        trace: TraceSink,
        tool_context: Any,
        cancel: Any = None,
        *,
        review: Reviewer | None = None,
        emit_run_ended: bool = True,
    ) -> LoopDeps:
        """What the loop talks to: the plan's tools, gate and policies, with the run's model and
        trace (``review``/``emit_run_ended``: a parent's verification and its rolled-up end)."""
        return LoopDeps(
            model=model,
            tools=self.tools,
            gate=self.gate,
            tool_context=tool_context,
            workspace_root=self.workspace.root,
            trace=trace,
            cancel=cancel,
            shown=list(self.shown),
            review=review,
            emit_run_ended=emit_run_ended,
            policies=self.policies,
            task=self.task,
            task_message=self.task_message,
            grammar=self.grammar,
            allow_model_fallback=self.profile.allow_model_fallback,
            cost=self.cost,
            budget=self.budget,
        )


def resolve_profile(config: LabConfig, request: SubagentRequest) -> RuntimeProfile:
    """The profile as the request runs it: its per-model tuning for the model that will run
    (``model_overrides``), then the request's overrides (ConfigError on a bad override).

    The retrieval floor is defined by its tools: a ``retrieval`` run also holds Find, Refs,
    Outline and Search (``SymbolTools``) where the preset lacks them (``models.retrieval``)."""
    profile = config.profile(request.profile)
    choice = request.model or request.overrides.get("model") or profile.model
    used = config.resolve_model(choice)[0]
    tuned = profile.model_overrides.get(used, {})
    where = f"overrides for profile {request.profile!r}"
    if request.overrides or tuned:
        profile = apply_overrides(RuntimeProfile, profile, tuned, request.overrides, where=where)
    simple = profile.scaffold.observation.tool_interface == "simple"
    if used == "retrieval" and not profile.scaffold.has("SymbolTools") and simple:
        # after the request's overrides: a preset may leave SymbolTools out
        profile = apply_overrides(RuntimeProfile, profile, {"SymbolTools": {}}, where=where)
    return profile


def _granted(profile: RuntimeProfile, grant: BudgetNode | None) -> RuntimeProfile:
    """``profile`` with its limits tightened to a parent's grant: its total (and its context, to
    fit the total) to the tokens granted, its cost cap to the USD granted."""
    if grant is None:
        return profile
    update: dict[str, Any] = {}
    if grant.tokens is not None and grant.tokens < profile.total_token_budget:
        context = min(profile.context_token_budget, grant.tokens)
        update.update(total_token_budget=grant.tokens, context_token_budget=context)
    if grant.usd is not None and grant.usd != profile.cost_budget_usd:
        update["cost_budget_usd"] = grant.usd
    return profile.model_copy(update=update) if update else profile


_NOT_IN_FILE_NAMES = re.compile(r"[^A-Za-z0-9_.-]")


def trace_stem(name: str) -> str:
    """A profile's name as it starts its trace file's name: one path component of a fixed alphabet
    (a name from an agent file or an override may hold ``/`` or start with one), at most 100."""
    return _NOT_IN_FILE_NAMES.sub("_", name)[:100] or "run"


def plan_run(
    config: LabConfig,
    request: SubagentRequest,
    workspace: Workspace,
    *,
    session_id: str,
    trace_dir: Path,
    parent: ParentLink | None = None,
) -> RunPlan[RuntimeProfile]:
    """A child's plan. Raises only for caller mistakes (ConfigError); a workspace that cannot be
    read, or a harness bug while planning (then without ``started``), is the plan's ``problem``."""
    profile = _granted(resolve_profile(config, request), request.budget)
    choice: ModelChoice = request.model or profile.model
    model = ModelUse(choice, *config.resolve_model(choice))
    spec, policies = build.build(profile, model.config, seed=request.seed, temperature=request.temperature)
    scope = request.budget or BudgetNode(
        "run", tokens=profile.total_token_budget, usd=profile.cost_budget_usd
    )
    names = build.tool_names(profile)
    run_id = new_id("run")
    bare = RunPlan(
        run_id=run_id,
        trace_path=trace_dir / session_id / f"{trace_stem(profile.name)}-{run_id}.jsonl",
        profile=profile,
        model=model,
        spec=spec,
        policies=policies,
        tools={},
        gate=PermissionGate(mode="readonly_subagent", allowlist=frozenset(names)),
        workspace=workspace,
        messages=(),
        task=request.task,
        task_message="",
        shown=(),
        started=None,
        cost=build.cost_account(profile, model.config, scope),
        budget=scope,
        grammar=model.config.constrain_output,
    )
    try:
        return _child_start(bare, config, request, names, session_id, parent)
    except Exception as exc:  # a harness bug: the run fails with it, the launch never raises
        why = "".join(traceback.format_exception(exc))[-4000:]
        return replace(bare, problem=f"planning the run failed: {why}")


def _child_start(
    plan: RunPlan[RuntimeProfile],
    config: LabConfig,
    request: SubagentRequest,
    names: tuple[str, ...],
    session_id: str,
    parent: ParentLink | None,
) -> RunPlan[RuntimeProfile]:
    """``plan`` completed with what a child starts from: its first messages as its policies shape
    them, the spans they show, its tools and its ``RunStarted``."""
    profile, spec = plan.profile, plan.spec
    shape, problem = _shape(request.task, plan.workspace, names, plan.policies)
    # Rendered once: the task as the harness restates it is the first message without its
    # appended sections (a repo map, a tool guide), whose identifiers are not the task's words.
    body = render_task(request.task, request.context, shape.overview, shape.files)
    task = "\n\n".join([body, *(section for section in shape.sections if section)])
    system = Message(role="system", content=profile.system_prompt)
    first = Message(role="user", content=task)
    # Trimmed before the trace starts, so that RunStarted records what the child starts from.
    prior = fork_prefix(request.prior_messages, [system, first], profile.context_token_budget)
    shown = (*(Span(path) for path in shape.files), *shape.shown)
    started = run_started(
        plan.run_id,
        profile,
        plan.model,
        plan.policies,
        session_id=session_id,
        profile=profile.name,
        parent_run_id=parent.run_id if parent else None,
        parent_session_id=parent.session_id if parent else None,
        parent_trace=parent.trace_path if parent else None,
        contract=profile.contract,
        endpoint=config.endpoint_url(plan.model.config),
        tools=list(names),
        workspace=str(plan.workspace.root),
        system_prompt=profile.system_prompt,
        task=task,
        request_task=request.task,
        request_context=plain_json(request.context) if request.context else None,
        overrides=plain_json(request.overrides),
        profile_fields=plain_json(profile.model_dump(exclude={"name", "description", "system_prompt"})),
        seed=spec.sampling.seed,
        temperature=spec.sampling.temperature,
        rerun_of=request.rerun_of,
        shown=[tuple(span) for span in shown],
        prior_messages=prior,
    )
    sizes = profile.scaffold.observation
    limits = ObservationLimits(
        grep_max_matches=sizes.grep_max_matches,
        read_window=sizes.read_window,
        glob_max_results=sizes.glob_max_results,
        read_outline=sizes.read_outline,
    )
    return replace(
        plan,
        tools=build_tools(names, sizes.tool_interface, limits),
        messages=(system, *prior, first),
        task_message=body.strip(),  # cut at a length, a restated task with a repo map was junk
        shown=shown,
        started=started,
        problem=problem,
    )


def plan_main(
    config: LabConfig,
    profile: AgentProfile,
    workspace: Workspace,
    *,
    task: str,
    system_prompt: str,
    tools: dict[str, Tool],
    ask_policy: AskPolicy,
    note: str | None,
    session_id: str,
    trace_dir: Path,
    budgets: Mapping[str, float] | None = None,
) -> RunPlan[AgentProfile]:
    """A main agent's plan: its tools (``main_tools``) under the ``main_agent`` gate with
    ``ask_policy``, its first message (the task, the layout line and ``note``, the Bash sandbox's
    warning), and the same limits, policies and cost account a child's profile would give."""
    model = ModelUse(profile.model, *config.resolve_model(profile.model))
    spec, policies = build.build(profile, model.config)
    run_id = new_id("run")
    # The tree: the run's cost cap at the root, over its own calls (its total, which verification
    # also counts against) and its children's cap (``children_scope``).
    own = BudgetNode("main", usd=profile.cost_budget_usd).scope("own", tokens=profile.total_token_budget)
    # The same one-line layout a child gets: without it small models guess paths.
    first = f"{task.strip()}\n\n{workspace_overview(workspace)}" + (f"\n{note}" if note else "")
    started = run_started(
        run_id,
        profile,
        model,
        policies,
        budgets=budgets,
        session_id=session_id,
        profile="main",
        endpoint=config.endpoint_url(model.config),
        tools=list(tools),
        workspace=str(workspace.root),
        system_prompt=system_prompt,
        task=first,
    )
    return RunPlan(
        run_id=run_id,
        trace_path=trace_dir / session_id / f"main-{run_id}.jsonl",
        profile=profile,
        model=model,
        spec=spec,
        policies=policies,
        tools=tools,
        gate=PermissionGate(mode="main_agent", allowlist=frozenset(tools), ask_policy=ask_policy),
        workspace=workspace,
        messages=(Message(role="system", content=system_prompt), Message(role="user", content=first)),
        task=task,
        task_message=first.strip(),
        shown=(),
        started=started,
        cost=build.cost_account(profile, model.config, own),
        budget=own,
        grammar=True,
    )


def run_started(
    run_id: str,
    limits: Limits,
    model: ModelUse,
    policies: tuple[Policy, ...],
    *,
    budgets: Mapping[str, float] | None = None,
    **fields: Any,
) -> RunStarted:
    """The run's first event, for a child or a parent: its model, the four budgets of its profile
    (``limits``; its cost cap when set; plus ``budgets``), the policies it runs with, and
    ``fields`` (session, profile name, endpoint, tools, workspace, prompts and the rest)."""
    cost_cap = {} if limits.cost_budget_usd is None else {"cost_budget_usd": limits.cost_budget_usd}
    return RunStarted(
        run_id=run_id,
        model_choice=model.choice,
        model_used=model.used,
        model_id=model.config.model,
        fallback=model.fallback,
        budgets={
            "max_steps": limits.max_steps,
            "context_token_budget": limits.context_token_budget,
            "total_token_budget": limits.total_token_budget,
            "timeout_s": limits.timeout_s,
            **cost_cap,
            **(budgets or {}),
        },
        policies=policy_names(policies),
        policy_params=policy_params(policies),
        **fields,
    )


def _shape(
    task: str, workspace: Workspace, tools: tuple[str, ...], policies: tuple[Policy, ...]
) -> tuple[TaskShape, str | None]:
    """The first message's parts as the policies shape them, and why the run cannot start (None
    when it can): an unreadable workspace."""
    shape = TaskShape(task=task)
    try:
        shape.layout = workspace_overview(workspace)  # also proves the workspace is readable
    except OSError as exc:  # removed or made unreadable since the launcher was created
        return shape, f"workspace {workspace.root} is unavailable: {type(exc).__name__}: {exc}"
    context = RunContext(task, workspace, workspace.root, tools)
    for policy in policies:
        policy.shape_task(context, shape)
    return shape, None


def children_scope(plan: RunPlan[AgentProfile], cap: int | None) -> BudgetNode:
    """A main agent's children's scope: beside its own calls, under its cost cap, capped at ``cap``
    tokens for all its Task children together (None: no cap of their own)."""
    root = plan.budget.parent or plan.budget
    return root.scope("children", tokens=cap)
