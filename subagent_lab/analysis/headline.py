"""What a result table leads with: each model's lift over the no-model baseline and over the
strongest floor, and the paired light-vs-main difference, per split and scaffold, each with its
bootstrap 95% interval and the sign test over its non-tied tasks.

The headline is over the tasks with gold: absent tasks are scored apart (a constant give-up passes
them, so pooled they would lift any arm that gives up; the ``give-up`` floor,
``bench.giveup``, stands beside them), and the tasks whose prompt names a gold unit (the mined
tasks' ``names_gold_symbol``, *leaking*) are counted and left out again on rows of their own.

Pure functions of a sweep's rows (``analysis.stats`` computes every interval). Rows are grouped
by ``split`` and ``scaffold`` where those columns exist, so a comparison never mixes scaffolds.

A *floor* is an arm that runs no language model: ``none`` (the no-model baseline), ``retrieval``
(the retrieval floor), ``give-up`` (the constant "No evidence." answer), or any arm named
``<floor>-<suffix>`` after one (``retrieval-4``, the whole-unit retrieval of
``benchmarks/bench_explore.py``). A group's *strongest floor* is its floor arm with the highest
mean on the group's tasks (ties: the first by name); each arm's lift over it is paired by task,
like the lift over ``none``.
Where rows carry ``candidate_recall`` (runs that start from the retrieval's pool), each arm's
candidate recall@K stands beside its mean: the ceiling any reranking of that pool could reach.
"""

from __future__ import annotations

import json
import math
import numbers
from collections.abc import Collection
from typing import Any

import pandas as pd

from subagent_lab.analysis.stats import (
    compare_table,
    comparison_sentence,
    mean_ci,
    paired_difference,
    sign_text,
)
from subagent_lab.bench.giveup import GIVE_UP
from subagent_lab.core.types import FLOOR_CHOICES

ARM = "model_choice"
BASELINE = "none"
"""The no-model baseline's model choice (``subagent_lab.models.baseline``)."""
FLOORS: frozenset[str] = FLOOR_CHOICES | {GIVE_UP}
"""The floor arms' names (see the module docstring for ``<floor>-<suffix>``)."""
SUBSETS = ("all", "present", "no-leak", "absent")
"""The ``tasks`` column's values: every task (where none is absent), the tasks whose ``kind`` is
not ``absent`` (the headline, where some are), those of them whose prompt names no gold unit, the
absent ones."""
LEAK_FLAG = "names_gold_symbol"
"""The mined tasks' ``meta`` flag (``bench.mine``): the prompt names a gold function or class."""
POOL = "candidate_recall"
"""A row's candidate recall@K (``bench.pool``: a gold unit anywhere in the retrieval's pool, the
ceiling of any reranking of it); ``lift_table`` reports its mean beside each arm where rows have it."""
FLOOR_COLUMNS = ["floor", "floor_mean", "floor_lift", "floor_lift_ci_low", "floor_lift_ci_high",
                 "floor_wins", "floor_losses", "floor_ties", "floor_sign_p"]  # fmt: skip
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


def leaking(df: pd.DataFrame) -> pd.Series:
    """Per row: whether its task's prompt names a gold unit (a ``leaks`` column, else ``LEAK_FLAG``
    in the row's ``task_meta`` JSON); False where unknown."""
    if "leaks" in df.columns:
        return df["leaks"].fillna(False).astype(bool)
    if "task_meta" not in df.columns:
        return pd.Series(False, index=df.index)

    def flag(meta: object) -> bool:
        try:
            return bool(json.loads(meta).get(LEAK_FLAG, False)) if isinstance(meta, str) else False
        except (ValueError, AttributeError):
            return False

    return df["task_meta"].map(flag).astype(bool)


def leak_known(df: pd.DataFrame) -> bool:
    """Whether the rows say which tasks leak (a mined suite's flag), so a no-leak subset means something."""
    if "leaks" in df.columns:
        return bool(df["leaks"].notna().any())
    return "task_meta" in df.columns and bool(df["task_meta"].astype(str).str.contains(LEAK_FLAG).any())


def task_subsets(df: pd.DataFrame) -> list[tuple[str, pd.DataFrame]]:
    """The headline's tasks, then the same without the leaking ones, then the absent ones apart.

    The headline is ``("all", df)`` where no task is ``absent``, else ``("present", ...)``: absent
    tasks never enter it (a constant give-up passes them). ``("no-leak", ...)``: the headline's
    tasks whose prompt names no gold unit, where the rows say (``leak_known``); ``("absent",
    ...)``: the absent tasks, where there are some."""
    absent = df["kind"].eq("absent").fillna(False).astype(bool) if "kind" in df.columns else None
    if absent is None or not absent.any():
        head: list[tuple[str, pd.DataFrame]] = [("all", df)]
    elif absent.all():
        return [("absent", df)]
    else:
        head = [("present", df[~absent])]
    if leak_known(df):
        present = head[0][1]
        head.append(("no-leak", present[~leaking(present)]))
    if absent is not None and absent.any():
        head.append(("absent", df[absent]))
    return head


def leak_count(df: pd.DataFrame) -> int:
    """Distinct tasks of ``df`` whose prompt names a gold unit (``leaking``)."""
    return int(df.loc[leaking(df), "task_id"].nunique()) if "task_id" in df.columns else 0


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
        cells.update(floor_sign_p=math.nan)
        if found is not None:
            floor, mean = found
            cells.update(floor=floor, floor_mean=mean)
            if str(row[ARM]) != floor:
                d = paired_difference(part, str(row[ARM]), floor, value=value)
                cells.update(floor_lift=d.diff.mean, floor_lift_ci_low=d.diff.low,
                             floor_lift_ci_high=d.diff.high, floor_wins=d.wins, floor_losses=d.losses,
                             floor_ties=d.ties, floor_sign_p=d.sign_p)  # fmt: skip
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

    ``apart``: a ``tasks`` column naming the subset of each row (``task_subsets``: the headline's
    tasks, the non-leaking ones, the absent ones; the strongest floor is chosen again within each)
    and a ``leaks`` column, the leaking tasks among the headline's tasks of the row's group."""
    if df.empty or ARM not in df.columns:
        return pd.DataFrame()
    groups = _groups(df)
    frames = []
    subsets = task_subsets(df) if apart else [("all", df)]
    for order, (subset, part) in enumerate(subsets):
        table = compare_table(part, [*groups, ARM], baseline, value=value)
        table = _with_floor(table, part, groups, value, floors)
        if POOL in part.columns:
            table = _with_pool(table, part, [*groups, ARM])
        if apart:
            table.insert(len(groups), "tasks", subset)
            head = subsets[0][1] if subset != "absent" else part[:0]
            table["leaks"] = [leak_count(_group_rows(head, row, groups)) for _, row in table.iterrows()]
        frames.append(table.assign(_order=order))
    out = pd.concat(frames, ignore_index=True)
    out = out.sort_values([*groups, "_order"], kind="stable", na_position="last")
    return out.drop(columns="_order").reset_index(drop=True)


def _group_rows(df: pd.DataFrame, row: pd.Series, groups: list[str]) -> pd.DataFrame:
    """The rows of ``df`` in ``row``'s group (its ``groups`` values, NaN matching NaN)."""
    mask = pd.Series(True, index=df.index)
    for column in groups:
        mask &= (df[column] == row[column]) | (df[column].isna() & pd.isna(row[column]))
    return df[mask]


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
