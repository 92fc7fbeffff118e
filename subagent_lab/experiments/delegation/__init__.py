"""The delegation study: does a parent that delegates keep its context small, move cost to a
cheaper model, and at what price in answer quality (docs/evaluation.md, "The delegation study").

The explore suite's tasks are the parent's questions; its final answer must cite ``path:line``
evidence and is scored like an explore answer (``delegation_ledger.score_parent``). What the study
runs, its arms and cells (an arm with the child's context mode), its spec and the plan of its
parent runs, is ``experiments.delegation.plan``'s; this module runs it. The study is a grid
(``StudyGrid``) on the one grid engine (``experiments.grid``): rows go to ``results.jsonl`` as runs
finish, the same spec resumes, and ``cluster=`` runs it on a Dask cluster as a sweep runs.
``baseline=True`` runs every model as the no-model baseline (the parent ``ParentBaseline``, children
``BaselineModel``): the floor, and notebook 4's CI default.
"""

from __future__ import annotations

import time
import traceback
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

import pandas as pd

from subagent_lab.agents.launcher import ModelFactory, SubagentRequest, SubagentResult
from subagent_lab.agents.parent import MainAgent
from subagent_lab.agents.task_tool import TaskContext
from subagent_lab.bench.suite import BenchTask
from subagent_lab.config.endpoints import ModelConfig
from subagent_lab.config.parsed import parsed_config
from subagent_lab.config.profiles import LabConfig, load_config
from subagent_lab.core.model import Model
from subagent_lab.core.tool import ToolError
from subagent_lab.core.types import ModelChoice
from subagent_lab.experiments.delegation.ledger import (
    ledger_columns,
    parent_evidence,
    parent_ledgers,
    score_parent,
)
from subagent_lab.experiments.delegation.plan import (
    ARM_CHILD,
    EVIDENCE_ASK,
    DelegationSpec,
    StudyRun,
    plan_study,
    study_config,
    study_models,
    study_tasks,
)
from subagent_lab.experiments.delegation.plan import Cell as Cell  # re-exported: tests, benchmarks
from subagent_lab.experiments.grid import Grid, Row, grid_dir, run_grid
from subagent_lab.experiments.parent_baseline import ParentBaseline
from subagent_lab.experiments.rows import SCORE_COLUMNS
from subagent_lab.experiments.stamp import Provenance, provenance


def _factories(
    lab: LabConfig, run: StudyRun, parent: ModelFactory | None, child: ModelFactory | None
) -> tuple[ModelFactory, ModelFactory]:
    """The parent's and the children's model factories (the configured models behind the call
    cache when the run names one; custom factories as given)."""
    if run.spec.baseline:
        from subagent_lab.models.baseline import BaselineModel

        return parent or (lambda c, cfg: ParentBaseline()), child or (lambda c, cfg: BaselineModel())
    if parent is not None and child is not None:
        return parent, child
    from subagent_lab.local_models.factory import default_model_factory

    default = default_model_factory(lab)
    if run.cache_dir:
        from subagent_lab.local_models.namespace import config_namespace
        from subagent_lab.models.cache import CachingModel

        inner, where = default, run.cache_dir

        def default(choice: ModelChoice, cfg: ModelConfig) -> Model:
            return CachingModel(inner(choice, cfg), where, namespace=config_namespace(lab, cfg))

    return parent or default, child or parent or default


def study_row(run: StudyRun) -> dict[str, Any]:
    """The columns of a parent run's row that its plan decides (a failed row is these and why)."""
    return {
        "run_key": run.run_key, "split": run.split, "task_id": run.task.id, "kind": run.task.kind,
        "package": run.task.package, "arm": run.cell.arm, "context_mode": run.cell.context_mode,
        "cell": run.cell.label, "repeat": run.repeat, "baseline": run.spec.baseline, **run.stamp,
    }  # fmt: skip


def execute_study_run(
    run: StudyRun, parent_factory: ModelFactory | None = None, child_factory: ModelFactory | None = None
) -> dict[str, Any]:
    """Run one parent of the grid and return its row; a crash becomes a row with the traceback."""
    started = time.time()
    row = study_row(run)
    try:
        lab = study_config(parsed_config(run.config_path), run)
        parents, children = _factories(lab, run, parent_factory, child_factory)
        root = run.task.workspace_root(fetch=True)  # a cluster worker makes its own
        agent = MainAgent(
            lab,
            root,
            model_factory=parents,
            child_model_factory=children,
            scratch=False,  # no arm holds Edit or Bash: the parent reads the workspace itself
            verify=False,
            children_token_cap=run.spec.children_token_cap,
            context_mode=run.cell.context_mode,
            child_model="none" if run.spec.baseline else ARM_CHILD[run.cell.arm],
            forced_delegation=run.cell.arm == "forced-delegation",
        )
        result = agent.run(f"{run.task.prompt.strip()}\n\n{EVIDENCE_ASK}")
        score = score_parent(run.task, result, root).model_dump(mode="json")
        row.update(ledger_columns(parent_ledgers(result, lab)))
        row.update(
            parent_model=result.model_used,
            child_model=",".join(dict.fromkeys(c.model_used for c in result.children)),
            terminal_reason=result.terminal_reason,
            status=result.status,
            detail=result.detail[-800:],
            steps=result.steps,
            sub_agents=len(result.children),
            answer=(result.answer or "")[:2000],
            answer_evidence=len(parent_evidence(result)),
            parent_cost_usd=result.cost_usd,
            children_cost_usd=result.total_cost_usd - result.cost_usd,
            total_cost_usd=result.total_cost_usd,
            elapsed_s=result.elapsed_s,
            usage_estimated=result.total_usage.estimated,
            trace_path=result.trace_path,
            child_traces=",".join(c.trace_path for c in result.children),
            error=None,
        )
        for key in SCORE_COLUMNS:
            value = score.get(key)
            row[key] = len(value) if isinstance(value, list) else value
    except Exception:  # recorded, not lost: the study goes on
        row.update(terminal_reason="crashed", status="failed", error=traceback.format_exc()[-3000:],
                   elapsed_s=time.time() - started)  # fmt: skip
    return row


@dataclass
class StudyGrid(Grid[StudyRun]):
    """The study on the grid engine: its cells are ``plan_study``'s, each run by ``execute_study_run``."""

    spec: DelegationSpec
    cache: bool = True
    """The configured models go through the model-call cache (never a custom or baseline model)."""
    parent_factory: ModelFactory | None = None
    child_factory: ModelFactory | None = None

    @property
    def model_factory(self) -> ModelFactory | None:  # type: ignore[override]
        """The parent's custom factory: it serves the children too unless they have their own."""
        return self.parent_factory

    @cached_property
    def tasks(self) -> list[BenchTask]:
        """Every split's tasks, split by split (the order the provenance hashes them in)."""
        return [t for split in self.spec.splits for t in study_tasks(split, self.spec.tasks_per_split)]

    def provenance(self, lab: LabConfig) -> Provenance:
        return provenance(lab, self.tasks, study_models(self.spec))

    def cells(self, lab: LabConfig, out: Path, prov: Provenance) -> list[StudyRun]:
        custom = self.parent_factory is not None or self.spec.baseline  # their calls never enter the cache
        cache = self.cache and not custom
        return plan_study(self.spec, config_path=lab.source, out=out, lab=lab, cache=cache, prov=prov)

    def execute(self, cell: StudyRun, factory: ModelFactory | None = None) -> Row:
        if factory is None or self.spec.baseline:  # the baseline's models are its own, everywhere
            return execute_study_run(cell, self.parent_factory, self.child_factory)
        return execute_study_run(cell, factory, self.child_factory or factory)

    def identity(self, cell: StudyRun) -> Row:
        return study_row(cell)

    def models(self, cells: list[StudyRun]) -> set[ModelChoice]:
        return set(study_models(self.spec))


def study_dir(spec: DelegationSpec, out_dir: str | Path | None = None, lab: LabConfig | None = None) -> Path:
    """The directory ``run_study`` uses (``experiments.grid.grid_dir``; default ``out_dir``:
    ``<trace_dir>/sweeps``): ``<name>-<spec hash>``, or ``...-<provenance hash>`` when that one
    exists (every study before the one grid engine) or the plain one holds rows of another code,
    configuration, prompt, task or weights version: rows of two versions never mix."""
    lab = lab or load_config()
    base = Path(out_dir) if out_dir else lab.trace_root() / "sweeps"
    return grid_dir(spec, base, StudyGrid(spec).provenance(lab))


def run_study(
    spec: DelegationSpec,
    *,
    config_path: str | Path | None = None,
    out_dir: str | Path | None = None,
    workers: int = 1,
    parent_factory: ModelFactory | None = None,
    child_factory: ModelFactory | None = None,
    progress: bool = False,
    cache: bool = True,
    on_row: Callable[[dict[str, Any]], None] | None = None,
    cluster: str | None = None,
    storage: str | None = None,
) -> pd.DataFrame:
    """Run (or resume) the study and return its table, one row per parent run (``df.attrs["study_dir"]``).

    ``cluster``: a Dask scheduler's address; the parent runs go to its workers as a sweep's runs do
    (``experiments.cluster``; ``storage``: an fsspec URL they write traces to). Else ``workers``
    threads run them."""
    grid = StudyGrid(spec, cache=cache, parent_factory=parent_factory, child_factory=child_factory)
    df = run_grid(grid, load_config(config_path), out_dir=out_dir, max_workers=workers, cluster=cluster,
                  storage=storage, progress=progress, on_row=on_row)  # fmt: skip
    df.attrs["study_dir"] = df.attrs["grid_dir"]
    return df


def run_children(
    ctx: TaskContext, requests: Sequence[SubagentRequest], *, parallel: bool
) -> tuple[list[SubagentResult | str], float]:
    """Launch ``requests`` as children of one parent turn, at once (one server slot each) or one
    after the other, under ``ctx``'s children's cap; each result, or why the cap refused it, in
    request order, and the wall time."""
    started = time.monotonic()

    def one(request: SubagentRequest) -> SubagentResult | str:
        try:
            return ctx.launch_capped(request.model_copy(deep=True))
        except ToolError as exc:
            return str(exc)

    if parallel:
        with ThreadPoolExecutor(max_workers=max(len(requests), 1)) as pool:
            results = list(pool.map(one, requests))
    else:
        results = [one(r) for r in requests]
    return results, time.monotonic() - started
