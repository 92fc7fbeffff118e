"""Re-running a recorded child from its start: ``rerun`` (``sl.rerun``, ``subagent-lab rerun``).

A trace's ``RunStarted`` event holds the system prompt, the task and structured context as the
caller gave them, the workspace, the resolved profile fields and the sampling settings. Traces
written before those fields existed hold only the rendered first message and the budgets; they
are read back as well as they can be (the message is split into task, context and layout line).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from subagent_lab.agents.launch_io import plain_json
from subagent_lab.agents.launcher import SubagentLauncher, SubagentRequest, SubagentResult
from subagent_lab.api.runs import (
    ConfigArg,
    ModelArg,
    as_choice,
    as_config,
    factory_for,
    runs_root,
    with_profile,
)
from subagent_lab.api.views import RunLike, trace_of
from subagent_lab.config.legacy import upgrade_fields
from subagent_lab.config.runtime_profile import RuntimeProfile
from subagent_lab.config.scaffolds import BASE
from subagent_lab.core.trace import RunStarted, read_trace
from subagent_lab.core.types import Message, ModelChoice

CONTEXT_HEADER = "\n\nContext from the parent agent (JSON):\n"
"""How ``launch_io.render_task`` introduces the structured context."""
LAYOUT_PREFIX = "\n\nWorkspace top level: "
"""How ``launch_io.workspace_overview`` starts the layout line."""
_INT_BUDGETS = ("max_steps", "context_token_budget", "total_token_budget")


@dataclass(frozen=True)
class RecordedStart:
    """Everything a child run started from, as its trace recorded it."""

    trace_path: str
    run_id: str
    profile: str
    model_choice: str
    model_used: str
    workspace: str
    system_prompt: str
    task: str
    """The caller's task, before the context and layout line were added."""
    context: dict[str, Any] | None
    profile_fields: dict[str, Any] = field(default_factory=dict)
    """Profile fields the run ran with (old traces: its budgets and tools only)."""
    seed: int | None = None
    temperature: float | None = None
    prior_messages: list[Message] = field(default_factory=list)
    """The parent messages a forked child started from, as its trace holds them (redacted)."""


def recorded_start(trace: str | Path) -> RecordedStart:
    """The start of the run whose trace is at ``trace`` (ValueError when it has no ``RunStarted``)."""
    start = next((e for e in read_trace(trace) if isinstance(e, RunStarted)), None)
    if start is None:
        raise ValueError(f"{trace}: no run_started event; this is not a run trace")
    if start.request_task is not None:
        task, context = start.request_task, start.request_context
        fields = upgrade_fields(start.profile_fields, BASE)  # an older trace's flat scaffold fields
    else:  # written before the request was recorded
        task, context = split_rendered_task(start.task)
        fields = {k: int(v) if k in _INT_BUDGETS else v for k, v in start.budgets.items()}
        fields["tools"] = list(start.tools)
    return RecordedStart(
        trace_path=str(trace),
        run_id=start.run_id,
        profile=start.profile,
        model_choice=start.model_choice,
        model_used=start.model_used,
        workspace=start.workspace,
        system_prompt=start.system_prompt,
        task=task,
        context=context,
        profile_fields=fields,
        seed=start.seed,
        temperature=start.temperature,
        prior_messages=list(start.prior_messages),
    )


def split_rendered_task(message: str) -> tuple[str, dict[str, Any] | None]:
    """A rendered first message back into (task, context): the inverse of ``render_task``.

    The layout line is dropped (the launcher adds it again when the profile shows the layout);
    context that does not parse back as a JSON object stays part of the task text.
    """
    text = message
    at = text.rfind(LAYOUT_PREFIX)
    if at >= 0 and "\n\n" not in text[at + 2 :]:
        text = text[:at]
    at = text.rfind(CONTEXT_HEADER)
    if at < 0:
        return text, None
    try:
        context = json.loads(text[at + len(CONTEXT_HEADER) :])
    except ValueError:
        return text, None
    if not isinstance(context, dict):
        return text, None
    return text[:at], context


def rerun(
    trace_or_run: RunLike,
    model: ModelArg = "main",
    *,
    cache: bool | str | Path = False,
    config: ConfigArg = None,
    runs_dir: str | Path | None = None,
    seed: int | None = None,
    temperature: float | None = None,
    scaffold: str | None = None,
    profile: RuntimeProfile | None = None,
    **overrides: Any,
) -> SubagentResult:
    """Run a recorded child again from the same start, under another model, budget or field.

    The new run gets the recorded system prompt, task, structured context and workspace, the
    profile fields the recorded run ran with and its seed and temperature; only what is passed
    here changes. The scaffold is held: every scaffold field runs as recorded, so a re-run on
    another model changes the model and nothing else (no model's own tuning comes along); pass
    ``scaffold=`` to run another preset. A forked child starts again from the parent messages its
    trace recorded (redacted as recorded: a masked secret stays masked). Its trace and result name
    the trace it re-ran (``rerun_of``).

    Args:
        trace_or_run: A child's trace path, its ``SubagentResult``, or its row of a sweep table.
        model: The model of the new run: ``"main"`` (default) or ``"light"``, or a model object
            or factory (the run is then labelled with the profile's model choice).
        cache: Replay identical model calls (as in ``sl.explore``).
        config: A ``LabConfig``, a ``profiles.yaml`` path, or None for the default file; it must
            still define the recorded run's profile.
        runs_dir: Where the new trace goes; default: the config's ``trace_dir``.
        seed: Replaces the recorded seed.
        temperature: Replaces the recorded temperature.
        scaffold: A scaffold preset (``"plain"``, ``"aided"``, ...) to run instead of the recorded
            scaffold.
        profile: The recorded run's profile when the configuration does not hold it: the profile
            object it ran (``sl.import_agent(path).profile``).
        **overrides: Profile fields that differ from the recorded run, e.g. ``max_steps=20``.

    Raises ``ValueError`` for a trace without a start or of a run that is not a sub-agent's.
    """
    path = trace_of(trace_or_run)
    start = recorded_start(path)
    lab = as_config(config)
    if profile is not None:
        lab = with_profile(lab, profile)[0]
    if start.profile not in lab.profiles:
        raise ValueError(
            f"{path}: profile {start.profile!r} is not a sub-agent profile of this configuration "
            f"(known: {sorted(lab.profiles)}); rerun re-runs sub-agent runs (a run of a profile object, "
            "such as an imported agent's: pass it as profile=)"
        )
    runs = runs_root(lab, runs_dir)
    factory, choice = factory_for(model, lab, cache, runs)
    launcher = SubagentLauncher(lab, start.workspace, model_factory=factory, trace_dir=runs)
    request = SubagentRequest(
        task=start.task,
        profile=start.profile,
        context=start.context,
        prior_messages=start.prior_messages,
        model=choice,
        overrides={
            **_changed_fields(launcher, start),
            **_scaffold(launcher, start, choice, scaffold),
            **overrides,
        },
        seed=start.seed if seed is None else seed,
        temperature=start.temperature if temperature is None else temperature,
        rerun_of=str(path),
    )
    return launcher.launch(request)


def _scaffold(
    launcher: SubagentLauncher, start: RecordedStart, choice: ModelChoice | None, preset: str | None
) -> dict[str, Any]:
    """The scaffold fields the new run must be given to run the named preset, else the recorded
    run's own scaffold: those that the profile, on the new run's model, would set otherwise."""
    wanted = (
        launcher.config.scaffold(preset).resolved()
        if preset is not None
        else {k: v for k, v in start.profile_fields.items() if k == "scaffold"}
    )
    profile = launcher.config.profile(start.profile)
    today = launcher.resolve_profile(
        SubagentRequest(task="-", profile=start.profile, model=choice or profile.model)
    )
    current = plain_json(today.model_dump())
    return {k: v for k, v in wanted.items() if current.get(k) != v}


def _changed_fields(launcher: SubagentLauncher, start: RecordedStart) -> dict[str, Any]:
    """The recorded run's profile fields that today's profile would set differently.

    Compared with the profile as it would run today on the recorded model (its per-model tuning
    applied), the difference is the recorded request's own overrides plus whatever the
    configuration changed since.
    """
    today = launcher.resolve_profile(
        SubagentRequest(task="-", profile=start.profile, model=as_choice(start.model_used))
    )
    current = plain_json(today.model_dump())
    changed = {
        k: v
        for k, v in start.profile_fields.items()
        if k in current and k not in ("model", "model_overrides") and current[k] != v
    }
    if start.system_prompt != today.system_prompt:
        changed["system_prompt"] = start.system_prompt  # the prompt file changed since: keep the run's
    return changed
