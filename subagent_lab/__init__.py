"""subagent_lab: a notebook-first research harness for read-only code-agent sub-agents.

One import is enough::

    import subagent_lab as sl

    result = sl.explore("Where is the YAML safe loader?", workspace="path/to/repo", max_steps=6)
    print(result.terminal_reason, result.summary)
    sl.inspect(result)                                   # the run, step by step
    df = sl.sweep(tasks="smoke", models=["light", "main"], max_steps=6)
    sl.compare(result, sl.rerun(result, model="main"))   # the same start on the bigger model

Importing the package has no side effects and loads nothing heavy (no pandas, openai or
ipywidgets, no files, no servers): every name below is imported on first use (PEP 562).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

_EXPORTS: dict[str, str] = {
    # running
    "explore": "subagent_lab.api.runs",
    "run": "subagent_lab.api.runs",
    "run_parent": "subagent_lab.api.runs",
    "rerun": "subagent_lab.api.rerun",
    "replay_parent": "subagent_lab.api.replay",
    "child_credit": "subagent_lab.api.credit",
    "study_credit": "subagent_lab.api.credit",
    "study_credit_table": "subagent_lab.api.credit",
    "sweep": "subagent_lab.api.sweeps",
    "load_config": "subagent_lab.config.profiles",
    "import_agent": "subagent_lab.config.agent_files",
    "export_agent": "subagent_lab.config.agent_files",
    "ScriptedModel": "subagent_lab.models.scripted",
    "SubagentResult": "subagent_lab.agents.launcher",
    "MainRunResult": "subagent_lab.agents.result",
    "RunResult": "subagent_lab.agents.result",
    # reading
    "load_runs": "subagent_lab.api.views",
    "trace_table": "subagent_lab.api.views",
    "bench_task": "subagent_lab.api.views",
    "bench_workspace": "subagent_lab.api.views",
    "load_tasks": "subagent_lab.bench.suite",
    "mine": "subagent_lab.api.mining",
    "validate_tasks": "subagent_lab.bench.suite",
    "score": "subagent_lab.api.views",
    "inspect": "subagent_lab.api.views",
    "compare": "subagent_lab.api.views",
    "pick_trace": "subagent_lab.widgets.sweep_explorer",
    "write_report": "subagent_lab.api.report",
    "to_inspect": "subagent_lab.api.inspect_export",
    # tables and plots of a sweep
    "comparison_sentences": "subagent_lab.analysis.headline",
    "floor_sentences": "subagent_lab.analysis.headline",
    "lift_table": "subagent_lab.analysis.headline",
    "readable_lift": "subagent_lab.analysis.headline",
    "headline": "subagent_lab.analysis.summary",
    "summarize": "subagent_lab.analysis.summary",
    "terminal_reasons": "subagent_lab.analysis.summary",
    "budget_curve": "subagent_lab.analysis.summary",
    "plot_terminal_reasons": "subagent_lab.analysis.summary",
    "plot_tokens_vs_quality": "subagent_lab.analysis.summary",
    "plot_budget_curve": "subagent_lab.analysis.summary",
    # the delegation study (notebook 4)
    "DelegationSpec": "subagent_lab.experiments.delegation.plan",
    "run_study": "subagent_lab.experiments.delegation",
    "study_tasks": "subagent_lab.experiments.delegation.plan",
    "run_ledger": "subagent_lab.experiments.delegation.ledger",
    "complete_tasks": "subagent_lab.experiments.delegation.table",
    "plot_quality_vs_context": "subagent_lab.experiments.delegation.table",
    "readable_study": "subagent_lab.experiments.delegation.table",
    "study_sentences": "subagent_lab.experiments.delegation.table",
    "study_table": "subagent_lab.experiments.delegation.table",
    "credit_runs": "subagent_lab.experiments.delegation.credit",
    "credit_by_swap": "subagent_lab.experiments.delegation.credit",
}
"""Public name -> the module defining it."""

__all__ = [  # the names of _EXPORTS (a test keeps the two equal)
    "DelegationSpec",
    "MainRunResult",
    "RunResult",
    "ScriptedModel",
    "SubagentResult",
    "__version__",
    "bench_task",
    "bench_workspace",
    "budget_curve",
    "child_credit",
    "compare",
    "comparison_sentences",
    "complete_tasks",
    "credit_by_swap",
    "credit_runs",
    "explore",
    "export_agent",
    "floor_sentences",
    "headline",
    "import_agent",
    "inspect",
    "lift_table",
    "load_config",
    "load_runs",
    "load_tasks",
    "mine",
    "pick_trace",
    "plot_budget_curve",
    "plot_quality_vs_context",
    "plot_terminal_reasons",
    "plot_tokens_vs_quality",
    "readable_lift",
    "readable_study",
    "replay_parent",
    "rerun",
    "run",
    "run_ledger",
    "run_parent",
    "run_study",
    "score",
    "study_credit",
    "study_credit_table",
    "study_sentences",
    "study_table",
    "study_tasks",
    "summarize",
    "sweep",
    "terminal_reasons",
    "to_inspect",
    "trace_table",
    "validate_tasks",
    "write_report",
]

if TYPE_CHECKING:  # what editors and mypy see; at run time __getattr__ loads each on first use
    from subagent_lab.agents.launcher import SubagentResult
    from subagent_lab.agents.result import MainRunResult, RunResult
    from subagent_lab.analysis.headline import (
        comparison_sentences,
        floor_sentences,
        lift_table,
        readable_lift,
    )
    from subagent_lab.analysis.summary import (
        budget_curve,
        headline,
        plot_budget_curve,
        plot_terminal_reasons,
        plot_tokens_vs_quality,
        summarize,
        terminal_reasons,
    )
    from subagent_lab.api.credit import child_credit, study_credit, study_credit_table
    from subagent_lab.api.inspect_export import to_inspect
    from subagent_lab.api.mining import mine
    from subagent_lab.api.replay import replay_parent
    from subagent_lab.api.report import write_report
    from subagent_lab.api.rerun import rerun
    from subagent_lab.api.runs import explore, run, run_parent
    from subagent_lab.api.sweeps import sweep
    from subagent_lab.api.views import (
        bench_task,
        bench_workspace,
        compare,
        inspect,
        load_runs,
        score,
        trace_table,
    )
    from subagent_lab.bench.suite import load_tasks, validate_tasks
    from subagent_lab.config.agent_files import export_agent, import_agent
    from subagent_lab.config.profiles import load_config
    from subagent_lab.experiments.delegation import run_study
    from subagent_lab.experiments.delegation.credit import credit_by_swap, credit_runs
    from subagent_lab.experiments.delegation.ledger import run_ledger
    from subagent_lab.experiments.delegation.plan import DelegationSpec, study_tasks
    from subagent_lab.experiments.delegation.table import (
        complete_tasks,
        plot_quality_vs_context,
        readable_study,
        study_sentences,
        study_table,
    )
    from subagent_lab.models.scripted import ScriptedModel
    from subagent_lab.widgets.sweep_explorer import pick_trace


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'subagent_lab' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_EXPORTS})
