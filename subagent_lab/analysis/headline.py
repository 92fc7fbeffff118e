"""What a result table leads with: each model's lift over the no-model baseline and the paired
light-vs-main difference, per split and scaffold, each with its bootstrap 95% interval.

Pure functions of a sweep's rows (``analysis.stats`` computes every interval). Rows are grouped
by ``split`` and ``scaffold`` where those columns exist, so a comparison never mixes scaffolds.
"""

from __future__ import annotations

import math
import numbers
from typing import Any

import pandas as pd

from subagent_lab.analysis.stats import compare_table, comparison_sentence, mean_ci, paired_difference

ARM = "model_choice"
BASELINE = "none"
"""The no-model baseline's model choice (``subagent_lab.models.baseline``)."""


def _groups(df: pd.DataFrame) -> list[str]:
    """What a comparison holds fixed: the split, the scaffold, and the variant where there are
    several (a budget setting is a condition of its own, not a repeat)."""
    fixed = [c for c in ("split", "scaffold") if c in df.columns]
    if "variant" in df.columns and df["variant"].nunique(dropna=False) > 1:
        fixed.append("variant")
    return fixed


def _label(part: pd.DataFrame, column: str, default: str) -> str:
    return str(part[column].iloc[0]) if column in part.columns and len(part) else default


def lift_table(df: pd.DataFrame, value: str = "quality", baseline: str = BASELINE) -> pd.DataFrame:
    """Per split x scaffold x model: mean ``value`` [95% CI] and lift over ``baseline`` [95% CI]
    with win/loss/tie counts against it (``analysis.stats.compare_table``)."""
    if df.empty or ARM not in df.columns:
        return pd.DataFrame()
    return compare_table(df, [*_groups(df), ARM], baseline, value=value)


def comparison_sentences(
    df: pd.DataFrame, a: str = "main", b: str = "light", value: str = "quality", baseline: str = BASELINE
) -> list[str]:
    """One sentence per split x scaffold holding both ``a`` and ``b``: "main − light = +0.12
    [0.03, 0.21] on dev (30 tasks, same scaffold `aided`); no-model baseline 0.19"."""
    if df.empty or ARM not in df.columns:
        return []
    groups = _groups(df)
    parts = [part for _, part in df.groupby(groups, sort=True)] if groups else [df]
    sentences = []
    for part in parts:
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
        if "variant" in groups:
            sentence += f"; variant `{_label(part, 'variant', '')}`"
        sentences.append(sentence)
    return sentences


def _interval(mean: float, low: float, high: float, sign: bool = False) -> str:
    if math.isnan(mean):
        return "n/a"
    head = f"{mean:+.2f}" if sign else f"{mean:.2f}"
    if math.isnan(low):
        return head
    return f"{head} [{low:.2f}, {high:.2f}]".replace("-", "−")


def readable_lift(table: pd.DataFrame) -> pd.DataFrame:
    """``lift_table`` for reading: one column per figure, intervals in brackets, counts as W/L/T."""
    if table.empty:
        return table
    keys = [c for c in ("split", "scaffold", "variant", ARM) if c in table.columns]
    out = table[keys].rename(columns={ARM: "model"}).copy()
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
