"""What a result table leads with, in words and readable cells: the paired comparisons as
sentences, the lift table with intervals in brackets. The figures are ``analysis.lift``'s
(re-exported here: the lift over the baseline and the strongest floor, the task subsets).
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Collection
from typing import Any

import pandas as pd

from subagent_lab.analysis.lift import (
    ARM,
    BASELINE,
    FLOOR_COLUMNS,
    FLOORS,
    LEAK_FLAG,
    POOL,
    SUBSETS,
    _groups,
    _label,
    _parts,
    is_floor,
    leak_count,
    leak_known,
    leaking,
    lift_table,
    strongest_floor,
    task_subsets,
)
from subagent_lab.analysis.stats import comparison_sentence, mean_ci, paired_difference, sign_text

__all__ = [
    "ARM", "BASELINE", "FLOORS", "FLOOR_COLUMNS", "LEAK_FLAG", "POOL", "SUBSETS", "comparison_sentences",
    "floor_sentences", "is_floor", "lead_sentences", "leak_count", "leak_known", "leaking", "lift_table",
    "readable", "readable_lift", "readable_number", "strongest_floor", "task_subsets",
]  # fmt: skip


def comparison_sentences(
    df: pd.DataFrame, a: str = "main", b: str = "light", value: str = "quality", baseline: str = BASELINE
) -> list[str]:
    """One sentence per split x scaffold holding both ``a`` and ``b``, over the headline's tasks
    (``task_subsets``: absent ones apart): "main − light = +0.12 [0.03, 0.21] on dev (30 tasks,
    same scaffold `aided`; 9 non-tied, sign test p = 0.04); no-model baseline 0.19", then the
    strongest floor where one ran ("; strongest floor `retrieval` 0.37"), then the same difference
    without the leaking tasks where the rows flag them ("; no-leak (20 tasks, 10 leaking left
    out): +0.05 [...] (6 non-tied, sign test p = 0.69)")."""
    if df.empty or ARM not in df.columns:
        return []
    groups = _groups(df)
    sentences = []
    for whole in _parts(df, groups):
        arms = set(whole[ARM].astype(str))
        if not {a, b} <= arms:
            continue
        subsets = dict(task_subsets(whole))
        part = subsets.get("all", subsets.get("present", whole))
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
        if "no-leak" in subsets:
            clean = paired_difference(subsets["no-leak"], a, b, value=value)
            d = clean.diff
            sentence += (f"; no-leak ({d.n} tasks, {leak_count(part)} leaking left out): "
                         f"{_interval(d.mean, d.low, d.high, True)} ({sign_text(clean)})")  # fmt: skip
        if "variant" in groups:
            sentence += f"; variant `{_label(part, 'variant', '')}`"
        sentences.append(sentence)
    return sentences


def lead_sentences(df: pd.DataFrame) -> list[str]:
    """The paired comparisons a report leads with: main against light where both ran; else each
    other pair of arms that ran on the same tasks, the floors (``retrieval``, ``none``) included
    (models before floors, the no-model baseline last: ``retrieval − none = ...``)."""
    found = comparison_sentences(df)
    if found or df.empty or ARM not in df.columns or "task_id" not in df.columns:
        return found
    arms = sorted({str(a) for a in df[ARM].dropna()}, key=lambda a: (is_floor(a), a == BASELINE, a))
    tasks = {arm: set(df.loc[df[ARM].astype(str) == arm, "task_id"]) for arm in arms}
    for i, a in enumerate(arms):
        for b in arms[i + 1 :]:
            if tasks[a] & tasks[b]:
                found += [s for s in comparison_sentences(df, a, b) if " (0 tasks" not in s]
    return found


def floor_sentences(df: pd.DataFrame, value: str = "quality", floors: Collection[str] = FLOORS) -> list[str]:
    """One sentence per split x scaffold x model that is no floor: its lift over the strongest
    floor on the headline's tasks, then on the non-leaking and the absent tasks apart, each with
    W/L/T and the sign test, e.g. "main − `retrieval` = +0.03 [−0.11, +0.20] on dev (27 tasks,
    scaffold `aided`, W/L/T 11/11/5, 22 non-tied, sign test p = 1.000); no-leak (20): −0.02
    [−0.15, +0.12] vs `retrieval` (W/L/T ...); absent (3): −0.33 [−1.00, 0.00] vs `give-up` (...)"."""
    table = lift_table(df, value, floors=floors)
    if table.empty:
        return []
    if "tasks" not in table.columns:
        table = table.assign(tasks="all")
    keys = [c for c in ("split", "scaffold", "variant") if c in table.columns]
    sentences = []
    head = table["tasks"].isin(("all", "present"))
    for _, row in table[head].iterrows():
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
        for _, sub in table[same & ~head].iterrows():
            lift = _interval(sub["floor_lift"], sub["floor_lift_ci_low"], sub["floor_lift_ci_high"], True)
            text += f"; {sub['tasks']} ({int(sub['n'])}): {lift} vs `{sub['floor']}`"
            text += f" (W/L/T {_counts(sub)})" if _counts(sub) else ""
        sentences.append(text)
    return sentences


def _counts(row: pd.Series, prefix: str = "floor_") -> str:
    """``W/L/T, N non-tied, sign test p = P`` of a row's paired counts ("" without them)."""
    if pd.isna(row[f"{prefix}wins"]):
        return ""
    wins, losses, ties = (int(row[f"{prefix}{c}"]) for c in ("wins", "losses", "ties"))
    p = row[f"{prefix}sign_p"]
    return f"{wins}/{losses}/{ties}, {wins + losses} non-tied, sign test p = {p:.3f}"


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
    if "sign_p" in table.columns:
        out["sign p vs no-model"] = [_p(p) for p in table["sign_p"]]
    if "leaks" in table.columns:
        out.insert(list(out.columns).index("tasks") + 1, "leaks", table["leaks"].astype(int))
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
        out["sign p vs floor"] = [_p(p) for p in table["floor_sign_p"]]
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


def _p(p: float) -> str:
    """A sign test's p-value as a table cell ("" where there is none)."""
    return "" if pd.isna(p) else f"{p:.3f}" if p >= 0.001 else "<0.001"
