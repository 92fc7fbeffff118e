"""HTML for the inspectors, built from the records of ``records.py`` (no ipywidgets here)."""

from __future__ import annotations

import html
import json
from collections.abc import Sequence
from typing import Any

from subagent_lab.core.types import Usage
from subagent_lab.widgets.records import EvidenceRecord, LedgerRow, RunView, StepRecord, ToolRecord

RESULT_PREVIEW_CHARS = 400
"""Tool results longer than this are cut in the collapsed view."""
RESULT_FULL_CHARS = 20_000
"""Even the expanded view is bounded: a notebook cell must not hold megabytes of text."""
REASON_COLOURS = {
    "completed": "#1a7f37",
    "max_steps": "#9a6700",
    "token_budget": "#9a6700",
    "context_budget": "#9a6700",
    "cost_budget": "#9a6700",
    "loop_detected": "#9a6700",
    "timeout": "#9a6700",
}
"""Terminal reason colours: green for success, amber for limits, red (the default) for failures."""
DENIED_STYLE = "background:#ffebe9;border-left:4px solid #cf222e"
BOX_STYLE = "border:1px solid #d0d7de;border-radius:4px;padding:4px 8px;margin:4px 0"


def _e(value: object) -> str:
    return html.escape(str(value))


def reason_badge(reason: str) -> str:
    colour = REASON_COLOURS.get(reason, "#cf222e")
    return (
        f'<span class="sl-reason" style="background:{colour};color:white;padding:1px 6px;'
        f'border-radius:8px">{_e(reason)}</span>'
    )


def budget_bar(used: int, budget: int | None, label: str) -> str:
    """A labelled horizontal bar: ``used`` against ``budget`` (text only when there is no budget)."""
    if not budget:
        return f'<div class="sl-budget">{_e(label)}: {used:,} tokens</div>'
    share = used / budget
    colour = "#1a7f37" if share < 0.7 else "#9a6700" if share <= 1.0 else "#cf222e"
    width = min(share, 1.0) * 100
    return (
        f'<div class="sl-budget" style="margin:2px 0">{_e(label)}: {used:,} / {budget:,} tokens '
        f'({share:.0%})<div style="background:#eaeef2;width:240px;height:8px;border-radius:4px">'
        f'<div style="background:{colour};width:{width:.1f}%;height:8px;border-radius:4px"></div>'
        f"</div></div>"
    )


def _pre(text: str) -> str:
    return (
        f'<pre style="white-space:pre-wrap;margin:2px 0;font-size:12px;max-height:400px;'
        f'overflow:auto">{_e(text)}</pre>'
    )


def tool_html(tool: ToolRecord, *, expand: bool = False) -> str:
    """One tool call: arguments, outcome and result text (cut unless ``expand``)."""
    limit = RESULT_FULL_CHARS if expand else RESULT_PREVIEW_CHARS
    text = (
        tool.text
        if len(tool.text) <= limit
        else (
            tool.text[:limit]
            + f"\n… [{len(tool.text) - limit:,} more characters"
            + ("" if expand else "; tick 'expand tool results'")
            + "]"
        )
    )
    style = DENIED_STYLE if tool.denied else "border-left:4px solid #d0d7de"
    css = "sl-tool sl-denied" if tool.denied else "sl-tool"
    args = json.dumps(tool.arguments, ensure_ascii=False, sort_keys=True)
    flag = " <b>DENIED</b>" if tool.denied else ""
    more = " (the tool itself truncated its output)" if tool.truncated else ""
    return (
        f'<div class="{css}" style="{style};padding:2px 6px;margin:3px 0">'
        f"<code>{_e(tool.tool)}({_e(args)})</code> → <b>{_e(tool.status)}</b>{flag}"
        f" <small>{tool.duration_s * 1000:.0f} ms{_e(more)}</small>{_pre(text)}</div>"
    )


def step_html(record: StepRecord, run: RunView, *, expand: bool = False) -> str:
    """One step: harness prompts, the budget check, the model's reply, its tool calls, the contract."""
    parts = [
        f'<div class="sl-step" style="{BOX_STYLE}"><b>Step {record.index + 1} / {len(run.steps)}</b> '
        f"<small>(loop step {record.step}, {_e(record.purpose)})</small>"
    ]
    if record.index == 0 and run.start is not None:
        parts.append(forked_html(run))
        parts.append(f"<div><b>task</b> (user):{_pre(run.start.task)}</div>")
    for purpose, content in record.prompts:
        parts.append(f"<div><b>harness prompt</b> ({_e(purpose)}):{_pre(content)}</div>")
    if record.compacted is not None:
        c = record.compacted
        parts.append(
            f"<div>context compacted: {c.before_tokens:,} → {c.after_tokens:,} tokens "
            f"({c.messages_compacted} messages)</div>"
        )
    if record.budget is not None:
        b = record.budget
        verdict = "allowed" if b.allowed else '<b style="color:#cf222e">refused</b>'
        parts.append(
            f"<div><small>budget check: prompt ≈{b.prompt_tokens_est:,} tokens, output cap "
            f"{b.max_tokens:,}, used so far {b.used_total:,} → {verdict}</small></div>"
        )
    if record.purpose not in ("refused", "unanswered", "start"):
        parts.append(budget_bar(record.prompt_tokens, run.context_budget, "context (this call's prompt)"))
        parts.append(budget_bar(record.cumulative_tokens, run.total_budget, "total (run so far)"))
        cache = " · cache hit" if record.cache_hit else ""
        parts.append(
            f"<div><small>prompt {record.prompt_tokens:,} + completion {record.completion_tokens:,} "
            f"tokens · {record.latency_s:.1f} s · finish {_e(record.finish_reason)}{cache}</small></div>"
        )
    if not record.ok:
        parts.append(f'<div style="color:#cf222e"><b>{_e(record.purpose)}:</b> {_e(record.error)}</div>')
    if record.text:
        parts.append(f"<div><b>model</b>:{_pre(record.text)}</div>")
    for tool in record.tools:
        parts.append(tool_html(tool, expand=expand))
    for sub in record.subagents:
        tokens = f", {sub.usage.total_tokens:,} tokens" if sub.usage is not None else ""
        parts.append(
            f"<div><small>sub-agent {_e(sub.kind.removeprefix('subagent_'))}: {_e(sub.profile)} "
            f"{_e(sub.child_run_id)} {_e(sub.terminal_reason or '')}{tokens}</small></div>"
        )
    if record.contract is not None:
        check = record.contract
        verdict = "valid" if check.valid else '<b style="color:#cf222e">invalid</b>'
        errors = "".join(f"<li>{_e(err)}</li>" for err in check.errors)
        parts.append(f"<div>contract check: {verdict}{f'<ul>{errors}</ul>' if errors else ''}</div>")
    parts.append("</div>")
    return "".join(parts)


def forked_html(run: RunView) -> str:
    """The parent's messages a forked child started from, before its task (collapsed; empty for a
    run that was not forked)."""
    prior = run.start.prior_messages if run.start is not None else []
    if not prior:
        return ""
    turns = "".join(f"<div><small>{_e(m.role)}</small>{_pre(m.content)}</div>" for m in prior)
    return (
        f'<details class="sl-forked"><summary><b>forked</b>: {len(prior)} messages of the parent\'s '
        f"conversation, before the task</summary>{turns}</details>"
    )


def header_html(run: RunView) -> str:
    """Who ran what, under which budgets, and how it ended."""
    if run.start is None:
        return f"<div>{_e(run.trace_path)}: no run_started event (not a run trace?)</div>"
    s = run.start
    budgets = ", ".join(f"{k}={v:g}" for k, v in s.budgets.items())
    fallback = " (fallback)" if s.fallback else ""
    parts = [
        f'<div class="sl-header" style="{BOX_STYLE}">',
        f"<b>{_e(s.profile)}</b> run <code>{_e(s.run_id)}</code> · model <b>{_e(s.model_used)}</b>"
        f" ({_e(s.model_id)}){_e(fallback)} · {reason_badge(run.terminal_reason)}",
        f"<div><small>budgets: {_e(budgets)} · tools: {_e(', '.join(s.tools))}</small></div>",
        f"<div><small>workspace: <code>{_e(s.workspace)}</code></small></div>",
        f"<details><summary>system prompt ({len(s.system_prompt):,} chars)</summary>"
        f"{_pre(s.system_prompt)}</details>",
    ]
    if run.end is not None:
        e = run.end
        parts.append(
            f"<div>status <b>{_e(e.status)}</b> after {e.steps} steps, {e.model_calls} model calls, "
            f"{e.usage.total_tokens:,} tokens ({e.usage.prompt_tokens:,} prompt + "
            f"{e.usage.completion_tokens:,} completion), {e.elapsed_s:.1f} s"
            f"{' · grace turn used' if e.grace_used else ''}"
            f"{f' · {e.repairs_used} repairs' if e.repairs_used else ''}</div>"
        )
        if e.detail:
            parts.append(f"<div><small>detail: {_e(e.detail[-600:])}</small></div>")
        parts.append(budget_bar(e.usage.total_tokens, run.total_budget, "total tokens"))
    else:
        parts.append(
            '<div style="color:#cf222e">the trace has no run_ended event: the run never finished</div>'
        )
    parts.append("</div>")
    return "".join(parts)


LEDGER_COLUMNS = ("run", "profile", "run id", "input", "output", "cached", "calls", "served model", "wall")


def ledger_html(rows: Sequence[LedgerRow], rolled_up: Usage | None) -> str:
    """A parent run's cost ledger as a table, one row per run and the total last (``ledger_rows``),
    with a warning when the total is not what the parent's trace rolled up (``rolled_up``): then a
    child's trace is missing or incomplete. Empty without rows."""
    if not rows:
        return ""
    head = "".join(f'<th style="padding:0 6px">{_e(name)}</th>' for name in LEDGER_COLUMNS)
    body = "".join(_ledger_row_html(row) for row in rows)
    total = rows[-1].usage
    parts = [
        f'<div class="sl-ledger" style="{BOX_STYLE}"><b>cost ledger</b> '
        "<small>(tokens per run; the total's wall time is the parent's: the children ran inside it)"
        f'</small><table style="font-size:12px;border-collapse:collapse"><tr>{head}</tr>{body}</table>'
    ]
    if rolled_up is not None and _tokens(rolled_up) != _tokens(total):
        parts.append(
            f'<div class="sl-ledger-mismatch" style="color:#cf222e">the traces sum to '
            f"{total.total_tokens:,} tokens, the parent's roll-up to {rolled_up.total_tokens:,}: "
            "a child's trace is missing or incomplete</div>"
        )
    parts.append("</div>")
    return "".join(parts)


def _tokens(usage: Usage) -> tuple[int, int, int]:
    return usage.prompt_tokens, usage.completion_tokens, usage.cached_tokens


def _ledger_row_html(row: LedgerRow) -> str:
    u = row.usage
    cells = (row.role, row.profile, row.run_id, f"{u.prompt_tokens:,}", f"{u.completion_tokens:,}",
             f"{u.cached_tokens:,}", str(row.calls), row.served or "-", f"{row.wall_s:.1f} s")  # fmt: skip
    css = "sl-ledger-total" if row.role == "total" else "sl-ledger-row"
    style = "font-weight:bold;border-top:1px solid #d0d7de" if row.role == "total" else ""
    tds = "".join(f'<td style="padding:0 6px">{_e(cell)}</td>' for cell in cells)
    return f'<tr class="{css}" style="{style}">{tds}</tr>'


def contract_html(run: RunView, evidence: Sequence[EvidenceRecord]) -> str:
    """The final contract's fields, with each evidence item marked grounded or not."""
    contract = run.end.contract if run.end is not None else None
    if not contract:
        return f'<div class="sl-contract" style="{BOX_STYLE}"><b>final contract</b>: none</div>'
    parts = [f'<div class="sl-contract" style="{BOX_STYLE}"><b>final contract</b>']
    for key, value in contract.items():
        if key == "evidence":
            continue
        if isinstance(value, list):
            items = "".join(f"<li>{_e(v)}</li>" for v in value) or "<li><i>(none)</i></li>"
            parts.append(f"<div><b>{_e(key)}</b><ul style='margin:0'>{items}</ul></div>")
        else:
            parts.append(f"<div><b>{_e(key)}</b>: {_e(value)}</div>")
    rows = "".join(evidence_row_html(r) for r in evidence) or "<li><i>(no evidence)</i></li>"
    parts.append(f"<div><b>evidence</b><ul style='margin:0'>{rows}</ul></div>")
    if run.origin is not None:  # what the answer made of the retrieval's candidates
        dropped = ", ".join(f"#{n} {run.origin.candidates[n - 1]}" for n in run.origin.dropped) or "none"
        given = len(run.origin.candidates)
        head = f"<b>candidates dropped</b> ({given} given)"
        parts.append(f'<div class="sl-dropped">{head}: {_e(dropped)}</div>')
    parts.append("</div>")
    return "".join(parts)


def evidence_row_html(record: EvidenceRecord) -> str:
    mark = (
        '<span class="sl-grounded" style="color:#1a7f37">✔ grounded</span>'
        if record.grounded
        else f'<span class="sl-ungrounded" style="color:#cf222e">✘ not grounded ({_e(record.reason)})</span>'
    )
    origin = ""
    if record.origin:  # under retrieval_start: where the item came from, what the model did with it
        origin = f' <span class="sl-origin" style="color:#6e7781">{_e(record.origin)}</span>'
    return f"<li><code>{_e(record.item)}</code> {mark}{origin}</li>"


def citation_html(record: EvidenceRecord, lines: Sequence[tuple[int, str, bool]]) -> str:
    """The cited lines of one evidence item (cited range highlighted), or why there are none."""
    if not record.grounded:
        return (
            f'<div class="sl-citation" style="color:#cf222e"><code>{_e(record.item)}</code> is not '
            f"grounded: {_e(record.reason)}</div>"
        )
    rows = "".join(
        f'<div style="{"background:#fff8c5" if cited else ""}"><span style="color:#6e7781">{n:>5}</span>  '
        f"{_e(text)}</div>"
        for n, text, cited in lines
    )
    return (
        f'<div class="sl-citation" style="{BOX_STYLE}"><code>{_e(record.item)}</code>'
        f'<div style="font-family:monospace;font-size:12px;white-space:pre">{rows}</div></div>'
    )


def plot_run_tokens(run: RunView, ax: Any = None) -> Any:
    """Cumulative tokens per step against the total budget, and each call's prompt against the
    context budget (matplotlib; returns the axes)."""
    import matplotlib.pyplot as plt

    ax = ax or plt.subplots(figsize=(5, 3))[1]
    calls = [s for s in run.steps if s.purpose not in ("refused", "unanswered", "start")]
    xs = [s.index + 1 for s in calls]
    ax.plot(xs, [s.cumulative_tokens for s in calls], marker="o", label="cumulative tokens")
    ax.bar(xs, [s.prompt_tokens for s in calls], alpha=0.4, label="prompt tokens of the call")
    if run.total_budget:
        ax.axhline(run.total_budget, color="#cf222e", linestyle="--", label="total budget")
    if run.context_budget:
        ax.axhline(run.context_budget, color="#9a6700", linestyle=":", label="context budget")
    ax.set_xlabel("step")
    ax.set_ylabel("tokens")
    ax.set_title(f"{run.start.model_used if run.start else '?'}: tokens vs budget")
    ax.legend(fontsize="small", loc="upper left", bbox_to_anchor=(1.01, 1.0))  # beside, not on, the lines
    return ax
