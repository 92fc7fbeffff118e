"""ipywidgets inspectors over persisted traces and sweep results.

Import this package explicitly (``from subagent_lab.widgets import RunInspector``); the core
package never imports it, so ipywidgets is only loaded where a notebook asks for it.
"""

from subagent_lab.widgets.records import (
    EvidenceRecord,
    LedgerRow,
    RunView,
    StepRecord,
    ToolRecord,
    child_traces,
    cited_lines,
    evidence_records,
    is_parent_run,
    ledger_rows,
    rolled_up_usage,
    run_view,
    step_records,
)
from subagent_lab.widgets.render import plot_run_tokens
from subagent_lab.widgets.run_inspector import RunInspector
from subagent_lab.widgets.sweep_explorer import SweepExplorer, filter_runs, pick_trace, side_by_side

__all__ = [
    "EvidenceRecord",
    "LedgerRow",
    "RunInspector",
    "RunView",
    "StepRecord",
    "SweepExplorer",
    "ToolRecord",
    "child_traces",
    "cited_lines",
    "evidence_records",
    "filter_runs",
    "is_parent_run",
    "ledger_rows",
    "pick_trace",
    "plot_run_tokens",
    "rolled_up_usage",
    "run_view",
    "side_by_side",
    "step_records",
]
