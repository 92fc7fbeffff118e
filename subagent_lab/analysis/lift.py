"""The figures a result table leads with: each model's lift over the no-model baseline and over the
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
from collections.abc import Collection

import pandas as pd

from subagent_lab.analysis.stats import compare_table, paired_difference
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
