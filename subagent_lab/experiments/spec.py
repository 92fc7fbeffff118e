"""The grid of a sweep: its spec, one cell's spec, task selection and the planned runs.

Repeats are independent: each (task, model, repeat) runs with its own seed, derived from the
sweep's base seed (``experiments.stamp``), so its requests, and their call-cache keys, differ
from every other repeat's and no two tasks share a seed. With temperature 0 (the shipped models)
llama.cpp decodes greedily and a different seed gives the same output: the repeats are then
independent requests but deterministic runs, and their spread is zero. Set
``SweepSpec.temperature`` above 0 to sample.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from subagent_lab.bench.suite import BenchTask, is_suite_id, load_suite, suite_label
from subagent_lab.config.profiles import LabConfig, load_config
from subagent_lab.core.types import ModelChoice
from subagent_lab.experiments.stamp import Provenance, Seeding, derive_seed, provenance, row_stamp


class Variant(BaseModel):
    """A labelled set of profile overrides (e.g. a budget setting)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    label: str = "default"
    overrides: dict[str, Any] = Field(default_factory=dict)


class SweepSpec(BaseModel):
    """The grid. Tasks are suite task ids, or the selectors ``smoke``, ``all`` or a task kind."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = "sweep"
    split: str = "dev"
    """The suite the tasks are chosen from (``bench.suite.load_suite``): a built-in suite id
    (``dev``, ``dev-tree``, ``test``) or a task file's path (docs/task-files.md)."""
    tasks: tuple[str, ...] = ("smoke",)
    models: tuple[ModelChoice, ...] = ("light", "main")
    profile: str = "explore"
    variants: tuple[Variant, ...] = (Variant(),)
    scaffolds: tuple[str, ...] = ()
    """Scaffold presets (``profiles.yaml: scaffolds``, ``plain`` built in), one grid axis: each run
    applies its preset's every field, then its variant's overrides. Empty: the profile as written."""
    repeats: int = Field(default=1, ge=1)
    seed: int = 0
    """Base seed of the sweep; each run's seed is derived from it (see ``seeding``)."""
    seeding: Seeding = "derived"
    """``derived``: repeat ``i`` of a (task, model) runs with ``derive_seed(seed, task, model, i)``;
    ``base``: with ``seed + i`` for every task (the old scheme, which a call cache may hold)."""
    temperature: float | None = Field(default=None, ge=0.0, le=2.0)
    """Sampling temperature of every run; None keeps each model's. Above 0, repeats sample."""

    def key(self) -> str:
        """A short hash identifying the spec (its directory name, hence what a sweep resumes). A
        task file counts by its suite name (``suite_label``), not by where it lives: the same file
        moved, or named by another relative path, resumes the same sweep (a changed file is told
        apart by the provenance's task hash, ``experiments.grid.grid_dir``)."""
        if is_suite_id(self.split):  # the built-in suites' keys as they always were
            return hashlib.sha256(self.model_dump_json().encode()).hexdigest()[:10]
        data = self.model_dump(mode="json") | {"split": f"file:{suite_label(self.split)}"}
        return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()[:10]


class RunSpec(BaseModel):
    """One cell of the grid; everything a worker (thread, process, Dask node) needs."""

    run_key: str
    task: BenchTask
    model: ModelChoice
    profile: str
    variant: Variant
    suite: str = "dev"
    """The suite the task was drawn from: ``SweepSpec.split``'s id (``dev``, ``dev-tree``, ``test``),
    or a task file's ``suite:`` name (default: its stem)."""
    scaffold: str | None = None
    """The preset applied under the variant's overrides (None: the profile as written)."""
    scaffold_fields: dict[str, Any] = Field(default_factory=dict)
    """The preset's resolved fields (empty without a preset)."""
    repeat: int
    seed: int = 0
    """Sent with every model call of the run; distinct per repeat."""
    temperature: float | None = None
    """None: the model's own."""
    config_path: str | None
    trace_dir: str
    cache_dir: str | None
    stamp: dict[str, Any] = Field(default_factory=dict)
    """The sweep's provenance columns (``provenance.row_stamp``)."""


def select_tasks(selectors: Iterable[str], suite: list[BenchTask] | None = None) -> list[BenchTask]:
    """Resolve ids and selectors (``smoke``, ``all``, a kind) to tasks, in suite order."""
    suite = suite if suite is not None else load_suite()
    wanted = set(selectors)
    known = {t.id for t in suite} | {"smoke", "all"} | {t.kind for t in suite}
    unknown = sorted(wanted - known)
    if unknown:
        raise ValueError(
            f"unknown task ids or selectors {unknown}; use ids from the suite, 'smoke', 'all' or a kind"
        )
    return [
        t
        for t in suite
        if "all" in wanted or t.id in wanted or t.kind in wanted or ("smoke" in wanted and t.smoke)
    ]


def spec_tasks(spec: SweepSpec) -> list[BenchTask]:
    """The tasks of a sweep: its selectors over its split."""
    return select_tasks(spec.tasks, load_suite(split=spec.split))


def plan_runs(
    spec: SweepSpec,
    *,
    config_path: str | None,
    out: Path,
    cache: bool,
    lab: LabConfig | None = None,
    prov: Provenance | None = None,
    tasks: list[BenchTask] | None = None,
) -> list[RunSpec]:
    """Every run of the grid, in a deterministic order, grouped by model; ``prov`` and ``tasks``
    as the grid engine computed them once (None: computed here).

    The embedded server holds one model at a time: grouping by model avoids reloading weights and
    losing the prompt cache between neighbouring runs.
    """
    lab = lab or load_config(config_path)
    tasks = spec_tasks(spec) if tasks is None else tasks
    prov = prov or provenance(lab, tasks, spec.models)
    stamps = {m: row_stamp(prov, m) for m in spec.models}
    suite = suite_label(spec.split)
    presets = {name: lab.scaffold(name).resolved() for name in spec.scaffolds}
    scaffolds: list[str | None] = list(spec.scaffolds) or [None]
    return [
        RunSpec(
            run_key="|".join([task.id, model, *([scaffold] if scaffold else []), variant.label, str(repeat)]),
            task=task,
            model=model,
            profile=spec.profile,
            variant=variant,
            suite=suite,
            scaffold=scaffold,
            scaffold_fields=presets.get(scaffold, {}) if scaffold else {},
            repeat=repeat,
            seed=(
                derive_seed(spec.seed, task.id, model, repeat)
                if spec.seeding == "derived"
                else spec.seed + repeat
            ),
            temperature=spec.temperature,
            config_path=config_path,
            trace_dir=str(out / "traces"),
            cache_dir=str(out.parent / "model-cache") if cache else None,
            stamp=stamps[model],
        )
        for model in spec.models
        for task in tasks
        for scaffold in scaffolds
        for variant in spec.variants
        for repeat in range(spec.repeats)
    ]
