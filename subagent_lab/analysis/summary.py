"""Summaries and plots over a sweep table (pure functions of the DataFrame)."""

from __future__ import annotations

from typing import Any

import pandas as pd

from subagent_lab.analysis.headline import leak_known, leaking

GROUP = ["model_used", "scaffold", "variant"]
"""The default grouping: model x scaffold preset x variant (the columns a table has of these)."""


def _group(df: pd.DataFrame, by: list[str] | None) -> list[str]:
    return by or [c for c in GROUP if c in df.columns]


def _uncached(df: pd.DataFrame) -> pd.DataFrame:
    """The runs whose every model call was made (no cache hit): the only ones whose time is a time."""
    if "cache_hits" not in df.columns:
        return df
    return df[df["cache_hits"].fillna(0) == 0]


def _p90(series: pd.Series) -> float:
    return float(series.quantile(0.9)) if len(series) else float("nan")


SPREAD = {"mean_quality": "quality", "mean_grounded": "grounded", "completion_rate": "completion"}
"""Means that get a spread over repeats: mean column -> prefix of its ``_min/_median/_max`` columns."""


def summarize(df: pd.DataFrame, by: list[str] | None = None) -> pd.DataFrame:
    """By model x scaffold x variant: completion rate, median/p90 tokens, cost per completed run,
    quality. ``median_elapsed_s`` is over the runs without a cache hit (NaN when all hit).

    Quality is over the tasks with gold (``mean_quality``; absent tasks apart, in
    ``mean_quality_absent``, since a constant give-up passes them), and again without the tasks
    whose prompt names a gold unit (``mean_quality_no_leak``, with ``leaks`` their count) where the
    rows flag them (``analysis.headline.leak_known``).

    Next to each mean in ``SPREAD`` it reports the spread over repeats: the mean of each repeat
    alone (over the group's tasks), then the min, median and max of those per-repeat means
    (``quality_min``, ``quality_median``, ``quality_max``, ...), with ``repeats`` their count. A
    spread of zero over several repeats at temperature 0 means deterministic decoding, not a
    stable result (see ``subagent_lab.experiments.sweep``).
    """
    by = _group(df, by)
    if df.empty:
        return pd.DataFrame()
    absent = df["kind"].eq("absent").fillna(False).astype(bool) if "kind" in df.columns else None
    raw = df
    if absent is not None and "quality" in df.columns:  # a give-up passes absent tasks: apart
        df = df.assign(quality=df["quality"].where(~absent))
    grouped = df.groupby(by, dropna=False)
    timed = _uncached(df).groupby(by, dropna=False)["elapsed_s"]
    out = pd.DataFrame(
        {
            "runs": grouped.size(),
            "completion_rate": grouped["status"].apply(lambda s: float((s == "completed").mean())),
            "contract_valid_rate": grouped["contract_valid"].mean(),
            "median_tokens": grouped["total_tokens"].median(),
            "p90_tokens": grouped["total_tokens"].apply(_p90),
            "mean_quality": grouped["quality"].mean(),
            "mean_grounded": grouped["grounded_ratio"].mean(),
            "median_elapsed_s": timed.median().reindex(grouped.size().index),
        }
    )
    completed = df[df["status"] == "completed"].groupby(by, dropna=False)
    n_completed = completed.size().reindex(out.index).fillna(0)
    cost = grouped["cost_usd"].sum()
    out["cost_per_completed_usd"] = (cost / n_completed).where(n_completed > 0)
    if absent is not None and absent.any():
        out["mean_quality_absent"] = (
            raw[absent].groupby(by, dropna=False)["quality"].mean().reindex(out.index)
        )
    if leak_known(df) and absent is not None:
        clean = df[~absent & ~leaking(df)]
        out["mean_quality_no_leak"] = clean.groupby(by, dropna=False)["quality"].mean().reindex(out.index)
        out["leaks"] = df[~absent & leaking(df)].groupby(by, dropna=False)["task_id"].nunique()
        out["leaks"] = out["leaks"].reindex(out.index).fillna(0).astype(int)
    if "repeat" in df.columns:
        out = _with_spread(out, df, by)
    return out.reset_index()


def _with_spread(out: pd.DataFrame, df: pd.DataFrame, by: list[str]) -> pd.DataFrame:
    """``out`` with min/median/max over per-repeat means inserted after each mean of ``SPREAD``."""
    per_repeat = (
        df.assign(completion=(df["status"] == "completed").astype(float))
        .rename(columns={"grounded_ratio": "grounded"})
        .groupby([*by, "repeat"], dropna=False)[["quality", "grounded", "completion"]]
        .mean()
        .groupby(level=list(range(len(by))), dropna=False)
    )
    columns = list(out.columns)
    extra: dict[str, pd.Series] = {"repeats": per_repeat.size()}
    for mean, prefix in SPREAD.items():
        at = columns.index(mean) + 1
        names = [f"{prefix}_{stat}" for stat in ("min", "median", "max")]
        columns[at:at] = names
        for name, stat in zip(names, ("min", "median", "max"), strict=True):
            extra[name] = per_repeat[prefix].agg(stat)
    columns.insert(1, "repeats")
    for name, series in extra.items():
        out[name] = series.reindex(out.index)
    return out[columns]


def terminal_reasons(df: pd.DataFrame, by: list[str] | None = None) -> pd.DataFrame:
    """Share of runs ending with each terminal reason, per group."""
    by = _group(df, by)
    if df.empty:
        return pd.DataFrame()
    counts = df.groupby(by, dropna=False)["terminal_reason"].value_counts(normalize=True)
    table = counts.unstack().fillna(0.0).reset_index()
    table.columns.name = None  # the unstacked axis' name would print as an empty header column
    return table


def budget_curve(df: pd.DataFrame, budget: str = "total_token_budget") -> pd.DataFrame:
    """Mean quality and completion rate against a budget column, per model."""
    if df.empty:
        return pd.DataFrame()
    grouped = df.groupby(["model_used", budget], dropna=False)
    return pd.DataFrame(
        {
            "mean_quality": grouped["quality"].mean(),
            "completion_rate": grouped["status"].apply(lambda s: float((s == "completed").mean())),
            "median_tokens": grouped["total_tokens"].median(),
            "runs": grouped.size(),
        }
    ).reset_index()


HEADLINE_COLUMNS = (
    "task_id",
    "model_used",
    "scaffold",
    "variant",
    "terminal_reason",
    "status",
    "steps",
    "total_tokens",
    "contract_valid",
    "evidence_count",
    "grounded_ratio",
    "seen_ratio",
    "gold_recall_line",
    "quality",
    "elapsed_s",
    "cache_hits",
)
"""The per-run columns a person reads first (the full table has ~50)."""


def headline(df: pd.DataFrame) -> pd.DataFrame:
    """The per-run table a person reads first."""
    return df[[c for c in HEADLINE_COLUMNS if c in df.columns]]


def plot_terminal_reasons(df: pd.DataFrame, ax: Any = None) -> Any:
    """Stacked bars: share of terminal reasons per model and variant."""
    import matplotlib.pyplot as plt

    table = terminal_reasons(df).set_index(_group(df, None))
    ax = ax or plt.subplots(figsize=(7, 3.5))[1]
    table.plot(kind="barh", stacked=True, ax=ax, colormap="tab10")
    ax.set_xlabel("share of runs")
    ax.set_title("How runs ended")
    ax.legend(loc="center left", bbox_to_anchor=(1.0, 0.5), fontsize="small")
    return ax


def plot_tokens_vs_quality(df: pd.DataFrame, ax: Any = None) -> Any:
    """Scatter of total tokens against quality, one colour per model."""
    import matplotlib.pyplot as plt

    ax = ax or plt.subplots(figsize=(5, 3.5))[1]
    for model, part in df.groupby("model_used"):
        ax.scatter(part["total_tokens"], part["quality"], label=str(model), alpha=0.7)
    ax.set_xlabel("total tokens")
    ax.set_ylabel("quality")
    ax.set_ylim(-0.05, 1.05)
    ax.legend()
    ax.set_title("Tokens vs quality")
    return ax


def plot_budget_curve(df: pd.DataFrame, budget: str = "total_token_budget", ax: Any = None) -> Any:
    """Quality against budget, one line per model."""
    import matplotlib.pyplot as plt

    curve = budget_curve(df, budget)
    ax = ax or plt.subplots(figsize=(5, 3.5))[1]
    for model, part in curve.groupby("model_used"):
        ax.plot(part[budget], part["mean_quality"], marker="o", label=str(model))
    ax.set_xlabel(budget)
    ax.set_ylabel("mean quality")
    ax.set_ylim(-0.05, 1.05)
    ax.legend()
    ax.set_title("Quality vs budget")
    return ax
