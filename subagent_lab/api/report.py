"""A sweep as one self-contained HTML page, readable offline without a kernel.

``write_report(sweep_dir)`` (``subagent-lab report SWEEP_DIR -o report.html``) writes, first,
one sentence per paired model comparison with its 95% interval and each model's lift over the
no-model baseline; then the summary by model, scaffold and variant, the terminal reasons, the
tokens-vs-quality and budget plots (PNG images inlined as base64), the per-run table, and a
drill-down per run: its steps as the run inspector shows them (model replies, tool calls with
their observations cut short, budget checks) and its final contract with each evidence item
marked grounded or not. The page loads nothing from anywhere: no scripts, no stylesheets, no
fonts, no images outside itself.
"""

from __future__ import annotations

import base64
import html
import io
import json
import math
import numbers
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any, TypeGuard

import pandas as pd

from subagent_lab.analysis.headline import lead_sentences, lift_table, readable, readable_lift
from subagent_lab.analysis.summary import (
    headline,
    plot_budget_curve,
    plot_terminal_reasons,
    plot_tokens_vs_quality,
    summarize,
    terminal_reasons,
)
from subagent_lab.experiments.sweep import load_results

__all__ = ["render_report", "write_report"]

MAX_DRILLDOWN_RUNS = 500
"""Runs given a drill-down section; a bigger sweep lists the rest in the table only."""
BUDGET_COLUMNS = ("total_token_budget", "max_steps", "context_token_budget")
"""Budget columns plotted against quality when the sweep varied them."""
_STYLE = """
body { font-family: system-ui, sans-serif; margin: 1.5em auto; max-width: 1200px; color: #1f2328; }
h1 { font-size: 1.5em; } h2 { font-size: 1.2em; margin-top: 1.6em; border-bottom: 1px solid #d0d7de; }
table { border-collapse: collapse; font-size: 12px; margin: 4px 0; }
th, td { border: 1px solid #d0d7de; padding: 2px 6px; text-align: right; }
th { background: #f6f8fa; } td:first-child, th:first-child { text-align: left; }
details.sl-run { border: 1px solid #d0d7de; border-radius: 4px; margin: 4px 0; padding: 2px 8px; }
details.sl-run > summary { cursor: pointer; }
.sl-muted { color: #6e7781; font-size: 12px; }
img { max-width: 100%; }
.sl-scroll { overflow-x: auto; }
.sl-lead { font-size: 1.1em; font-weight: 600; margin: 0.3em 0; }
"""


def _e(value: object) -> str:
    return html.escape(str(value))


def _table(df: pd.DataFrame) -> str:
    if df.empty:
        return "<p class='sl-muted'>(no rows)</p>"
    html = readable(df).to_html(index=False, na_rep="–", classes="sl-table", border=0)
    return f"<div class='sl-scroll'>{html}</div>"  # a wide table scrolls in its box, not the page


def figure_png(draw: Callable[[Any], Any], size: tuple[float, float] = (6.0, 3.5)) -> str:
    """An ``<img>`` holding the PNG of what ``draw(ax)`` plots (inlined as base64)."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=size)  # no pyplot: no global figure state, no GUI backend
    draw(fig.subplots())
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=100, bbox_inches="tight")
    data = base64.b64encode(buffer.getvalue()).decode("ascii")
    return f'<img alt="plot" src="data:image/png;base64,{data}">'


def _plot(title: str, draw: Callable[[Any], Any], size: tuple[float, float] = (6.0, 3.5)) -> str:
    try:
        return f"<figure><figcaption>{_e(title)}</figcaption>{figure_png(draw, size)}</figure>"
    except Exception as exc:  # a plot that cannot be drawn from this table: say so, keep the page
        return f"<p class='sl-muted'>{_e(title)}: not plotted ({_e(type(exc).__name__)}: {_e(exc)})</p>"


def plots_html(df: pd.DataFrame) -> str:
    """The terminal-reason, tokens-vs-quality and budget plots of a sweep table."""
    if df.empty or "model_used" not in df.columns:
        return "<p class='sl-muted'>(no runs to plot)</p>"
    parts = [
        _plot("How runs ended", lambda ax: plot_terminal_reasons(df, ax=ax), (7.0, 3.5)),
        _plot("Tokens vs quality", lambda ax: plot_tokens_vs_quality(df, ax=ax)),
    ]
    # A budget plot only where the sweep varied that budget: a line over one value says nothing.
    varied = [c for c in BUDGET_COLUMNS if c in df.columns and df[c].nunique(dropna=True) > 1]
    for column in varied:
        parts.append(_plot(f"Quality vs {column}", partial(plot_budget_curve, df, column)))
    return "".join(parts)


def run_drilldown(row: pd.Series) -> str:
    """One ``<details>`` section for one run: its header, its steps and its final contract."""
    from subagent_lab.widgets.records import evidence_records, run_view
    from subagent_lab.widgets.render import contract_html, header_html, reason_badge, step_html

    key = row.get("run_key") or row.get("run_id") or "?"
    reason = str(row.get("terminal_reason") or "unknown")
    tokens = row.get("total_tokens")
    quality = row.get("quality")
    facts = [
        f"{int(tokens):,} tokens" if _number(tokens) else "",
        f"quality {quality:.2f}" if _number(quality) else "",
    ]
    summary = (
        f"<summary><b>{_e(key)}</b> {reason_badge(reason)} "
        f"<span class='sl-muted'>{_e(' · '.join(f for f in facts if f))}</span></summary>"
    )
    path = row.get("trace_path")
    if not isinstance(path, str) or not Path(path).is_file():
        error = row.get("error") or "no trace was written for this run"
        body = (
            f"<p>no trace at <code>{_e(path)}</code></p>"
            f"<pre style='white-space:pre-wrap'>{_e(str(error)[-2000:])}</pre>"
        )
        return f"<details class='sl-run'>{summary}{body}</details>"
    try:
        view = run_view(path)
        steps = "".join(step_html(step, view) for step in view.steps) or "<p><i>no model calls</i></p>"
        evidence = evidence_records(view)
        body = header_html(view) + steps + contract_html(view, evidence)
    except Exception as exc:  # an unreadable trace spoils its own section, not the report
        body = f"<p>cannot read the trace <code>{_e(path)}</code>: {_e(type(exc).__name__)}: {_e(exc)}</p>"
    # The inspector's hint to tick a checkbox means nothing on a static page.
    for hint in ("; tick 'expand tool results'", "; tick &#x27;expand tool results&#x27;"):  # raw, escaped
        body = body.replace(hint, "")
    return f"<details class='sl-run'>{summary}{body}</details>"


def comparisons_html(df: pd.DataFrame) -> str:
    """The page's lead: one sentence per paired comparison, then quality and lift over the no-model
    baseline per split, scaffold and model (95% bootstrap intervals over tasks)."""
    sentences = lead_sentences(df) or ["No two models ran on the same tasks: no paired comparison."]
    lead = "".join(f"<p class='sl-lead'>{_e(s)}</p>" for s in sentences)
    return (
        "<h2>Comparisons</h2>" + lead + "<p class='sl-muted'>Intervals: bootstrap 95% over tasks (and "
        "repeats where sampled); differences paired by task; docs/numbers.md says how each is computed."
        "</p>" + _table(readable_lift(lift_table(df))) + _fields_html(df)
    )


def _fields_html(df: pd.DataFrame) -> str:
    """The field's localization metrics (Acc@k over the first k items, unit recall@4) over all and
    the non-leaking tasks, with the leak count; "" without localization columns."""
    from subagent_lab.analysis.fields import field_table

    table = field_table(df)
    if table.empty:
        return ""
    head = "<h3>Localization (Acc@k, unit recall@4; no-leak: prompts naming no gold unit)</h3>"
    return head + _table(table)


def _number(value: Any) -> TypeGuard[float]:
    return isinstance(value, numbers.Real) and not math.isnan(float(value))  # numpy scalars included


def render_report(df: pd.DataFrame, title: str = "Sweep report", spec: dict[str, Any] | None = None) -> str:
    """The whole report page for a sweep table (see the module docstring)."""
    when = time.strftime("%Y-%m-%d %H:%M")
    parts = [
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>",
        f"<title>{_e(title)}</title><style>{_STYLE}</style></head><body>",
        f"<h1>{_e(title)}</h1><p class='sl-muted'>{len(df)} runs · written {when}</p>",
    ]
    if spec:
        rendered = _e(json.dumps(spec, indent=2))
        parts.append(f"<details><summary>the sweep's spec</summary><pre>{rendered}</pre></details>")
    has_runs = not df.empty and "status" in df.columns
    parts.append(comparisons_html(df) if has_runs and "quality" in df.columns else "")
    parts.append("<h2>Summary by model, scaffold and variant</h2>")
    parts.append(_table(summarize(df)) if has_runs and "quality" in df.columns else _table(pd.DataFrame()))
    parts.append("<h2>Terminal reasons (share of runs)</h2>")
    parts.append(_table(terminal_reasons(df)) if has_runs else _table(pd.DataFrame()))
    parts.append("<h2>Plots</h2>")
    parts.append(plots_html(df) if has_runs else "<p class='sl-muted'>(no runs to plot)</p>")
    parts.append("<h2>Runs</h2>")
    parts.append(_table(headline(df)))
    parts.append("<h2>Each run, step by step</h2>")
    shown = df.head(MAX_DRILLDOWN_RUNS)
    parts.extend(run_drilldown(row) for _, row in shown.iterrows())
    if len(df) > len(shown):
        parts.append(f"<p class='sl-muted'>{len(df) - len(shown)} more runs are in the table only.</p>")
    parts.append("</body></html>")
    return "\n".join(parts)


def write_report(sweep_dir: str | Path, out: str | Path | None = None) -> Path:
    """Write the HTML report of a sweep directory; returns its path.

    Args:
        sweep_dir: A sweep's directory (the one holding ``results.jsonl``; ``df.attrs["sweep_dir"]``
            of a table from ``sl.sweep``).
        out: The HTML file to write (default: ``report.html`` in the sweep directory).
    """
    where = Path(sweep_dir)
    if not (where / "results.jsonl").is_file():
        raise FileNotFoundError(f"{where}: not a sweep directory (no results.jsonl)")
    spec_file = where / "spec.json"
    spec = json.loads(spec_file.read_text(encoding="utf-8")) if spec_file.is_file() else None
    page = render_report(load_results(where), title=f"Sweep {where.name}", spec=spec)
    target = Path(out) if out is not None else where / "report.html"
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(page, encoding="utf-8")
    return target
