"""The run inspector: step through one persisted run trace."""

from __future__ import annotations

import html
from pathlib import Path
from typing import Any

import ipywidgets as widgets

from subagent_lab.widgets.records import (
    EvidenceRecord,
    LedgerRow,
    RunView,
    child_traces,
    cited_lines,
    evidence_records,
    ledger_rows,
    rolled_up_usage,
    run_view,
)
from subagent_lab.widgets.render import (
    citation_html,
    contract_html,
    header_html,
    ledger_html,
    plot_run_tokens,
    step_html,
)


class RunInspector(widgets.VBox):
    """Step through one run: messages, tool calls, budgets, terminal reason, grounded evidence; for a
    parent run, its cost ledger (the parent's and each child's tokens, calls, served model, wall time).

    Reads only traces (the run's, and for a parent's ledger its children's) and, to show cited
    lines, the workspace recorded in them, so a finished sweep can be inspected later in a fresh
    kernel.

    Attributes worth poking at from code (and tests): ``run`` (the folded trace), ``slider``,
    ``step_view``, ``expand``, ``evidence`` and ``evidence_buttons``, ``citation``, ``ledger`` and
    ``ledger_view``.
    """

    def __init__(self, trace_path: str | Path, *, title: str | None = None, **kwargs: Any) -> None:
        self.run: RunView = run_view(trace_path)
        self.evidence: list[EvidenceRecord] = evidence_records(self.run)
        n = len(self.run.steps)
        self.title = widgets.HTML(f"<h4 style='margin:4px 0'>{html.escape(title)}</h4>" if title else "")
        self.header = widgets.HTML(header_html(self.run))
        self.ledger: list[LedgerRow] = ledger_rows(self.run)
        self.ledger_view = widgets.HTML(ledger_html(self.ledger, rolled_up_usage(self.run)))
        self.slider = widgets.IntSlider(
            value=0,
            min=0,
            max=max(n - 1, 0),
            description="step",
            disabled=n <= 1,
            continuous_update=False,
            readout_format="d",
            layout=widgets.Layout(width="60%"),
        )
        self.prev_button = widgets.Button(
            description="◀", layout=widgets.Layout(width="40px"), tooltip="previous step"
        )
        self.next_button = widgets.Button(
            description="▶", layout=widgets.Layout(width="40px"), tooltip="next step"
        )
        self.expand = widgets.Checkbox(value=False, description="expand tool results", indent=False)
        self.step_view = widgets.HTML()
        self.contract_view = widgets.HTML(contract_html(self.run, self.evidence))
        self.evidence_buttons = [self._evidence_button(i, rec) for i, rec in enumerate(self.evidence)]
        self.citation = widgets.HTML()
        self.children_select = widgets.Dropdown(
            options=[("(open a sub-agent run)", ""), *child_traces(self.run)],
            description="sub-agent",
            layout=widgets.Layout(width="90%"),
        )
        self.children_box = widgets.VBox()
        self.children_select.observe(lambda _: self.open_child(), names="value")
        self.plot_button = widgets.Button(
            description="plot tokens vs budget", icon="line-chart", layout=widgets.Layout(width="auto")
        )
        self.plot_out = widgets.Output()

        self.prev_button.on_click(lambda _: self._move(-1))
        self.next_button.on_click(lambda _: self._move(1))
        self.slider.observe(lambda _: self.render_step(), names="value")
        self.expand.observe(lambda _: self.render_step(), names="value")
        self.plot_button.on_click(lambda _: self.show_plot())
        self.render_step()

        evidence_box: list[widgets.Widget] = []
        if self.evidence_buttons:
            evidence_box = [
                widgets.HTML("<small>click an evidence item to see the cited lines</small>"),
                widgets.HBox(self.evidence_buttons, layout=widgets.Layout(flex_flow="row wrap")),
                self.citation,
            ]
        nav = widgets.HBox([self.prev_button, self.slider, self.next_button, self.expand])
        super().__init__(
            [
                self.title,
                self.header,
                *([self.ledger_view] if self.ledger else []),
                nav,
                self.step_view,
                self.contract_view,
                *evidence_box,
                *([self.children_select, self.children_box] if len(self.children_select.options) > 1 else []),
                self.plot_button,
                self.plot_out,
            ],
            **kwargs,
        )

    def _evidence_button(self, index: int, record: EvidenceRecord) -> widgets.Button:
        button = widgets.Button(
            description=record.item[-40:],
            tooltip=record.item if record.grounded else f"{record.item}: not grounded ({record.reason})",
            button_style="success" if record.grounded else "danger",
            icon="check" if record.grounded else "times",
            layout=widgets.Layout(width="auto"),
        )
        button.on_click(lambda _: self.show_citation(index))
        return button

    def _move(self, delta: int) -> None:
        self.slider.value = min(max(self.slider.value + delta, self.slider.min), self.slider.max)

    def render_step(self) -> None:
        """Show the step the slider points at."""
        if not self.run.steps:
            self.step_view.value = "<div><i>no model calls in this run</i></div>"
            return
        record = self.run.steps[self.slider.value]
        self.step_view.value = step_html(record, self.run, expand=self.expand.value)

    def show_citation(self, index: int) -> None:
        """Show the lines cited by evidence item ``index`` (bounded), or why it is not grounded."""
        record = self.evidence[index]
        workspace = self.run.workspace
        try:
            lines = cited_lines(workspace, record) if workspace is not None else []
        except OSError as exc:  # the workspace moved or vanished since the run
            where = html.escape(f"{record.path}: {exc}")
            self.citation.value = f"<div style='color:#cf222e'>cannot read {where}</div>"
            return
        self.citation.value = citation_html(record, lines)

    def open_child(self) -> None:
        """Open the selected sub-agent's trace in a nested inspector (a parent run's children)."""
        path = self.children_select.value
        if not path:
            self.children_box.children = ()
        elif not Path(path).exists():
            self.children_box.children = (widgets.HTML(f"<i>no trace at {html.escape(path)}</i>"),)
        else:
            self.children_box.children = (RunInspector(path, title="sub-agent run"),)

    def show_plot(self) -> None:
        """Draw cumulative tokens vs the budgets into the inspector's output area."""
        import matplotlib.pyplot as plt

        self.plot_out.clear_output()
        with self.plot_out:
            fig, ax = plt.subplots(figsize=(5, 3))
            plot_run_tokens(self.run, ax)
            plt.show(fig)
