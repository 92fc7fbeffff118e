"""The sweep explorer (filter, sort, open a run) and side-by-side run comparison."""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import ipywidgets as widgets
import pandas as pd

from subagent_lab.analysis.summary import HEADLINE_COLUMNS
from subagent_lab.widgets.run_inspector import RunInspector

FILTER_COLUMNS = ("model_used", "profile", "variant", "terminal_reason", "task_id")
"""Columns offered as filters (those present in the table)."""
TABLE_COLUMNS = ("run_key", *HEADLINE_COLUMNS, "cost_usd")
"""Columns shown in the explorer's table (the full table has ~50)."""


def filter_runs(
    df: pd.DataFrame, filters: Mapping[str, Sequence[Any]], sort_by: str | None = None, ascending: bool = True
) -> pd.DataFrame:
    """Rows whose columns take one of the selected values (an empty selection keeps all), sorted."""
    out = df
    for column, values in filters.items():
        if values and column in out.columns:
            out = out[out[column].astype(str).isin([str(v) for v in values])]
    if sort_by and sort_by in out.columns:
        out = out.sort_values(sort_by, ascending=ascending, kind="stable", na_position="last")
    return out


def table_html(df: pd.DataFrame, columns: Sequence[str] = TABLE_COLUMNS) -> str:
    """The run table as HTML (through a pandas Styler when jinja2 is there)."""
    view = df[[c for c in columns if c in df.columns]]
    try:
        styler = view.style.hide(axis="index").format(precision=2, na_rep="–")
        if "terminal_reason" in view.columns:
            styler = styler.map(
                lambda v: "color:#1a7f37" if v == "completed" else "color:#cf222e", subset=["terminal_reason"]
            )
        return str(styler.to_html())
    except ImportError:  # Styler needs jinja2
        return str(view.to_html(index=False, na_rep="–", float_format=lambda x: f"{x:.2f}"))


def run_label(row: pd.Series) -> str:
    """How a run is named in the selector: its key and how it ended."""
    return f"{row.get('run_key', '?')} — {row.get('terminal_reason', '?')}"


def pick_trace(
    df: pd.DataFrame, task_id: str, model: str, variant: str | None = None, *, by: str = "model_used"
) -> str:
    """The trace path of the first run of ``task_id`` on ``model`` (and ``variant``, if given).

    ``by`` is the model column to match: ``model_used`` (default) or ``model_choice`` (what was
    asked for, which differs from the model used after a fallback).
    """
    rows = df[(df["task_id"] == task_id) & (df[by].astype(str) == model)]
    if variant is not None:
        rows = rows[rows["variant"] == variant]
    rows = rows[rows["trace_path"].notna()] if "trace_path" in rows.columns else rows.iloc[0:0]
    if rows.empty:
        raise LookupError(
            f"no run with a trace for task {task_id!r} on model {model!r}"
            + (f" ({variant})" if variant else "")
        )
    return str(rows.iloc[0]["trace_path"])


class SweepExplorer(widgets.VBox):
    """The run table of a sweep with filters and sorting; selecting a run opens its inspector.

    ``df`` is a sweep table (``run_sweep`` or ``load_results``); only persisted traces are read.
    Attributes for code and tests: ``filters`` (column -> SelectMultiple), ``sort_by``,
    ``ascending``, ``table``, ``run_select``, ``inspector_box`` and ``filtered()``.
    """

    def __init__(self, df: pd.DataFrame, **kwargs: Any) -> None:
        self.df = df.reset_index(drop=True)
        self.filters: dict[str, widgets.SelectMultiple] = {
            col: widgets.SelectMultiple(
                options=sorted({str(v) for v in self.df[col].dropna()}),
                description=col,
                # Two rows at least: a one-row multi-select draws as a closed drop-down ("0 selected").
                rows=min(4, max(2, self.df[col].nunique())),
                layout=widgets.Layout(width="auto"),
                style={"description_width": "initial"},  # the whole column name, not "terminal_r..."
            )
            for col in FILTER_COLUMNS
            if col in self.df.columns
        }
        sortable = [c for c in TABLE_COLUMNS if c in self.df.columns]
        self.sort_by = widgets.Dropdown(
            options=sortable, value=sortable[0] if sortable else None, description="sort by"
        )
        self.ascending = widgets.ToggleButtons(options=[("asc", True), ("desc", False)], value=True)
        self.table = widgets.HTML()
        self.count = widgets.HTML()
        self.run_select = widgets.Dropdown(description="run", layout=widgets.Layout(width="80%"))
        self.inspector_box = widgets.VBox()
        for control in [*self.filters.values(), self.sort_by, self.ascending]:
            control.observe(lambda _: self.refresh(), names="value")
        self.run_select.observe(lambda _: self.open_selected(), names="value")
        hint = widgets.HTML(
            "<small>filters: nothing selected keeps all values; ctrl/shift-click to pick several</small>"
        )
        super().__init__(
            [
                widgets.HBox(list(self.filters.values()), layout=widgets.Layout(flex_flow="row wrap")),
                hint,
                widgets.HBox([self.sort_by, self.ascending]),
                self.count,
                # A wide table scrolls inside its own box, so its last columns are one scroll away.
                widgets.Box([self.table], layout=widgets.Layout(overflow_x="auto", width="100%")),
                self.run_select,
                self.inspector_box,
            ],
            **kwargs,
        )
        self.refresh()

    def filtered(self) -> pd.DataFrame:
        """The rows that pass the current filters, in the current sort order."""
        chosen = {col: list(w.value) for col, w in self.filters.items()}
        return filter_runs(self.df, chosen, self.sort_by.value, bool(self.ascending.value))

    def refresh(self) -> None:
        """Redraw the table and the run selector after a filter or sort change."""
        view = self.filtered()
        self.count.value = f"<small>{len(view)} of {len(self.df)} runs</small>"
        self.table.value = table_html(view) if not view.empty else "<i>no runs match</i>"
        options = [(run_label(row), int(str(index))) for index, row in view.iterrows()]
        current = self.run_select.value
        self.run_select.options = [("(select a run to inspect)", -1), *options]
        # Keep the open run when it still passes the filters; otherwise close the inspector.
        self.run_select.value = current if current in {o[1] for o in options} else -1

    def open_selected(self) -> None:
        """Open the run inspector of the selected run below the table."""
        index = self.run_select.value
        if index is None or index < 0:
            self.inspector_box.children = ()
            return
        row = self.df.loc[index]
        path = row.get("trace_path")
        if not isinstance(path, str) or not Path(path).exists():
            error = row.get("error") or "no trace was written for this run"
            key = html.escape(str(row.get("run_key")))
            self.inspector_box.children = (
                widgets.HTML(
                    f"<div style='color:#cf222e'>{key}: no trace at {html.escape(str(path))}.</div>"
                    f"<pre style='white-space:pre-wrap'>{html.escape(str(error)[-2000:])}</pre>"
                ),
            )
            return
        self.inspector_box.children = (RunInspector(path, title=str(row.get("run_key"))),)


def side_by_side(
    trace_a: str | Path, trace_b: str | Path, labels: Sequence[str] | None = None
) -> widgets.HBox:
    """Two run inspectors next to each other (e.g. light vs main on the same task)."""
    names = list(labels) if labels else [Path(trace_a).stem, Path(trace_b).stem]
    half = widgets.Layout(width="50%", padding="0 4px")
    return widgets.HBox(
        [
            RunInspector(trace_a, title=names[0], layout=half),
            RunInspector(trace_b, title=names[1], layout=half),
        ]
    )
