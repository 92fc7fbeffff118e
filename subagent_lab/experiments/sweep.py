"""Sweeps: tasks x models x scaffolds x profile variants x repeats, one persisted row per run.

A sweep is a grid (``SweepGrid``) on the one grid engine (``experiments.grid``), which owns its
directory, provenance, resume, server, progress and executor (a Dask cluster included). The unit
of work is the picklable ``RunSpec`` (``experiments.spec``) run by ``execute_run``
(``experiments.execute``).
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Executor
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

import pandas as pd

from subagent_lab.agents.launcher import ModelFactory
from subagent_lab.bench.suite import BenchTask, validate_tasks
from subagent_lab.config.agent_profile import apply_overrides
from subagent_lab.config.profiles import LabConfig, load_config
from subagent_lab.config.runtime_profile import RuntimeProfile
from subagent_lab.core.types import FLOOR_CHOICES, ModelChoice
from subagent_lab.experiments.estimate import default_workers, estimate_lines, recorded_walls
from subagent_lab.experiments.execute import execute_run
from subagent_lab.experiments.grid import Grid, Row, grid_dir, run_grid
from subagent_lab.experiments.rows import (
    OUTCOMES,
    SCORE_COLUMNS,
    TOOLS,
    ResultLog,
    base_row,
    load_results,
    result_row,
)
from subagent_lab.experiments.spec import RunSpec, SweepSpec, Variant, plan_runs, select_tasks, spec_tasks
from subagent_lab.experiments.stamp import Provenance, provenance

__all__ = [  # the grid and the rows are re-exported: callers import a sweep's names from here
    "OUTCOMES", "SCORE_COLUMNS", "TOOLS", "ResultLog", "RunSpec", "SweepGrid", "SweepSpec", "Variant",
    "base_row", "execute_run", "load_results", "plan_runs", "result_row", "run_sweep", "select_tasks",
    "spec_tasks", "sweep_dir", "sweep_estimate", "sweep_workers", "with_give_up",
]  # fmt: skip


@dataclass
class SweepGrid(Grid[RunSpec]):
    """A sweep on the grid engine: its cells are ``plan_runs``'s, each run by ``execute_run``."""

    spec: SweepSpec
    cache: bool = True
    """Runs go through the model-call cache beside the sweep directories."""
    model_factory: ModelFactory | None = None

    @cached_property
    def tasks(self) -> list[BenchTask]:
        """The sweep's tasks, selected once."""
        return spec_tasks(self.spec)

    def check(self, lab: LabConfig) -> None:
        _check_variants(self.spec, lab)
        # Every workspace made (checkouts, sdists) and every gold span checked before any run starts.
        validate_tasks(self.tasks, where=self.spec.split)

    def provenance(self, lab: LabConfig) -> Provenance:
        return provenance(lab, self.tasks, self.spec.models)

    def cells(self, lab: LabConfig, out: Path, prov: Provenance) -> list[RunSpec]:
        return plan_runs(self.spec, config_path=lab.source, out=out, cache=self.cache, lab=lab, prov=prov,
                         tasks=self.tasks)  # fmt: skip

    def execute(self, cell: RunSpec, factory: ModelFactory | None = None) -> Row:
        return execute_run(cell, factory or self.model_factory)

    def identity(self, cell: RunSpec) -> Row:
        return base_row(cell)

    def models(self, cells: list[RunSpec]) -> set[ModelChoice]:
        return {cell.model for cell in cells}


def sweep_dir(spec: SweepSpec, out_dir: str | Path | None = None, lab: LabConfig | None = None) -> Path:
    """The directory ``run_sweep`` uses (``experiments.grid.grid_dir``): ``<out_dir>/<name>-<grid
    hash>``, or ``...-<provenance hash>`` after a change of code, config, prompts, tasks or weights.
    Without ``lab`` there is nothing to compare: the grid's first directory (``out_dir`` defaults
    to the default configuration's ``trace_dir``). ``run_sweep``'s ``df.attrs["sweep_dir"]`` says
    the same without computing the provenance again."""
    base = Path(out_dir) if out_dir else (lab or load_config()).trace_root() / "sweeps"
    return grid_dir(spec, base, SweepGrid(spec).provenance(lab) if lab is not None else None)


def sweep_workers(spec: SweepSpec) -> int:
    """The default workers of ``spec``: one when a language model runs (its temperature-0 repeats
    then stay on one server, decoding alike), two for floors only (``estimate.default_workers``)."""
    return default_workers(spec.models, FLOOR_CHOICES)


def sweep_estimate(spec: SweepSpec, workers: int, tasks: list[BenchTask] | None = None) -> list[str]:
    """The lines to print before ``spec`` starts: its runs per model x the median wall time of
    that model's committed rows (``experiments.estimate``), and the total on ``workers``."""
    n = len(spec_tasks(spec) if tasks is None else tasks)
    per_model = n * max(len(spec.scaffolds), 1) * len(spec.variants) * spec.repeats
    return estimate_lines({str(m): per_model for m in spec.models}, recorded_walls(), workers)


def with_give_up(df: pd.DataFrame, tasks: list[BenchTask], split: str) -> pd.DataFrame:
    """``df`` and, where ``tasks`` hold an absent task, the ``give-up`` floor's rows (``bench.giveup``:
    the constant "No evidence." answer, scored, not run) under each scaffold and variant of ``df``:
    the floor the absent tasks are read against. Not saved to the sweep's log."""
    from subagent_lab.bench.giveup import GIVE_UP, give_up_rows
    from subagent_lab.bench.suite import suite_label

    arms = set(df["model_choice"].astype(str)) if "model_choice" in df.columns else set()
    if df.empty or not any(t.kind == "absent" for t in tasks) or GIVE_UP in arms:
        return df
    cells = df[[c for c in ("scaffold", "variant") if c in df.columns]].drop_duplicates()
    label = str(df["split"].iloc[0]) if "split" in df.columns else suite_label(split)
    records = [{str(k): v for k, v in cell.items()} for cell in cells.to_dict("records")]
    rows = [row for cell in records for row in give_up_rows(tasks, label, **cell)]
    out = pd.concat([df, pd.DataFrame(rows)], ignore_index=True)
    out.attrs.update(df.attrs)
    return out


def run_sweep(
    spec: SweepSpec,
    *,
    config_path: str | Path | None = None,
    out_dir: str | Path | None = None,
    executor: Executor | None = None,
    max_workers: int = 1,
    model_factory: ModelFactory | None = None,
    cache: bool = True,
    progress: bool = True,
    on_row: Callable[[dict[str, Any]], None] | None = None,
    cluster: str | None = None,
    storage: str | None = None,
) -> pd.DataFrame:
    """Run (or resume) a sweep and return its table, one row per run (``df.attrs["sweep_dir"]``),
    with the ``give-up`` floor's rows where the tasks hold an absent one (``with_give_up``).

    ``cluster``: a Dask scheduler address (``tcp://host:8786``); the runs go to its workers, which
    need no file of the driver's (``subagent_lab.experiments.cluster``); rows then also say
    ``worker``, ``attempts`` and ``retried``. ``storage``: with ``cluster``, an fsspec URL the
    workers write traces to instead of returning them. Without ``cluster``, ``executor`` (any
    ``concurrent.futures.Executor``) or a pool of ``max_workers`` threads runs them.
    """
    grid = SweepGrid(spec, cache=cache, model_factory=model_factory)
    if progress and model_factory is None:  # the configured models: their recorded times apply
        for line in sweep_estimate(spec, max_workers, grid.tasks):
            print(line)
    df = run_grid(grid, load_config(config_path), out_dir=out_dir, executor=executor, max_workers=max_workers,
                  cluster=cluster, storage=storage, progress=progress, on_row=on_row)  # fmt: skip
    df.attrs["sweep_dir"] = df.attrs["grid_dir"]
    return with_give_up(df, grid.tasks, spec.split)


def _check_variants(spec: SweepSpec, lab: LabConfig) -> None:
    """Validate every variant's overrides before any run starts (a ConfigError names the variant)."""
    base = lab.profile(spec.profile)
    presets = {name: lab.scaffold(name).resolved() for name in spec.scaffolds} or {"": {}}
    for variant in spec.variants:
        for name, fields in presets.items():
            where = f"variant {variant.label!r}" + (f" on scaffold {name!r}" if name else "")
            apply_overrides(
                RuntimeProfile, base, fields, variant.overrides, where=f"{where} of sweep {spec.name!r}"
            )
