"""The public API behind ``import subagent_lab as sl``: run children and parents, sweep, re-run.

Every function loads what it needs when called: ``sl.explore`` imports no pandas, and the
embedded llama.cpp server starts only when a run actually calls an embedded model. The table,
widget and report functions live in ``subagent_lab.api.views``, ``rerun`` in
``subagent_lab.api.rerun``, ``sweep`` in ``subagent_lab.api.sweeps``.

``model=`` takes the same three forms everywhere:

- a model choice, ``"light"`` or ``"main"``: the model ``profiles.yaml`` configures for it (the
  embedded server, started on first use, or any OpenAI-compatible endpoint); or a floor that runs
  no model: ``"none"`` (the no-model baseline) or ``"retrieval"`` (the harness's Find and Search);
- a model object, anything with ``complete(request) -> response`` (``sl.ScriptedModel`` for
  tests and demos), used for every call of the run;
- a factory ``(choice, model_config) -> model``, called once per model choice a run uses.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from subagent_lab.agents.launcher import ModelFactory, SubagentLauncher, SubagentRequest, SubagentResult
from subagent_lab.config.agent_profile import AgentProfile, apply_overrides
from subagent_lab.config.endpoints import ModelConfig
from subagent_lab.config.profiles import LabConfig, context_overflows, load_config
from subagent_lab.config.runtime_profile import RuntimeProfile
from subagent_lab.core.model import Model
from subagent_lab.core.types import ConfigError, ModelChoice

if TYPE_CHECKING:
    from subagent_lab.agents.result import MainRunResult
    from subagent_lab.agents.task_tool import ContextMode
    from subagent_lab.bench.suite import BenchTask

__all__ = ["explore", "run", "run_parent"]

ModelArg = str | Model | Callable[[ModelChoice, ModelConfig], Model] | None
"""A model choice, a model object, or a model factory (see the module docstring)."""
ConfigArg = LabConfig | str | Path | None
"""A loaded configuration, the path of a ``profiles.yaml``, or None for the default one."""
ProfileArg = str | RuntimeProfile
"""A profile's name in ``profiles.yaml``, or a profile object (``sl.import_agent(path).profile``)."""
CHOICES: tuple[ModelChoice, ...] = ("light", "main", "none", "retrieval")


def as_config(config: ConfigArg) -> LabConfig:
    """The configuration ``config`` names (a loaded one, a file, or the default file)."""
    return config if isinstance(config, LabConfig) else load_config(config)


def with_profile(lab: LabConfig, profile: ProfileArg) -> tuple[LabConfig, str]:
    """``lab`` holding ``profile`` and its name: a name is looked up as it is; a profile object
    (an imported agent's) joins the configuration under its own name, checked against the served
    context as a file's profile is (ConfigError)."""
    if isinstance(profile, str):
        return lab, profile
    try:  # a child's profile object as it is; anything else (a main agent's profile) is refused
        profile = RuntimeProfile.model_validate(profile)
    except ValidationError:
        raise ConfigError(
            f"profile must be a profile's name or a RuntimeProfile (sl.import_agent(path).profile), "
            f"not {type(profile).__name__}"
        ) from None
    lab = lab.model_copy(update={"profiles": {**lab.profiles, profile.name: profile}})
    problems = [p for p in context_overflows(lab) if p.startswith(f"profiles.{profile.name}.")]
    if problems:
        raise ConfigError(f"profile {profile.name!r}: {'; '.join(problems)}")
    return lab, profile.name


def runs_root(lab: LabConfig, runs_dir: str | Path | None) -> Path:
    """Where results go: ``runs_dir``, else the configuration's ``trace_dir`` (the working
    directory's ``runs/`` unless configured or ``$SUBAGENT_LAB_RUNS`` says otherwise)."""
    return Path(runs_dir).resolve() if runs_dir is not None else lab.trace_root()


def cache_dir(runs: Path) -> Path:
    """The model-call cache under a runs directory: the one sweeps use, so runs share their calls."""
    return runs / "sweeps" / "model-cache"


def as_choice(value: str) -> ModelChoice:
    """``value`` as a model choice (ValueError for anything but ``light``, ``main``, ``none``, the
    no-model baseline, and ``retrieval``, the retrieval floor)."""
    for choice in CHOICES:
        if value == choice:
            return choice
    raise ValueError(
        f"model must be 'light' or 'main' (or a floor: 'none', the no-model baseline, or 'retrieval'), "
        f"a model object or a factory; got {value!r}"
    )


def factory_for(
    model: ModelArg, lab: LabConfig, cache: bool | str | Path, runs: Path
) -> tuple[ModelFactory, ModelChoice | None]:
    """The factory a launcher gets for ``model`` (wrapped in the call cache when asked), and the
    model choice the request names (None: the profile's own)."""
    from subagent_lab.local_models.factory import default_model_factory

    choice: ModelChoice | None = None
    custom = ""
    if model is None or isinstance(model, str):
        choice = None if model is None else as_choice(model)
        factory: ModelFactory = default_model_factory(lab)
    elif isinstance(model, Model):
        instance = model
        factory, custom = (lambda c, cfg: instance), type(model).__qualname__
    elif callable(model):
        factory, custom = model, getattr(model, "__qualname__", type(model).__qualname__)
    else:
        raise TypeError(f"model must be 'light'/'main', a model object or a factory, not {type(model)}")
    if cache is False:
        return factory, choice
    from subagent_lab.local_models.namespace import config_namespace
    from subagent_lab.models.cache import CachingModel

    where = cache_dir(runs) if cache is True else Path(cache)
    inner = factory

    def cached(c: ModelChoice, cfg: ModelConfig) -> Model:
        # The sweeps' key for configured models (the weights' SHA-256 for the embedded ones); a
        # custom model's answers get a namespace of their own, never replayed as the configured model's.
        namespace = config_namespace(lab, cfg) + (f"|custom:{custom}" if custom else "")
        return CachingModel(inner(c, cfg), where, namespace)

    return cached, choice


def run(
    profile: ProfileArg,
    task: str | BenchTask,
    workspace: str | Path | None = None,
    model: ModelArg = None,
    *,
    context: Mapping[str, Any] | None = None,
    cache: bool | str | Path = False,
    config: ConfigArg = None,
    runs_dir: str | Path | None = None,
    seed: int | None = None,
    temperature: float | None = None,
    **overrides: Any,
) -> SubagentResult:
    """Run one read-only child of profile ``profile`` to its end and return its result.

    Never raises for what goes wrong at run time (a dead server, a budget, a broken contract):
    those come back as a result with the true ``terminal_reason``, the usage so far and any
    partial findings. Raises ``ConfigError`` for an unknown profile or a bad override.

    Args:
        profile: A profile of ``profiles.yaml`` (``explore``, ``plan``, ``verification``, ...), or
            a profile object, e.g. ``sl.import_agent(".claude/agents/scout.md").profile``.
        task: What the child should find out; or a benchmark task (``sl.bench_task(id)``), whose
            prompt is the task and whose package directory is the default workspace.
        workspace: The directory the child may read (default: the current directory, or the
            benchmark task's package).
        model: ``"light"``/``"main"``, a floor (``"none"``: the no-model baseline, ``"retrieval"``:
            the harness's Find and Search, no model), a model object or a factory (module
            docstring); None takes the profile's model.
        context: Structured context for the child (earlier findings, file hints), rendered into
            its first message as JSON.
        cache: Replay identical model calls: True uses ``<runs_dir>/sweeps/model-cache`` (shared
            with sweeps), a path uses that directory; hits are flagged in the trace.
        config: A ``LabConfig``, a ``profiles.yaml`` path, or None for the default file.
        runs_dir: Where the trace goes (``<runs_dir>/<session>/``); default: the config's
            ``trace_dir`` (``runs/`` in the working directory, or ``$SUBAGENT_LAB_RUNS``).
        seed: The sampling seed sent with every call (None: the model's).
        temperature: The sampling temperature (None: the model's; the shipped models use 0).
        **overrides: Profile fields for this run, validated like the YAML, e.g.
            ``max_steps=6, total_token_budget=16000``.
    """
    lab, name = with_profile(as_config(config), profile)
    runs = runs_root(lab, runs_dir)
    factory, choice = factory_for(model, lab, cache, runs)
    text, root = _task_and_workspace(task, workspace)
    launcher = SubagentLauncher(lab, root, model_factory=factory, trace_dir=runs)
    request = SubagentRequest(
        task=text,
        profile=name,
        context=dict(context) if context is not None else None,
        model=choice,
        overrides=overrides,
        seed=seed,
        temperature=temperature,
    )
    return launcher.launch(request)


def explore(
    task: str | BenchTask,
    workspace: str | Path | None = None,
    model: ModelArg = "light",
    *,
    profile: ProfileArg = "explore",
    context: Mapping[str, Any] | None = None,
    cache: bool | str | Path = False,
    config: ConfigArg = None,
    runs_dir: str | Path | None = None,
    seed: int | None = None,
    temperature: float | None = None,
    scaffold: str | None = None,
    **overrides: Any,
) -> SubagentResult:
    """Ask an explore sub-agent a question about a code base; returns its ``SubagentResult``.

    The child searches ``workspace`` with read-only tools (Read, Grep, Glob) and must answer
    with one ``ExploreResult`` JSON object (``result.contract``: status, summary, findings,
    ``path:line`` evidence, unresolved questions). ``result.terminal_reason`` says how it
    ended, ``result.usage`` what it spent, ``result.trace_path`` where every step is recorded
    (open it with ``sl.inspect(result)``).

    Args:
        task: The question; or a benchmark task (``sl.bench_task(id)``, or one of
            ``sl.load_tasks("my_tasks.yaml")``), whose prompt is the question and whose workspace
            is the default one.
        workspace: The directory the child may read (default: the current directory, or the
            benchmark task's package).
        model: ``"light"`` (default) or ``"main"``; ``"none"``, the no-model baseline (rules in
            place of a model: it searches the task's first code-like name and cites what the tools
            showed), or ``"retrieval"``, the retrieval floor (the harness's Find and Search, no
            model); a model object (e.g. ``sl.ScriptedModel``) or a factory
            ``(choice, model_config) -> model``.
        profile: The child profile (default ``explore``): a name in ``profiles.yaml`` or a profile
            object (``sl.import_agent(path).profile``).
        context: Structured context (earlier findings, file hints), rendered as JSON.
        cache: Replay identical model calls: True uses ``<runs_dir>/sweeps/model-cache`` (shared
            with sweeps), a path uses that directory.
        config: A ``LabConfig``, a ``profiles.yaml`` path, or None for the default file.
        runs_dir: Where the trace goes; default: the config's ``trace_dir`` (``runs/`` in the
            working directory, or ``$SUBAGENT_LAB_RUNS``).
        seed: The sampling seed sent with every call (None: the model's).
        temperature: The sampling temperature (None: the model's).
        scaffold: A scaffold preset of ``profiles.yaml`` (``scaffolds:``, e.g. ``"rank"``)
            whose every field replaces the profile's, as a sweep applies it; None: the profile's own.
        **overrides: Profile fields for this run, e.g. ``max_steps=6, total_token_budget=16000``
            (applied after the preset).
    """
    if scaffold is not None:
        lab = as_config(config)
        overrides = {**lab.scaffold(scaffold).resolved(), **overrides}
        config = lab
    return run(
        profile,
        task,
        workspace,
        model,
        context=context,
        cache=cache,
        config=config,
        runs_dir=runs_dir,
        seed=seed,
        temperature=temperature,
        **overrides,
    )


def run_parent(
    task: str | BenchTask,
    target: str | Path | None = None,
    model: ModelArg = None,
    *,
    profile: str = "main",
    child_overrides: Mapping[str, Mapping[str, Any]] | None = None,
    scratch: bool = True,
    verify: bool | None = None,
    cache: bool | str | Path = False,
    config: ConfigArg = None,
    runs_dir: str | Path | None = None,
    context_mode: ContextMode = "brief",
    child_model: ModelArg = None,
    forced_delegation: bool = False,
    **overrides: Any,
) -> MainRunResult:
    """Run a main (parent) agent on ``task``; it may delegate to sub-agents through ``Task``.

    Returns a ``MainRunResult``: the answer, the parent's own usage, its children (each with
    its own trace) and the totals (``total_usage``, ``total_cost_usd``).

    Args:
        task: The request for the parent; or a benchmark task (its prompt, and its package as the
            default target).
        target: The repository the parent works on (default: the current directory, or the
            benchmark task's package). With ``scratch`` it works on a temporary copy.
        model: The parent's model: ``"light"``/``"main"`` (None: the agent profile's), or a model
            object or factory, which then serves its children too.
        profile: The ``agents:`` entry of ``profiles.yaml`` (default ``main``).
        child_overrides: Profile fields per child profile, e.g.
            ``{"explore": {"max_steps": 4}}`` for the children ``Task`` launches.
        scratch: Work on a temporary copy of ``target`` (default), so it is never modified.
        verify: Check the final answer with the verification profile (None: the profile's).
        cache: Replay identical model calls (as in ``sl.explore``).
        config: A ``LabConfig``, a ``profiles.yaml`` path, or None for the default file.
        runs_dir: Where the traces go; default: the config's ``trace_dir``.
        context_mode: What a ``Task`` child starts from besides its task: ``isolated`` (nothing),
            ``brief`` (the parent's structured ``context``, the default) or ``forked`` (also the
            parent's conversation so far, cut to fit the child's context budget).
        child_model: Every child's model, whatever the parent asks: ``"light"``/``"main"``/``"none"``,
            a model object or a factory (None: the parent's choice, served by ``model``).
        forced_delegation: The harness sends ``task`` verbatim to one explore child before the
            parent's first turn and gives the parent its envelope (pass ``tools=[]`` to leave the
            parent no tool choice): the delegation study's ``forced-delegation`` arm.
        **overrides: Agent profile fields, e.g. ``max_steps=4, tools=["Read", "Grep", "Task"]``.
    """
    from subagent_lab.agents.parent import MainAgent

    lab = as_config(config)
    runs = runs_root(lab, runs_dir)
    factory, choice = factory_for(model, lab, cache, runs)
    if choice is not None:
        overrides = {**overrides, "model": choice}
    base = lab.agents.get(profile) or (AgentProfile.default() if profile == "main" else None)
    if base is None:
        raise ConfigError(f"unknown agent profile {profile!r}; known: {sorted(lab.agents)}")
    agents = {**lab.agents, profile: _validated(AgentProfile, base, overrides, f"agents.{profile}")}
    profiles = dict(lab.profiles)
    for name, fields in (child_overrides or {}).items():
        profiles[name] = _validated(RuntimeProfile, lab.profile(name), fields, f"profiles.{name}")
    lab = lab.model_copy(update={"agents": agents, "profiles": profiles, "trace_dir": str(runs)})
    text, root = _task_and_workspace(task, target)
    child_factory, child_choice = None, None
    if isinstance(child_model, str):
        child_choice = as_choice(child_model)
    elif child_model is not None:
        child_factory = factory_for(child_model, lab, cache, runs)[0]
    agent = MainAgent(lab, root, model_factory=factory, scratch=scratch, verify=verify, profile=profile,
                      context_mode=context_mode, child_model=child_choice, child_model_factory=child_factory,
                      forced_delegation=forced_delegation)  # fmt: skip
    return agent.run(text)


def _task_and_workspace(task: str | BenchTask, workspace: str | Path | None) -> tuple[str, Path]:
    """The task text and the workspace: a benchmark task brings its prompt and its package."""
    if isinstance(task, str):
        return task, Path(workspace if workspace is not None else ".")
    return task.prompt, Path(workspace) if workspace is not None else task.workspace_root(fetch=True)


def _validated(kind: type[Any], base: Any, fields: Mapping[str, Any], where: str) -> Any:
    """``base`` with ``fields`` applied, validated like the YAML (ConfigError names the field)."""
    return apply_overrides(kind, base, fields, where=f"overrides for {where}") if fields else base
