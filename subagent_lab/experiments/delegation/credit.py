"""Summaries of per-child credit rows (``sl.credit_runs``, ``sl.credit_by_swap``): pure functions
over the table ``child_credit``/``study_credit_table`` make (docs/numbers.md, "Per-child credit").

``credit_runs`` is the identity check and the cost of finding out, one row per recorded parent;
``credit_by_swap`` the contributions, one row per (cell, recorded model, swap).
"""

from __future__ import annotations

import pandas as pd

RUN_KEYS = ("run_key", "split", "task_id", "cell")
"""The study's columns in front of a ``study_credit`` row (absent from a bare ``child_credit``)."""


def credit_runs(credit: pd.DataFrame) -> pd.DataFrame:
    """One row per recorded parent (``parent_run``): its children and replays, the identity check
    (``identity_misses``, ``identity_exact``) and what the replays cost (cache hits and misses,
    live tokens, wall time with the identity replay's) summed over its replays."""
    keys = [k for k in (*RUN_KEYS, "parent_run") if k in credit.columns]
    columns = [*keys, "children", "replays", "identity_misses", "identity_exact", "cache_hits",
               "cache_misses", "live_tokens", "wall_s"]  # fmt: skip
    if credit.empty:
        return pd.DataFrame(columns=columns)
    grouped = credit.groupby(keys, sort=False, dropna=False)
    out = grouped.agg(
        children=("child", "nunique"),
        replays=("child", "size"),
        identity_misses=("identity_misses", "first"),
        identity_exact=("identity_exact", "first"),
        cache_hits=("cache_hits", "sum"),
        cache_misses=("cache_misses", "sum"),
        live_tokens=("live_tokens", "sum"),
        replay_wall_s=("replay_wall_s", "sum"),
        identity_wall_s=("identity_wall_s", "first"),
    ).reset_index()
    out["wall_s"] = out["replay_wall_s"] + out["identity_wall_s"]
    return out[columns]


def credit_by_swap(credit: pd.DataFrame) -> pd.DataFrame:
    """One row per (cell, recorded model, swap): how many children, the mean recorded and swapped
    parent scores, the mean contribution, how many children helped (contribution > 0), hurt (< 0)
    or made no difference (0; unscored replays in none of the three), and the mean live tokens and
    wall time of one replay."""
    keys = [k for k in ("cell", "recorded_model", "swapped_to") if k in credit.columns]
    columns = [*keys, "children", "recorded_score", "score", "contribution", "helped", "hurt", "no_change",
               "live_tokens", "replay_wall_s"]  # fmt: skip
    if credit.empty:
        return pd.DataFrame(columns=columns)
    contribution = credit["contribution"]
    df = credit.assign(helped=contribution > 0, hurt=contribution < 0, no_change=contribution == 0)
    out = df.groupby(keys, sort=False, dropna=False).agg(
        children=("child", "size"),
        recorded_score=("recorded_score", "mean"),
        score=("score", "mean"),
        contribution=("contribution", "mean"),
        helped=("helped", "sum"),
        hurt=("hurt", "sum"),
        no_change=("no_change", "sum"),
        live_tokens=("live_tokens", "mean"),
        replay_wall_s=("replay_wall_s", "mean"),
    )
    return out.reset_index()[columns]
