"""``sl.sweep``: a grid of benchmark tasks x models x scaffolds x variants x repeats, one row per run
(the grid engine, ``experiments.grid``, behind it). ``model=`` takes the forms of
``subagent_lab.api.runs``."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from subagent_lab.agents.launcher import ModelFactory
from subagent_lab.api.runs import ModelArg, ProfileArg, as_choice, factory_for, runs_root, with_profile
from subagent_lab.config.profiles import LabConfig, load_config

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["is_task_file", "sweep"]


def sweep(
    tasks: str | Sequence[str] = ("smoke",),
    models: str | Sequence[str] = ("light", "main"),
    variants: Mapping[str, Mapping[str, Any]] | None = None,
    repeats: int = 1,
    *,
    profile: ProfileArg = "explore",
    temperature: float | None = None,
    seed: int = 0,
    workers: int = 1,
    cache: bool | None = None,
    name: str = "sweep",
    model: ModelArg = None,
    config: str | Path | None = None,
    runs_dir: str | Path | None = None,
    progress: bool = True,
    scaffolds: str | Sequence[str] | None = None,
    cluster: str | None = None,
    storage: str | None = None,
    suite: str | Path | None = None,
    **overrides: Any,
) -> pd.DataFrame:
    """Run (or resume) a grid of benchmark tasks x models x scaffolds x variants x repeats; one row
    per run. ``sl.sweep("my_tasks.yaml", ["none", "light", "main"])`` runs every task of a task file.

    Rows are saved as runs finish (``results.jsonl`` in the sweep's directory, named by
    ``name`` and a hash of the grid, given as ``df.attrs["sweep_dir"]``); running the same grid
    again reads the finished runs instead of redoing them. Each row scores the run against the
    task's gold evidence (``quality``, ``gold_recall_line``, ...).

    Args:
        tasks: Suite task ids, or ``"smoke"``, ``"all"`` or a task kind (``"locate"``, ...); or a
            task file's path (``.yaml``, ``.yml``, ``.jsonl``: docs/task-files.md), meaning all its
            tasks. A task without gold spans is run and tabulated, its score columns empty.
        models: Model choices to compare, e.g. ``["none", "light", "main"]`` (``none``: the no-model
            baseline; ``retrieval``: the retrieval floor, Find and Search with no model; floors
            cost no model time, and every table reads each model against the strongest floor).
        variants: Labelled profile overrides, e.g. ``{"small": {"max_steps": 2}, "large": {}}``;
            None: one variant (``default``, or ``custom`` when ``overrides`` are given).
        repeats: Runs per cell; each (task, model, repeat) gets its own seed derived from ``seed``.
        profile: The child profile every run uses: a name in ``profiles.yaml``, or a profile object
            (``sl.import_agent(path).profile``), run as the profile of that name (else
            ``explore``) with the object's every field as overrides under the variants' own (its
            scaffold too unless ``scaffolds`` are given, its model never: ``models`` chooses);
            without ``variants`` its one variant is labelled with the object's name.
        temperature: Sampling temperature of every run (None: each model's; above 0, repeats
            sample).
        seed: The base seed.
        workers: Runs in parallel (the embedded server serves a few at a time).
        cache: Replay identical model calls from ``<runs_dir>/sweeps/model-cache``; None (the
            default) means on for the configured models and off for a custom ``model``.
        name: The sweep's name (its directory's prefix).
        model: None (the configured models), a model object or a factory (tests, demos).
        config: A ``profiles.yaml`` path, or None for the default file. Workers reload it from
            the file, so an edited ``LabConfig`` cannot be passed: use ``variants`` instead.
        runs_dir: The sweep's directory is ``<runs_dir>/sweeps/<name>-<hash>``, as with
            ``subagent-lab sweep --runs-dir``; default: the config's ``trace_dir`` (``runs/`` in the
            working directory, or ``$SUBAGENT_LAB_RUNS``). (``subagent-lab sweep --out DIR`` names
            the sweeps directory itself: ``DIR/<name>-<hash>``.)
        progress: Show a progress bar.
        scaffolds: Scaffold presets (``"plain"``, ``"aided"``, ... from ``profiles.yaml``), one grid
            axis: every model runs under each, so a comparison holds the scaffold fixed. None: the
            profile as written.
        cluster: A Dask scheduler's address (``tcp://host:8786``): the runs go to its workers, which
            need none of this machine's files (docs/cluster.md).
        storage: With ``cluster``, an fsspec URL (``file://``, ``s3://``) the workers write traces to.
        suite: The suite ``tasks`` selects from: a task file's path or a built-in suite id (``dev``,
            the default, ``dev-tree``, ``test``).
        **overrides: Profile fields applied to every variant (a variant's own take precedence).
    """
    from subagent_lab.experiments.sweep import SweepSpec, Variant, run_sweep

    if isinstance(config, LabConfig):
        raise TypeError("sweep(config=) takes a profiles.yaml path: workers reload the configuration")
    lab = load_config(config)
    out = runs_root(lab, runs_dir) / "sweeps"
    factory: ModelFactory | None = None
    if model is not None:
        if isinstance(model, str):
            raise TypeError("sweep(model=) takes a model object or factory; choose models with models=")
        if cache:
            raise ValueError(
                "the call cache is keyed by endpoint and model id: a custom model's answers would be "
                "replayed as the configured model's; pass cache=False"
            )
        factory = factory_for(model, lab, False, out)[0]
    base_name = profile if isinstance(profile, str) else "explore"
    label = "custom" if overrides else "default"
    if not isinstance(profile, str):
        # Workers reload the configuration from its file: the object travels as overrides.
        with_profile(lab, profile)  # a ConfigError here, before any run
        base_name = profile.name if profile.name in lab.profiles else "explore"
        skip = {"name", "model", *(("scaffold",) if scaffolds else ())}
        overrides = {**profile.model_dump(mode="json", exclude=skip), **overrides}
        label = profile.name
    table = variants if variants is not None else {label: {}}
    selectors: tuple[str, ...] = (tasks,) if isinstance(tasks, str) else tuple(tasks)
    if suite is None and len(selectors) == 1 and is_task_file(selectors[0]):
        suite, selectors = selectors[0], ("all",)
    spec = SweepSpec(
        name=name,
        split=str(Path(suite).resolve())
        if suite is not None and is_task_file(suite)
        else str(suite or "dev"),
        tasks=selectors,
        models=tuple(as_choice(m) for m in ([models] if isinstance(models, str) else models)),
        profile=base_name,
        variants=tuple(Variant(label=k, overrides={**overrides, **v}) for k, v in table.items()),
        scaffolds=(scaffolds,) if isinstance(scaffolds, str) else tuple(scaffolds or ()),
        repeats=repeats,
        seed=seed,
        temperature=temperature,
    )
    return run_sweep(  # its df.attrs["sweep_dir"]: the directory, found with the provenance computed once
        spec,
        config_path=lab.source,
        out_dir=out,
        max_workers=workers,
        model_factory=factory,
        cache=factory is None if cache is None else cache,
        progress=progress,
        cluster=cluster,
        storage=storage,
    )


def is_task_file(value: str | Path) -> bool:
    """Whether ``value`` names a task file (by its suffix, or an existing file) rather than a suite
    id, a task id or a selector."""
    return Path(value).suffix in (".yaml", ".yml", ".jsonl") or Path(value).is_file()
