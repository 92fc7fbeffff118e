"""What a result table leads with: each model's lift over the no-model baseline and over the
strongest floor, and the paired light-vs-main difference, per split and scaffold, each with its
bootstrap 95% interval; present and absent tasks also apart.

Pure functions of a sweep's rows (``analysis.stats`` computes every interval). Rows are grouped
by ``split`` and ``scaffold`` where those columns exist, so a comparison never mixes scaffolds.

A *floor* is an arm that runs no language model: ``none`` (the no-model baseline), ``retrieval``
(the retrieval floor), or any arm named ``<floor>-<suffix>`` after one (``retrieval-4``, the
whole-unit retrieval of ``benchmarks/bench_explore.py``). A group's *strongest floor* is its floor
arm with the highest mean on the group's tasks (ties: the first by name); each arm's lift over it
is paired by task, like the lift over ``none``. Where rows carry ``candidate_recall`` (runs that
start from the retrieval's pool), each arm's candidate recall@K stands beside its mean: the
ceiling any reranking of that pool could reach.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Collection
from typing import Any

import pandas as pd

from subagent_lab.analysis.stats import compare_table, comparison_sentence, mean_ci, paired_difference
from subagent_lab.core.types import FLOOR_CHOICES

ARM = "model_choice"
BASELINE = "none"
"""The no-model baseline's model choice (``subagent_lab.models.baseline``)."""
FLOORS: frozenset[str] = FLOOR_CHOICES
"""The floor arms' names (see the module docstring for ``<floor>-<suffix>``)."""
SUBSETS = ("all", "present", "absent")
"""The ``tasks`` column's values: every task, those whose ``kind`` is not ``absent``, the absent ones."""
POOL = "candidate_recall"
"""A row's candidate recall@K (``bench.pool``: a gold unit anywhere in the retrieval's pool, the
ceiling of any reranking of it); ``lift_table`` reports its mean beside each arm where rows have it."""
FLOOR_COLUMNS = ["floor", "floor_mean", "floor_lift", "floor_lift_ci_low", "floor_lift_ci_high",
                 "floor_wins", "floor_losses", "floor_ties"]  # fmt: skip
"""The columns ``lift_table`` adds after ``compare_table``'s."""


def is_floor(arm: str, floors: Collection[str] = FLOORS) -> bool:
    """Whether ``arm`` is a floor: one of ``floors`` or named ``<floor>-<suffix>`` after one."""
    return arm in floors or any(arm.startswith(f"{floor}-") for floor in floors)


def _groups(df: pd.DataFrame) -> list[str]:
    """What a comparison holds fixed: the split, the scaffold, and the variant where there are
    several (a budget setting is a condition of its own, not a repeat)."""
    fixed = [c for c in ("split", "scaffold") if c in df.columns]
    if "variant" in df.columns and df["variant"].nunique(dropna=False) > 1:
        fixed.append("variant")
    return fixed


def _parts(df: pd.DataFrame, groups: list[str]) -> list[pd.DataFrame]:
    return [part for _, part in df.groupby(groups, sort=True, dropna=False)] if groups else [df]


def _label(part: pd.DataFrame, column: str, default: str) -> str:
    return str(part[column].iloc[0]) if column in part.columns and len(part) else default


def task_subsets(df: pd.DataFrame) -> list[tuple[str, pd.DataFrame]]:
    """``("all", df)``, then the present and the absent tasks apart (by ``kind``) where ``df`` holds
    both (with only one of them, that one is all)."""
    if "kind" not in df.columns:
        return [("all", df)]
    absent = df["kind"].eq("absent").fillna(False).astype(bool)
    if not absent.any() or absent.all():
        return [("all", df)]
    return [("all", df), ("present", df[~absent]), ("absent", df[absent])]


def strongest_floor(
    df: pd.DataFrame, value: str = "quality", floors: Collection[str] = FLOORS
) -> tuple[str, float] | None:
    """The floor arm of ``df`` (one split and scaffold) with the highest mean ``value`` over its
    tasks, and that mean; None when no floor ran. Ties go to the first name in sorted order."""
    if df.empty or ARM not in df.columns:
        return None
    means = []
    for arm in sorted({str(a) for a in df[ARM].dropna()}):
        rows = df[(df[ARM].astype(str) == arm) & df[value].notna()] if is_floor(arm, floors) else df[:0]
        if len(rows):  # the mean over tasks of each task's mean over repeats, as mean_ci's
            means.append((float(rows.groupby("task_id")[value].mean().mean()), arm))
    if not means:
        return None
    best = max(m for m, _ in means)
    return next((arm, m) for m, arm in means if m == best)


def _with_floor(table: pd.DataFrame, df: pd.DataFrame, groups: list[str], value: str,
                floors: Collection[str]) -> pd.DataFrame:  # fmt: skip
    """``table`` (one ``compare_table``) with each row's strongest floor and lift over it."""
    extra: list[dict[str, object]] = []
    for _, row in table.iterrows():
        mask = pd.Series(True, index=df.index)
        for column in groups:
            mask &= (df[column] == row[column]) | (df[column].isna() & pd.isna(row[column]))
        part = df[mask]
        found = strongest_floor(part, value, floors)
        cells: dict[str, object] = dict.fromkeys(FLOOR_COLUMNS, math.nan)
        cells.update(floor=None, floor_wins=pd.NA, floor_losses=pd.NA, floor_ties=pd.NA)
        if found is not None:
            floor, mean = found
            cells.update(floor=floor, floor_mean=mean)
            if str(row[ARM]) != floor:
                d = paired_difference(part, str(row[ARM]), floor, value=value)
                cells.update(floor_lift=d.diff.mean, floor_lift_ci_low=d.diff.low,
                             floor_lift_ci_high=d.diff.high, floor_wins=d.wins, floor_losses=d.losses,
                             floor_ties=d.ties)  # fmt: skip
        extra.append(cells)
    add = pd.DataFrame(extra, columns=FLOOR_COLUMNS, index=table.index)
    add = add.astype({"floor_wins": "Int64", "floor_losses": "Int64", "floor_ties": "Int64"})
    return pd.concat([table, add], axis=1)


def _with_pool(table: pd.DataFrame, df: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    """``table`` with each row's mean candidate recall@K over its tasks (``POOL``; NaN where its
    runs had no pool)."""
    means = []
    for _, row in table.iterrows():
        mask = pd.Series(True, index=df.index)
        for column in keys:
            mask &= (df[column] == row[column]) | (df[column].isna() & pd.isna(row[column]))
        values = pd.to_numeric(df.loc[mask, POOL], errors="coerce")
        rows = df.loc[mask].assign(_pool=values).dropna(subset=["_pool"])
        means.append(float(rows.groupby("task_id")["_pool"].mean().mean()) if len(rows) else math.nan)
    return table.assign(**{POOL: means})


def lift_table(
    df: pd.DataFrame,
    value: str = "quality",
    baseline: str = BASELINE,
    *,
    floors: Collection[str] = FLOORS,
    apart: bool = True,
) -> pd.DataFrame:
    """Per split x scaffold x model: mean ``value`` [95% CI] and lift over ``baseline`` [95% CI]
    with win/loss/tie counts against it (``analysis.stats.compare_table``), then the group's
    strongest floor (``floor``, ``floor_mean``) and the lift over it [95% CI] with its counts
    (``FLOOR_COLUMNS``; the strongest floor's own row has no lift).

    ``apart``: a ``tasks`` column, and the present and the absent tasks again on rows of their own
    (``task_subsets``; the strongest floor is chosen again within each), where ``df`` has a
    ``kind`` column holding both."""
    if df.empty or ARM not in df.columns:
        return pd.DataFrame()
    groups = _groups(df)
    frames = []
    for order, (subset, part) in enumerate(task_subsets(df) if apart else [("all", df)]):
        table = compare_table(part, [*groups, ARM], baseline, value=value)
        table = _with_floor(table, part, groups, value, floors)
        if POOL in part.columns:
            table = _with_pool(table, part, [*groups, ARM])
        if apart:
            table.insert(len(groups), "tasks", subset)
        frames.append(table.assign(_order=order))
    out = pd.concat(frames, ignore_index=True)
    out = out.sort_values([*groups, "_order"], kind="stable", na_position="last")
    return out.drop(columns="_order").reset_index(drop=True)


def comparison_sentences(
    df: pd.DataFrame, a: str = "main", b: str = "light", value: str = "quality", baseline: str = BASELINE
) -> list[str]:
    """One sentence per split x scaffold holding both ``a`` and ``b``: "main − light = +0.12
    [0.03, 0.21] on dev (30 tasks, same scaffold `aided`); no-model baseline 0.19", then the
    strongest floor where one ran ("; strongest floor `retrieval` 0.37")."""
    if df.empty or ARM not in df.columns:
        return []
    groups = _groups(df)
    sentences = []
    for part in _parts(df, groups):
        arms = set(part[ARM].astype(str))
        if not {a, b} <= arms:
            continue
        diff = paired_difference(part, a, b, value=value)
        base = mean_ci(part[part[ARM] == baseline], value).mean if baseline in arms else None
        sentence = comparison_sentence(
            diff,
            split=_label(part, "split", "these tasks"),
            scaffold=_label(part, "scaffold", "as the profile sets it"),
            baseline=base,
        )
        found = strongest_floor(part, value)
        if found is not None:
            sentence += f"; strongest floor `{found[0]}` {found[1]:.2f}"
        if "variant" in groups:
            sentence += f"; variant `{_label(part, 'variant', '')}`"
        sentences.append(sentence)
    return sentences


def floor_sentences(df: pd.DataFrame, value: str = "quality", floors: Collection[str] = FLOORS) -> list[str]:
    """One sentence per split x scaffold x model that is no floor: its lift over the strongest
    floor, on all tasks, then on the present and the absent tasks apart, e.g. "main − `retrieval`
    = +0.03 [−0.11, +0.20] on dev (30 tasks, scaffold `aided`, W/L/T 11/14/5); present (27):
    −0.02 [−0.15, +0.12]; absent (3): +0.67 [0.00, 1.00]"."""
    table = lift_table(df, value, floors=floors)
    if table.empty:
        return []
    if "tasks" not in table.columns:
        table = table.assign(tasks="all")
    keys = [c for c in ("split", "scaffold", "variant") if c in table.columns]
    sentences = []
    for _, row in table[table["tasks"] == "all"].iterrows():
        if is_floor(str(row[ARM]), floors) or row["floor"] is None or pd.isna(row["floor"]):
            continue
        same = table[ARM] == row[ARM]
        for column in keys:
            same &= (table[column] == row[column]) | (table[column].isna() & pd.isna(row[column]))
        text = (
            f"{row[ARM]} − `{row['floor']}` = "
            f"{_interval(row['floor_lift'], row['floor_lift_ci_low'], row['floor_lift_ci_high'], True)}"
            f" on {row['split'] if 'split' in keys else 'these tasks'} ({int(row['n'])} tasks"
            + (f", scaffold `{row['scaffold']}`" if "scaffold" in keys else "")
            + f", W/L/T {_counts(row)})"
        )
        for _, sub in table[same & (table["tasks"] != "all")].iterrows():
            lift = _interval(sub["floor_lift"], sub["floor_lift_ci_low"], sub["floor_lift_ci_high"], True)
            text += f"; {sub['tasks']} ({int(sub['n'])}): {lift} vs `{sub['floor']}`"
        sentences.append(text)
    return sentences


def _counts(row: pd.Series) -> str:
    if pd.isna(row["floor_wins"]):
        return ""
    return f"{int(row['floor_wins'])}/{int(row['floor_losses'])}/{int(row['floor_ties'])}"


def _interval(mean: float, low: float, high: float, sign: bool = False) -> str:
    if math.isnan(mean):
        return "n/a"
    head = f"{mean:+.2f}" if sign else f"{mean:.2f}"
    if math.isnan(low):
        return head
    return f"{head} [{low:.2f}, {high:.2f}]".replace("-", "−")


def readable_lift(table: pd.DataFrame) -> pd.DataFrame:
    """``lift_table`` for reading: one column per figure, intervals in brackets, counts as W/L/T;
    the strongest floor and the lift over it where the table has them."""
    if table.empty:
        return table
    keys = [c for c in ("split", "scaffold", "variant", ARM) if c in table.columns]
    out = table[keys].rename(columns={ARM: "model"}).copy()
    if "tasks" in table.columns:  # all, present or absent: the task subset of the row
        out.insert(len(keys) - 1, "on", table["tasks"].to_numpy())
    out["tasks"] = table["n"].astype(int)
    out["quality [95% CI]"] = [
        _interval(m, lo, hi)
        for m, lo, hi in zip(table["mean"], table["ci_low"], table["ci_high"], strict=True)
    ]
    out["lift over no-model [95% CI]"] = [
        "baseline" if str(arm) == BASELINE else _interval(m, lo, hi, sign=True)
        for arm, m, lo, hi in zip(
            table[ARM], table["lift"], table["lift_ci_low"], table["lift_ci_high"], strict=True
        )
    ]
    out["W/L/T vs no-model"] = [
        "" if pd.isna(w) else f"{int(w)}/{int(lo)}/{int(t)}"
        for w, lo, t in zip(table["wins"], table["losses"], table["ties"], strict=True)
    ]
    if POOL in table.columns:  # the ceiling of any reranking of the retrieval's pool
        out["candidate recall@K"] = ["" if math.isnan(v) else f"{v:.2f}" for v in table[POOL]]
    if "floor" in table.columns:
        out["strongest floor"] = [
            "" if f is None or pd.isna(f) else f"{f} {m:.2f}"
            for f, m in zip(table["floor"], table["floor_mean"], strict=True)
        ]
        out["lift over floor [95% CI]"] = [
            "" if f is None or pd.isna(f) else "floor" if str(arm) == f else _interval(m, lo, hi, sign=True)
            for arm, f, m, lo, hi in zip(
                table[ARM],
                table["floor"],
                table["floor_lift"],
                table["floor_lift_ci_low"],
                table["floor_lift_ci_high"],
                strict=True,
            )
        ]
        out["W/L/T vs floor"] = [
            "" if pd.isna(w) else f"{int(w)}/{int(lo)}/{int(t)}"
            for w, lo, t in zip(table["floor_wins"], table["floor_losses"], table["floor_ties"], strict=True)
        ]
    return out.reset_index(drop=True)


def readable_number(value: Any) -> str:
    """A number as a person reads it: integers with thousands separators (never ``3.21e+03``),
    fractions to three decimals; anything else as it is."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        return "–" if value is None or (isinstance(value, float) and math.isnan(value)) else str(value)
    number = float(value)
    if math.isnan(number):
        return "–"
    if number.is_integer():
        return f"{int(number):,}"
    return f"{number:,.0f}" if abs(number) >= 1000 else f"{number:.3f}"


def readable(df: pd.DataFrame) -> pd.DataFrame:
    """``df`` with every numeric column (not booleans) as ``readable_number`` strings."""
    shown = df.copy()
    for column in shown.columns:
        if pd.api.types.is_numeric_dtype(shown[column]) and not pd.api.types.is_bool_dtype(shown[column]):
            shown[column] = shown[column].map(readable_number)
    return shown
