"""The launcher: starts a child in the sandbox its profile defines and returns one result value."""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field, ValidationError

from subagent_lab.loop import LoopDeps, LoopOutcome, LoopSpec, run_loop
from subagent_lab.models.base import Model
from subagent_lab.permissions import PermissionGate
from subagent_lab.profiles import LabConfig, ModelConfig, RuntimeProfile
from subagent_lab.sandbox import Workspace
from subagent_lab.tools.readonly import build_tools
from subagent_lab.trace import Redactor, RunEnded, RunStarted, SubagentEvent, TraceWriter, new_id, to_json
from subagent_lab.types import ConfigError, Message, ModelChoice, RunStatus, TerminalReason, Usage

ModelFactory = Callable[[ModelChoice, ModelConfig], Model]


class SubagentRequest(BaseModel):
    """What the parent asks for."""

    task: str = Field(min_length=1)
    profile: str = "explore"
    context: dict[str, Any] | None = None
    """Structured context from the parent (earlier findings, file hints), rendered into the prompt."""
    model: ModelChoice | None = None
    """Overrides the profile's model choice."""
    overrides: dict[str, Any] = Field(default_factory=dict)
    """Profile field overrides (e.g. ``max_steps``), validated like the YAML."""


class ParentLink(BaseModel):
    """Who launched the child; written into the child's trace so traces link both ways."""

    session_id: str
    run_id: str
    trace_path: str | None = None


class SubagentResult(BaseModel):
    """Everything about one child run. ``launch`` returns this for every runtime outcome."""

    run_id: str
    session_id: str
    profile: str
    status: RunStatus
    terminal_reason: TerminalReason
    detail: str = ""
    contract: dict[str, Any] | None = None
    usage: Usage = Field(default_factory=Usage)
    usage_by_call: list[Usage] = Field(default_factory=list)
    tool_usage: dict[str, dict[str, int]] = Field(default_factory=dict)
    model_choice: ModelChoice
    model_used: ModelChoice
    model_id: str
    fallback: bool = False
    steps: int = 0
    model_calls: int = 0
    repairs_used: int = 0
    grace_used: bool = False
    grounded_ratio: float | None = None
    elapsed_s: float = 0.0
    model_time_s: float = 0.0
    cost_usd: float = 0.0
    trace_path: str

    @property
    def summary(self) -> str:
        """The text the parent's model reads."""
        if self.contract and isinstance(self.contract.get("summary"), str):
            return str(self.contract["summary"])
        if self.contract and "verdict" in self.contract:
            return f"{self.contract['verdict']}: " + "; ".join(self.contract.get("reasons", []))
        return f"Sub-agent ended without a result ({self.terminal_reason}): {self.detail[:300]}"


def loop_spec(profile: RuntimeProfile, model: ModelConfig) -> LoopSpec:
    """The loop limits a profile and its model imply."""
    return LoopSpec(
        max_steps=profile.max_steps,
        context_token_budget=profile.context_token_budget,
        total_token_budget=profile.total_token_budget,
        timeout_s=profile.timeout_s,
        contract=profile.contract,
        max_output_tokens=profile.max_output_tokens or model.max_output_tokens,
        max_repairs=profile.max_contract_repairs,
        require_grounded=profile.require_grounded_evidence,
        max_tool_calls_per_step=profile.max_tool_calls_per_step,
        loop_repeat_limit=profile.loop_repeat_limit,
        grace_turn=profile.grace_turn,
        min_tool_calls=profile.min_tool_calls,
        temperature=model.temperature,
        seed=model.seed,
    )


def workspace_overview(workspace: Workspace, limit: int = 40) -> str:
    """The workspace's top-level entries (ignored and secret ones left out), directories marked.

    Small models otherwise guess paths like ``src/app/main.py``; one line of layout grounds them.
    """
    entries = []
    for path in sorted(workspace.root.iterdir(), key=lambda p: p.name):
        is_dir = path.is_dir() and not path.is_symlink()
        if workspace.is_secret(path.name) or workspace.is_ignored(path.name, is_dir=is_dir):
            continue
        entries.append(path.name + ("/" if is_dir else ""))
    more = f" ... ({len(entries) - limit} more)" if len(entries) > limit else ""
    return "Workspace top level: " + (", ".join(entries[:limit]) or "(empty)") + more


def render_task(request: SubagentRequest, overview: str | None = None) -> str:
    """The child's first user message: the task, the parent's structured context, the layout."""
    parts = [request.task.strip()]
    if request.context:
        context = json.dumps(request.context, indent=2, sort_keys=True, ensure_ascii=False, default=str)
        parts.append(f"Context from the parent agent (JSON):\n{context}")
    if overview:
        parts.append(overview)
    return "\n\n".join(parts)


def cost_usd(usage: Usage, model: ModelConfig) -> float:
    return (
        usage.prompt_tokens * model.price_per_mtok_input
        + usage.completion_tokens * model.price_per_mtok_output
    ) / 1e6


def default_model_factory(config: LabConfig) -> ModelFactory:
    """Models served over HTTP via the ``openai`` client; the embedded server is started on demand."""
    from subagent_lab.models.openai_chat import OpenAIChatModel

    def make(choice: ModelChoice, cfg: ModelConfig) -> Model:
        hint = ""
        if cfg.base_url is None:
            from subagent_lab.server import ensure_server

            handle = ensure_server(config)
            hint = f"embedded server log: {handle.log_path}"
        return OpenAIChatModel(
            base_url=config.endpoint_url(cfg),
            model=cfg.model,
            api_key=os.environ.get(cfg.api_key_env) if cfg.api_key_env else None,
            tool_protocol=cfg.tool_protocol,
            constrain_output=cfg.constrain_output,
            max_retries=cfg.max_retries,
            timeout_s=cfg.timeout_s,
            error_hint=hint,
        )

    return make


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
        self.model_factory = model_factory or default_model_factory(config)
        self.trace_dir = Path(trace_dir) if trace_dir else config.trace_root()
        self.session_id = session_id or new_id("session")
        self.parent = parent
        self.parent_trace = parent_trace
        self._models: dict[ModelChoice, Model] = {}
        self._lock = threading.Lock()

    def resolve_profile(self, request: SubagentRequest) -> RuntimeProfile:
        """The profile with the request's overrides applied (ConfigError on a bad override)."""
        profile = self.config.profile(request.profile)
        if not request.overrides:
            return profile
        try:
            return RuntimeProfile.model_validate({**profile.model_dump(), **request.overrides})
        except ValidationError as exc:
            problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
            raise ConfigError(f"overrides for profile {request.profile!r}: {problems}") from None

    def _redactor(self) -> Redactor:
        """Masks secrets, including every configured model's key whatever its variable is called."""
        names = {cfg.api_key_env for cfg in self.config.models.values() if cfg and cfg.api_key_env}
        return Redactor(extra_values=[os.environ[n] for n in sorted(names) if os.environ.get(n)])

    def _model(self, choice: ModelChoice, cfg: ModelConfig) -> Model:
        with self._lock:
            if choice not in self._models:
                self._models[choice] = self.model_factory(choice, cfg)
            return self._models[choice]

    def launch(self, request: SubagentRequest, *, cancel: threading.Event | None = None) -> SubagentResult:
        """Run one child to its end. Raises only for caller mistakes (unknown profile, bad overrides)."""
        profile = self.resolve_profile(request)
        choice: ModelChoice = request.model or profile.model
        used, model_cfg, fallback = self.config.resolve_model(choice)
        run_id = new_id("run")
        trace_path = self.trace_dir / self.session_id / f"{profile.name}-{run_id}.jsonl"
        redactor = self._redactor()
        trace = TraceWriter(trace_path, run_id, redactor=redactor)
        link: dict[str, Any] = {"run_id": run_id, "session_id": self.session_id, "profile": profile.name}
        self._parent_event("subagent_requested", request, run_id, trace_path, model_choice=choice)
        started = time.monotonic()
        system_prompt, task = profile.system_prompt, render_task(request, workspace_overview(self.workspace))
        trace.emit(
            RunStarted(
                **link,
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
            )
        )
        self._parent_event(
            "subagent_started", request, run_id, trace_path, model_choice=choice, model_used=used
        )
        try:
            model = self._model(used, model_cfg)
        except Exception as exc:  # the endpoint could not be set up: a model error, not a crash
            outcome = LoopOutcome(
                terminal_reason="model_error",
                status="failed",
                detail=f"model setup failed: {exc}",
                elapsed_s=time.monotonic() - started,
            )
            trace.emit(
                RunEnded(
                    run_id=run_id,
                    terminal_reason="model_error",
                    status="failed",
                    detail=outcome.detail,
                    usage=Usage(),
                    steps=0,
                    model_calls=0,
                    elapsed_s=outcome.elapsed_s,
                    model_time_s=0.0,
                )
            )
        else:
            deps = LoopDeps(
                model=model,
                tools=build_tools(profile.tools),
                gate=PermissionGate(mode="readonly_subagent", allowlist=frozenset(profile.tools)),
                tool_context=self.workspace,
                workspace_root=self.workspace.root,
                trace=trace,
                cancel=cancel,
            )
            messages = [Message(role="system", content=system_prompt), Message(role="user", content=task)]
            outcome = run_loop(loop_spec(profile, model_cfg), deps, messages)
        finally:
            trace.close()
        result = SubagentResult(
            **link,
            **outcome.model_dump(),
            model_choice=choice,
            model_used=used,
            model_id=model_cfg.model,
            fallback=fallback,
            cost_usd=cost_usd(outcome.usage, model_cfg),
            trace_path=str(trace_path),
        )
        # The result goes to the parent's model, to sweep tables and to logs: no keys in it either
        # (an endpoint may echo the Authorization header in an error that becomes the detail).
        result = SubagentResult.model_validate_json(redactor(to_json(result)))
        kind = "subagent_failed" if result.status == "failed" else "subagent_completed"
        self._parent_event(kind, request, run_id, trace_path, result=result)
        return result

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
