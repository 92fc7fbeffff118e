"""The delegation study's tables, sentences and plot, from its rows (``experiments.delegation``).

One table per split: for each cell (arm and context mode) the mean of each measure over tasks with
its bootstrap 95% interval (``analysis.stats.mean_ci``) and its difference from ``alone``, paired
by task (``paired_difference``). A difference whose interval holds 0 is not a finding.
"""

from __future__ import annotations

import math
from typing import Any

import pandas as pd

from subagent_lab.analysis.stats import mean_ci, paired_difference

BASE_CELL = "alone"
CELL_ORDER = ("alone", "delegate-light", "delegate-main", "forced-delegation", "delegate-light/brief",
              "delegate-light/forked")  # fmt: skip
"""The tables' row order (the study's grid); other cells follow, by name."""
MEASURES: dict[str, str] = {
    "parent_peak_context": "parent peak context",
    "parent_tokens": "parent tokens",
    "children_tokens": "children tokens",
    "total_cost_usd": "notional cost (USD)",
    "quality": "answer quality",
}
"""The table's measures, in order: column -> how the table names it."""


def _ok(df: pd.DataFrame) -> pd.DataFrame:
    """The rows that ran (a crashed run has no measures)."""
    return df[df["terminal_reason"] != "crashed"] if "terminal_reason" in df else df


def complete_tasks(df: pd.DataFrame) -> pd.DataFrame:
    """The rows of the tasks every cell of the study ran on: a study stopped mid-task leaves a task
    some cells lack, and each cell's mean must be over the same tasks."""
    if df.empty:
        return df
    cells = df["cell"].nunique()
    per_task = df.groupby(["split", "task_id"])["cell"].nunique()
    keep = {key for key, n in per_task.items() if n == cells}
    return df[[(s, t) in keep for s, t in zip(df["split"], df["task_id"], strict=True)]]


def study_table(df: pd.DataFrame, split: str, measures: dict[str, str] | None = None) -> pd.DataFrame:
    """One row per cell of ``split``: ``n`` tasks, and per measure its mean, ``_low``/``_high`` (the
    95% interval), ``_diff`` and ``_diff_low``/``_diff_high`` (the cell − ``alone`` paired by task;
    ``nan`` for ``alone`` itself or without an ``alone`` row)."""
    rows = _ok(df[df["split"] == split])
    cells = sorted(
        dict.fromkeys(rows["cell"]), key=lambda c: (CELL_ORDER.index(c) if c in CELL_ORDER else 99, c)
    )
    out: list[dict[str, Any]] = []
    for cell in cells:
        group = rows[rows["cell"] == cell]
        row: dict[str, Any] = {"cell": cell, "n": int(group["task_id"].nunique())}
        for column in measures or MEASURES:
            ci = mean_ci(group, column)
            row.update({column: ci.mean, f"{column}_low": ci.low, f"{column}_high": ci.high})
            diff = (math.nan, math.nan, math.nan)
            if cell != BASE_CELL and BASE_CELL in cells:
                d = paired_difference(rows, cell, BASE_CELL, arm="cell", value=column).diff
                diff = (d.mean, d.low, d.high)
            row.update(
                dict(zip((f"{column}_diff", f"{column}_diff_low", f"{column}_diff_high"), diff, strict=True))
            )
        out.append(row)
    return pd.DataFrame(out)


def fmt_ci(value: float, low: float, high: float, digits: int, sign: bool = False) -> str:
    """``value [low, high]`` with thousands separators and minus signs (``–`` for no value)."""
    if math.isnan(value):
        return "–"
    spec = f"{'+' if sign else ''},.{digits}f"
    interval = "" if math.isnan(low) else f" [{low:{spec}}, {high:{spec}}]"
    return f"{value:{spec}}{interval}".replace("-", "−")


def readable_study(table: pd.DataFrame, measures: dict[str, str] | None = None) -> pd.DataFrame:
    """``study_table`` as text: ``mean [low, high]`` per measure and ``Δ alone`` beside it."""
    if table.empty:
        return pd.DataFrame(columns=["cell", "tasks"])
    out = pd.DataFrame({"cell": table["cell"], "tasks": table["n"]})
    for column, name in (measures or MEASURES).items():
        digits = 4 if "usd" in column else 2 if column == "quality" else 0
        out[name] = [
            fmt_ci(r[column], r[f"{column}_low"], r[f"{column}_high"], digits) for _, r in table.iterrows()
        ]
        out[f"{name} Δ alone"] = [
            fmt_ci(r[f"{column}_diff"], r[f"{column}_diff_low"], r[f"{column}_diff_high"], digits, sign=True)
            for _, r in table.iterrows()
        ]
    return out


def _holds_zero(low: float, high: float) -> bool:
    return math.isnan(low) or low <= 0 <= high


def study_sentences(df: pd.DataFrame, split: str) -> list[str]:
    """Plain sentences for ``split``: per delegating cell, whether the parent's peak context was
    smaller than ``alone``'s and at what difference in answer quality, each with its interval."""
    table = study_table(
        df, split, {k: MEASURES[k] for k in ("parent_peak_context", "total_cost_usd", "quality")}
    )
    if table.empty:
        return [f"{split}: no runs that finished."]
    if BASE_CELL not in set(table["cell"]):
        return [f"{split}: no `alone` runs to compare with."]
    sentences = []
    for _, r in table[table["cell"] != BASE_CELL].iterrows():
        low, high = r["parent_peak_context_diff_low"], r["parent_peak_context_diff_high"]
        d = r["parent_peak_context_diff"]
        if _holds_zero(low, high):
            context = (
                f"did not show a smaller parent peak context ({fmt_ci(d, low, high, 0, sign=True)} tokens)"
            )
        elif d < 0:
            context = f"kept the parent's peak context smaller ({fmt_ci(d, low, high, 0, sign=True)} tokens)"
        else:
            context = f"made the parent's peak context larger ({fmt_ci(d, low, high, 0, sign=True)} tokens)"
        q, ql, qh = r["quality_diff"], r["quality_diff_low"], r["quality_diff_high"]
        quality = "no quality difference shown" if _holds_zero(ql, qh) else ("better" if q > 0 else "worse")
        cost = fmt_ci(
            r["total_cost_usd_diff"], r["total_cost_usd_diff_low"], r["total_cost_usd_diff_high"], 4, True
        )
        sentences.append(
            f"{split}, {r['cell']} vs alone ({r['n']} tasks): {context}; answer quality "
            f"{fmt_ci(q, ql, qh, 2, sign=True)} ({quality}); total cost {cost} USD."
        )
    return sentences


def plot_quality_vs_context(df: pd.DataFrame, ax: Any = None) -> Any:
    """Answer quality against parent peak context, one point per cell and split, with 95% intervals."""
    import matplotlib.pyplot as plt

    if ax is None:
        _, ax = plt.subplots(figsize=(7, 4.5))
    markers = {"dev": "o", "test": "s"}
    for split in dict.fromkeys(df["split"]):
        table = study_table(df, split, {k: MEASURES[k] for k in ("parent_peak_context", "quality")})
        for _, r in table.iterrows():
            x, y = r["parent_peak_context"], r["quality"]
            xs = [[x - r["parent_peak_context_low"]], [r["parent_peak_context_high"] - x]]
            ys = [[y - r["quality_low"]], [r["quality_high"] - y]]
            xerr = None if any(math.isnan(v[0]) for v in xs) else xs
            yerr = None if any(math.isnan(v[0]) for v in ys) else ys
            ax.errorbar(
                x,
                y,
                xerr=xerr,
                yerr=yerr,
                fmt=markers.get(split, "^"),
                capsize=3,
                label=f"{r['cell']} ({split})",
            )
    ax.set_xlabel("parent peak context (prompt tokens of its largest call)")
    ax.set_ylabel("answer quality")
    ax.set_title("Answer quality against parent peak context (95% intervals)")
    ax.legend(fontsize=7, loc="best")
    return ax
