"""What the delegation study runs (``experiments.delegation`` runs it): its arms and cells, its
spec, its tasks, the plan of its parent runs and the configuration each run uses.

One grid axis, the **cell**, is an arm and the child's context mode:

- ``alone``: the parent with Read/Grep/Glob;
- ``delegate-light`` / ``delegate-main``: the parent with Task only, every child on light / main;
- ``forced-delegation``: the harness sends the question verbatim to one explore child (light) and
  the parent, holding no tool, composes its answer from the envelope: the value of delegation
  without the parent model's skill at deciding to delegate;
- context modes of the child: ``isolated`` (the task only), ``brief`` (the parent's structured
  ``context``), ``forked`` (the parent's conversation so far, within the child's context budget).

``STUDY_CELLS`` is the issue's grid: the four arms isolated, and the three modes on
``delegate-light``.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from subagent_lab.agents.task_tool import ContextMode
from subagent_lab.bench.suite import BenchTask, load_suite
from subagent_lab.config.agent_profile import AgentProfile, apply_overrides
from subagent_lab.config.profiles import LabConfig
from subagent_lab.config.runtime_profile import RuntimeProfile
from subagent_lab.core.types import ModelChoice
from subagent_lab.experiments.stamp import Provenance, provenance, row_stamp

Arm = Literal["alone", "delegate-light", "delegate-main", "forced-delegation"]
ARMS: tuple[Arm, ...] = ("alone", "delegate-light", "delegate-main", "forced-delegation")
ARM_TOOLS: dict[Arm, tuple[str, ...]] = {
    "alone": ("Read", "Grep", "Glob"),
    "delegate-light": ("Task",),
    "delegate-main": ("Task",),
    "forced-delegation": (),
}
ARM_CHILD: dict[Arm, ModelChoice | None] = {
    "alone": None, "delegate-light": "light", "delegate-main": "main", "forced-delegation": "light",
}  # fmt: skip
EVIDENCE_ASK = (
    "Find the answer in the workspace with your tools; do not answer from memory. In your final answer "
    "cite every place that shows it as path:line (for example pkg/module.py:42 or pkg/module.py:42-50)."
)
"""Appended to every arm's question, the same words for each: the parent's answer must carry evidence."""
PARENT_BUDGET: dict[str, Any] = {
    "max_steps": 6,
    "context_token_budget": 8000,
    "total_token_budget": 24000,
    "contract": "AnswerResult",
}
"""The parent's limits in every arm, and its answer contract: the locations in a list of their own,
since a free-text answer cites nothing a scorer can read (docs/evaluation.md, "The delegation
study")."""
CHILD_BUDGET: dict[str, Any] = {"max_steps": 6}


class Cell(BaseModel):
    """One arm with one context mode (``alone`` has no child: its mode is ``isolated``)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    arm: Arm
    context_mode: ContextMode = "isolated"

    @property
    def label(self) -> str:
        """``delegate-light`` for the isolated cell, ``delegate-light/forked`` for another mode."""
        return self.arm if self.context_mode == "isolated" else f"{self.arm}/{self.context_mode}"


STUDY_CELLS: tuple[Cell, ...] = (
    *(Cell(arm=arm) for arm in ARMS),
    Cell(arm="delegate-light", context_mode="brief"),
    Cell(arm="delegate-light", context_mode="forked"),
)


class DelegationSpec(BaseModel):
    """The study's grid: splits x tasks x cells x repeats."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = "delegation"
    splits: tuple[str, ...] = ("dev", "test")
    tasks_per_split: int = Field(default=10, ge=1)
    """Tasks taken from each split, round-robin over the task kinds (all five in 10)."""
    cells: tuple[Cell, ...] = STUDY_CELLS
    repeats: int = Field(default=1, ge=1)
    parent_model: ModelChoice = "main"
    baseline: bool = False
    """Every model is the no-model baseline (parent ``ParentBaseline``, children ``BaselineModel``)."""
    scaffold: str | None = "retrieval-start"
    """The children's scaffold preset (one for every arm); None: the explore profile as written."""
    parent_budget: dict[str, Any] = Field(default_factory=lambda: dict(PARENT_BUDGET))
    child_budget: dict[str, Any] = Field(default_factory=lambda: dict(CHILD_BUDGET))
    children_token_cap: int | None = 60000

    def key(self) -> str:
        return hashlib.sha256(self.model_dump_json().encode()).hexdigest()[:10]


class StudyRun(BaseModel):
    """One parent run of the grid: everything a worker needs."""

    run_key: str
    task: BenchTask
    split: str
    cell: Cell
    repeat: int
    spec: DelegationSpec
    config_path: str | None
    trace_dir: str
    cache_dir: str | None = None
    """The model-call cache the configured models go through (None: no cache)."""
    stamp: dict[str, Any] = Field(default_factory=dict)


def study_tasks(split: str, n: int) -> list[BenchTask]:
    """``n`` tasks of ``split``, round-robin over its kinds in suite order (every kind early)."""
    suite = load_suite(split=split)
    kinds = list(dict.fromkeys(t.kind for t in suite))
    queues = {k: [t for t in suite if t.kind == k] for k in kinds}
    picked: list[BenchTask] = []
    while len(picked) < min(n, len(suite)):
        for kind in kinds:
            if queues[kind] and len(picked) < n:
                picked.append(queues[kind].pop(0))
    return picked


def study_models(spec: DelegationSpec) -> list[ModelChoice]:
    """The model choices the study runs (its provenance's weights; the first stamps its rows)."""
    return ["none"] if spec.baseline else [spec.parent_model, "light", "main"]


def plan_study(
    spec: DelegationSpec,
    *,
    config_path: str | None,
    out: Path,
    lab: LabConfig,
    cache: bool = False,
    prov: Provenance | None = None,
) -> list[StudyRun]:
    """Every parent run of the study, in a deterministic order: task by task, the splits taking
    turns (dev's first task, test's first, dev's second, ...), every cell of a task together, so a
    study stopped early still holds every cell, paired, on both splits. ``prov``: the study's, as
    the grid engine computed it once (None: computed here); each split's rows carry its own
    suite hash."""
    models = study_models(spec)
    per_split: dict[str, list[BenchTask]] = {s: study_tasks(s, spec.tasks_per_split) for s in spec.splits}
    prov = prov or provenance(lab, [t for tasks in per_split.values() for t in tasks], models)
    stamps = {s: row_stamp(prov.for_tasks(tasks), models[0]) for s, tasks in per_split.items()}
    cache_dir = str(out.parent / "model-cache") if cache else None
    runs: list[StudyRun] = []
    for index in range(max((len(t) for t in per_split.values()), default=0)):
        for split, tasks in per_split.items():
            if index >= len(tasks):
                continue
            for cell in spec.cells:
                for repeat in range(spec.repeats):
                    key = "|".join([split, tasks[index].id, cell.label, str(repeat)])
                    runs.append(StudyRun(run_key=key, task=tasks[index], split=split, cell=cell,
                                         repeat=repeat, spec=spec, config_path=config_path,
                                         trace_dir=str(out / "traces"), stamp=stamps[split],
                                         cache_dir=cache_dir))  # fmt: skip
    return runs


def study_config(lab: LabConfig, run: StudyRun) -> LabConfig:
    """The configuration one run uses: the parent's tools and budgets for its arm, the children's
    budgets and scaffold preset, traces under the study's directory."""
    spec = run.spec
    base = lab.agents.get("main") or AgentProfile.default()
    parent = {**spec.parent_budget, "tools": list(ARM_TOOLS[run.cell.arm]), "verify": False}
    parent["model"] = "none" if spec.baseline else spec.parent_model
    agent = apply_overrides(AgentProfile, base, parent, where="delegation study: agents.main")
    preset = lab.scaffold(spec.scaffold).resolved() if spec.scaffold else {}
    explore = apply_overrides(RuntimeProfile, lab.profile("explore"), preset, spec.child_budget,
                              where="delegation study: profiles.explore")  # fmt: skip
    return lab.model_copy(
        update={
            "agents": {**lab.agents, "main": agent},
            "profiles": {**lab.profiles, "explore": explore},
            "trace_dir": run.trace_dir,
        }
    )
