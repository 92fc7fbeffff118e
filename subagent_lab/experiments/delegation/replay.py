"""What replaying one parent run of the delegation study needs (``sl.study_credit``): the
configuration its arm ran under, the ``MainAgent`` arguments the arm sets, its task and, for a
baseline study, the no-model factories.

A study row names its parent's trace, ``<study dir>/traces/<session>/main-<run>.jsonl``; the study
directory holds ``spec.json``. Replays write their traces under ``<study dir>/replays``, apart
from the study's own.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeAlias

import pandas as pd

from subagent_lab.agents.launcher import ModelFactory
from subagent_lab.bench.suite import BenchTask
from subagent_lab.config.profiles import LabConfig, load_config
from subagent_lab.experiments.delegation.plan import (
    ARM_CHILD,
    Cell,
    DelegationSpec,
    StudyRun,
    study_config,
    study_tasks,
)

StudyRow: TypeAlias = "Mapping[str, Any] | pd.Series[Any]"  # a string: Series takes no [] at run time
"""One row of a study's table: a dict, or a pandas row (``df.iloc[i]``)."""


@dataclass(frozen=True)
class StudyReplay:
    """One study row's parent as a replay needs it."""

    config: LabConfig
    agent: dict[str, Any]
    """``MainAgent`` arguments of the row's arm (scratch, verify, cap, context mode, child model)."""
    task: BenchTask
    live: ModelFactory | None = None
    """The parent's model for a baseline study (``ParentBaseline``); None: the configured models."""
    child_live: ModelFactory | None = None


def study_replay(row: StudyRow, config_path: str | Path | None = None) -> StudyReplay:
    """The setup of the parent run of study row ``row`` (ValueError when its study directory or task
    cannot be found). ``config_path``: the ``profiles.yaml`` the study ran with (None: the default)."""
    trace = Path(str(row["trace_path"]))
    out = trace.parent.parent.parent
    spec_file = out / "spec.json"
    if not spec_file.is_file():
        raise ValueError(f"{trace}: no spec.json in {out}; not a parent trace of a delegation study")
    spec = DelegationSpec.model_validate_json(spec_file.read_text(encoding="utf-8"))
    split, task_id = str(row["split"]), str(row["task_id"])
    task = next((t for t in study_tasks(split, spec.tasks_per_split) if t.id == task_id), None)
    if task is None:
        raise ValueError(f"{out}: task {task_id!r} is not one of the study's {split} tasks")
    cell = Cell(arm=row["arm"], context_mode=row.get("context_mode") or "isolated")
    run = StudyRun(run_key=str(row.get("run_key", "")), task=task, split=split, cell=cell,
                   repeat=int(row.get("repeat", 0)), spec=spec, config_path=None,
                   trace_dir=str(out / "replays"))  # fmt: skip
    lab = study_config(load_config(config_path), run)
    agent: dict[str, Any] = dict(
        scratch=False,  # as the study: no arm holds Edit or Bash
        verify=False,
        children_token_cap=spec.children_token_cap,
        context_mode=cell.context_mode,
        child_model="none" if spec.baseline else ARM_CHILD[cell.arm],
        forced_delegation=cell.arm == "forced-delegation",
    )
    if not spec.baseline:
        return StudyReplay(lab, agent, task)
    from subagent_lab.experiments.parent_baseline import ParentBaseline
    from subagent_lab.models.baseline import BaselineModel

    return StudyReplay(lab, agent, task, lambda c, cfg: ParentBaseline(), lambda c, cfg: BaselineModel())
