"""Uncertainty for benchmark results: seeds, bootstrap intervals, paired differences.

Pure functions over result rows (a DataFrame with one row per run: a task column, an arm column
such as ``model_choice``, a ``repeat`` column and a value such as ``quality``). Intervals come from
``scipy.stats.bootstrap`` with a fixed seed, so the same rows always give the same interval:

* over tasks: each task's mean over its repeats, resampled by task (BCa; percentile where BCa is
  undefined);
* over tasks and repeats, where some task has more than one repeat: two-stage (hierarchical)
  resampling, tasks first, then repeats within each drawn task (percentile intervals);
* paired differences: the same, on the per-task differences of two arms over their common tasks,
  with the exact two-sided sign test over the non-tied tasks beside the interval (a BCa interval
  over a handful of non-tied tasks can exclude 0 where the sign test cannot: read both).

Degenerate inputs never raise: no task gives ``nan`` everywhere; one task gives its mean with a
``nan`` interval (one task says nothing about spread); values that are all equal give the interval
``[mean, mean]`` (every resample is that mean).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import stats

from subagent_lab.analysis.seeds import derive_seed as derive_seed  # re-exported: its old home

CONFIDENCE = 0.95
N_RESAMPLES = 9999
SEED = 0
"""The bootstrap's fixed random state: the same rows give the same interval."""
TIE_TOLERANCE = 1e-9
"""Per-task differences closer to 0 than this count as ties."""


@dataclass(frozen=True)
class Interval:
    """A mean with its bootstrap interval over ``n`` tasks (``repeats``: the most repeats of one task)."""

    mean: float
    low: float
    high: float
    n: int
    repeats: int = 1
    method: str = "none"
    """``BCa``, ``percentile``, ``hierarchical`` (tasks, then repeats), ``constant`` (all values
    equal), or ``none`` (fewer than two tasks: no interval)."""


@dataclass(frozen=True)
class PairedDifference:
    """``a − b`` over the tasks both arms ran, with its interval and per-task win/loss/tie counts."""

    a: str
    b: str
    diff: Interval
    a_mean: float
    b_mean: float
    wins: int
    """Tasks where ``a`` scored higher (task means over repeats)."""
    losses: int
    ties: int
    sign_p: float = math.nan
    """Exact two-sided sign test over the non-tied tasks (wins against losses at 1/2 each); 1.0
    with no non-tied task (nothing to test)."""

    @property
    def non_tied(self) -> int:
        """Tasks where the two arms differ: the sign test's sample."""
        return self.wins + self.losses


def sign_test(wins: int, losses: int) -> float:
    """The exact two-sided binomial sign test's p-value of ``wins`` against ``losses`` (ties left
    out); 1.0 when there is neither."""
    if wins + losses == 0:
        return 1.0
    return float(stats.binomtest(wins, wins + losses, 0.5).pvalue)


def _matrix(groups: Sequence[Sequence[float]]) -> tuple[np.ndarray, np.ndarray]:
    """Ragged per-task repeats as a nan-padded matrix and the count per row."""
    counts = np.array([len(g) for g in groups])
    width = int(counts.max()) if len(counts) else 0
    out = np.full((len(groups), width), np.nan)
    for i, group in enumerate(groups):
        out[i, : len(group)] = group
    return out, counts


def _resample_rows(
    values: np.ndarray, counts: np.ndarray, rows: np.ndarray, rng: np.random.Generator
) -> np.ndarray:
    """For drawn task rows (any leading shape), the mean of as many repeats as the task has,
    drawn with replacement from its own repeats."""
    width = values.shape[1]
    c = counts[rows]
    picks = np.floor(rng.random((*rows.shape, width)) * c[..., None]).astype(int)
    drawn = values[rows[..., None], picks]
    drawn = np.where(np.arange(width) < c[..., None], drawn, np.nan)
    return np.nanmean(drawn, axis=-1)


def _interval(
    a: Sequence[Sequence[float]],
    b: Sequence[Sequence[float]] | None = None,
    *,
    confidence: float = CONFIDENCE,
    n_resamples: int = N_RESAMPLES,
    seed: int = SEED,
) -> Interval:
    """The bootstrap interval of the mean over tasks of ``a`` (minus ``b``, paired by task), where
    ``a[i]`` holds task i's repeats."""
    if b is not None and len(b) != len(a):
        raise ValueError(f"paired arms need the same tasks: {len(a)} vs {len(b)}")
    mat_a, cnt_a = _matrix(a)
    mat_b, cnt_b = _matrix(b) if b is not None else (np.zeros((len(a), 1)), np.ones(len(a), dtype=int))
    if len(a) and (cnt_a.min() < 1 or cnt_b.min() < 1):
        raise ValueError("every task needs at least one value in each arm")
    per_task = np.nanmean(mat_a, axis=1) - np.nanmean(mat_b, axis=1) if len(a) else np.array([])
    n, repeats = len(per_task), int(max(cnt_a.max(initial=1), cnt_b.max(initial=1)))
    mean = float(per_task.mean()) if n else math.nan
    if n < 2:
        return Interval(mean, math.nan, math.nan, n, repeats, "none")
    within = (
        np.nanmax(mat_a, axis=1)
        - np.nanmin(mat_a, axis=1)
        + np.nanmax(mat_b, axis=1)
        - np.nanmin(mat_b, axis=1)
    )
    if np.ptp(per_task) == 0 and not within.any():  # every resample gives the mean
        return Interval(mean, mean, mean, n, repeats, "constant")
    rng = np.random.default_rng(seed)
    common = {"confidence_level": confidence, "n_resamples": n_resamples, "rng": rng}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a degenerate BCa warns and returns nan: handled below
        if repeats > 1:
            inner = np.random.default_rng(seed + 1)

            def statistic(rows: np.ndarray, axis: int = -1) -> np.ndarray:
                rows = rows.astype(int)
                diff = _resample_rows(mat_a, cnt_a, rows, inner) - _resample_rows(mat_b, cnt_b, rows, inner)
                return np.asarray(diff.mean(axis=axis))

            res = stats.bootstrap((np.arange(n),), statistic, vectorized=True, method="percentile", **common)
            method = "hierarchical"
        else:
            res = stats.bootstrap((per_task,), np.mean, method="BCa", **common)
            method = "BCa"
            if not np.isfinite([res.confidence_interval.low, res.confidence_interval.high]).all():
                res = stats.bootstrap(
                    (per_task,),
                    np.mean,
                    method="percentile",
                    **{**common, "rng": np.random.default_rng(seed)},
                )
                method = "percentile"
    ci = res.confidence_interval
    return Interval(mean, float(ci.low), float(ci.high), n, repeats, method)


def _per_task(df: pd.DataFrame, value: str, task: str) -> dict[str, list[float]]:
    rows = df[[task, value]].dropna()
    return {str(k): [float(v) for v in g[value]] for k, g in rows.groupby(task, sort=True)}


def mean_ci(
    df: pd.DataFrame,
    value: str = "quality",
    *,
    task: str = "task_id",
    confidence: float = CONFIDENCE,
    n_resamples: int = N_RESAMPLES,
    seed: int = SEED,
) -> Interval:
    """The mean of ``value`` over tasks (each task's mean over its repeats first) with its bootstrap
    interval: over tasks, or over tasks and repeats where a task has several (module docstring).
    Rows where ``value`` is missing are left out."""
    groups = _per_task(df, value, task)
    return _interval(list(groups.values()), confidence=confidence, n_resamples=n_resamples, seed=seed)


def paired_difference(
    df: pd.DataFrame,
    a: str,
    b: str,
    *,
    arm: str = "model_choice",
    value: str = "quality",
    task: str = "task_id",
    confidence: float = CONFIDENCE,
    n_resamples: int = N_RESAMPLES,
    seed: int = SEED,
) -> PairedDifference:
    """``a − b`` on the tasks both arms (rows with ``df[arm] == a`` / ``== b``) ran: mean over
    tasks of the per-task difference of means, its bootstrap interval, and win/loss/tie counts.

    Hold everything else fixed before calling (one scaffold, one split): rows are paired by task
    alone, repeats are resampled within each arm."""
    labels = df[arm].astype(str)
    ga = _per_task(df[labels == a], value, task)
    gb = _per_task(df[labels == b], value, task)
    tasks = sorted(set(ga) & set(gb))
    xa, xb = [ga[t] for t in tasks], [gb[t] for t in tasks]
    diff = _interval(xa, xb, confidence=confidence, n_resamples=n_resamples, seed=seed)
    per_task = np.array([np.mean(x) - np.mean(y) for x, y in zip(xa, xb, strict=True)])
    wins, losses = int((per_task > TIE_TOLERANCE).sum()), int((per_task < -TIE_TOLERANCE).sum())
    return PairedDifference(
        a=a,
        b=b,
        diff=diff,
        a_mean=float(np.mean([np.mean(x) for x in xa])) if tasks else math.nan,
        b_mean=float(np.mean([np.mean(y) for y in xb])) if tasks else math.nan,
        wins=wins,
        losses=losses,
        ties=int((np.abs(per_task) <= TIE_TOLERANCE).sum()),
        sign_p=sign_test(wins, losses),
    )


def _fmt(x: float, digits: int, sign: bool = False) -> str:
    if math.isnan(x):
        return "n/a"
    text = f"{x:+.{digits}f}" if sign else f"{x:.{digits}f}"
    return text.replace("-", "−")


def comparison_sentence(
    diff: PairedDifference,
    *,
    split: str,
    scaffold: str,
    baseline: float | None = None,
    digits: int = 2,
) -> str:
    """One sentence for a paired comparison, the line a report leads with, e.g.
    "main − light = +0.12 [0.03, 0.21] on test (30 tasks, same scaffold `aided`; 9 non-tied,
    sign test p = 0.04); no-model baseline 0.19". An undefined interval (fewer than two tasks)
    reads ``[n/a]``."""
    d = diff.diff
    interval = "[n/a]" if math.isnan(d.low) else f"[{_fmt(d.low, digits)}, {_fmt(d.high, digits)}]"
    tasks = f"{d.n} task" + ("" if d.n == 1 else "s")
    if d.repeats > 1:
        tasks += f" × up to {d.repeats} repeats"
    text = f"{diff.a} − {diff.b} = {_fmt(d.mean, digits, sign=True)} {interval} on {split}"
    text += f" ({tasks}, same scaffold `{scaffold}`; {sign_text(diff)})"
    if baseline is not None:
        text += f"; no-model baseline {_fmt(baseline, digits)}"
    return text


def sign_text(diff: PairedDifference) -> str:
    """``9 non-tied, sign test p = 0.04``: what the interval of ``diff`` rests on."""
    return f"{diff.non_tied} non-tied, sign test p {_p(diff.sign_p)}"


def _p(p: float) -> str:
    return "n/a" if math.isnan(p) else f"= {p:.3f}" if p >= 0.001 else "< 0.001"


COMPARE_COLUMNS = ["mean", "ci_low", "ci_high", "n", "repeats", "lift", "lift_ci_low", "lift_ci_high",
                   "wins", "losses", "ties", "sign_p"]  # fmt: skip
"""The columns ``compare_table`` adds after its ``by`` columns."""


def compare_table(
    df: pd.DataFrame,
    by: Sequence[str],
    baseline: str,
    *,
    arm: str | None = None,
    value: str = "quality",
    task: str = "task_id",
    confidence: float = CONFIDENCE,
    n_resamples: int = N_RESAMPLES,
    seed: int = SEED,
) -> pd.DataFrame:
    """One row per group of ``by``: the mean of ``value`` with its interval (``mean_ci``), and its
    lift over the baseline arm, paired by task (``paired_difference``).

    ``arm`` (default: the last of ``by``) is the column whose value ``baseline`` names (e.g.
    ``by=["split", "scaffold", "model_choice"], baseline="none"``); a group's baseline is the group
    with the same other ``by`` values and ``arm == baseline``. The baseline's own rows, and groups
    without a baseline, have ``nan`` lift and no counts. ``wins``/``losses``/``ties`` count tasks
    above/below/equal to the baseline; ``sign_p`` is the sign test over the non-tied ones. ``by``
    must name every factor that varies (split, scaffold, variant, model): rows of one task left in
    a group are pooled as its repeats."""
    by = list(by)
    arm = arm or by[-1]
    if arm not in by:
        raise ValueError(f"arm {arm!r} must be one of by={by}")
    others = [c for c in by if c != arm]
    rows: list[dict[str, object]] = []
    for key, group in df.groupby(by, sort=True, dropna=False):
        labels = dict(zip(by, key if isinstance(key, tuple) else (key,), strict=True))
        ci = mean_ci(group, value, task=task, confidence=confidence, n_resamples=n_resamples, seed=seed)
        row: dict[str, object] = {**labels, "mean": ci.mean, "ci_low": ci.low, "ci_high": ci.high,
                                  "n": ci.n, "repeats": ci.repeats}  # fmt: skip
        row.update(
            lift=math.nan,
            lift_ci_low=math.nan,
            lift_ci_high=math.nan,
            wins=pd.NA,
            losses=pd.NA,
            ties=pd.NA,
            sign_p=math.nan,
        )
        mask = df[arm] == baseline
        for column in others:
            mask &= df[column] == labels[column]
        if labels[arm] != baseline and mask.any():
            pair = pd.concat([group, df[mask]])
            d = paired_difference(
                pair, str(labels[arm]), baseline, arm=arm, value=value, task=task,
                confidence=confidence, n_resamples=n_resamples, seed=seed,
            )  # fmt: skip
            row.update(lift=d.diff.mean, lift_ci_low=d.diff.low, lift_ci_high=d.diff.high,
                       wins=d.wins, losses=d.losses, ties=d.ties, sign_p=d.sign_p)  # fmt: skip
        rows.append(row)
    out = pd.DataFrame(rows, columns=[*by, *COMPARE_COLUMNS])
    return out.astype({"n": int, "repeats": int, "wins": "Int64", "losses": "Int64", "ties": "Int64"})


SPREAD_COLUMNS = ["tasks", "repeats", "tasks_varying", "within_sd", "between_sd", "sampling_share",
                  "flip_rate"]  # fmt: skip
"""The columns ``repeat_spread`` adds after its ``by`` columns."""


def repeat_spread(
    df: pd.DataFrame, by: Sequence[str], *, value: str = "quality", task: str = "task_id"
) -> pd.DataFrame:
    """How much sampling moves ``value``: one row per group of ``by`` over the tasks with two or
    more repeats.

    ``tasks_varying``: tasks whose repeats do not all score the same; ``within_sd``: the mean over
    tasks of the standard deviation across a task's repeats (ddof 1); ``between_sd``: the standard
    deviation of the task means (ddof 1); ``sampling_share``: mean within-task variance over
    (that + the variance of task means), the part of a run's spread that repeats, not tasks, carry;
    ``flip_rate``: over pairs of repeats of one task, the share that differ by more than
    ``TIE_TOLERANCE``. Groups without a repeated task are left out."""
    rows: list[dict[str, object]] = []
    for key, group in df.groupby(list(by), sort=True, dropna=False):
        labels = dict(zip(by, key if isinstance(key, tuple) else (key,), strict=True))
        repeated = [np.array(v) for v in _per_task(group, value, task).values() if len(v) > 1]
        if not repeated:
            continue
        within = np.array([x.var(ddof=1) for x in repeated])
        means = np.array([x.mean() for x in repeated])
        between = float(means.var(ddof=1)) if len(means) > 1 else math.nan
        pairs = [abs(a - b) > TIE_TOLERANCE for x in repeated for i, a in enumerate(x) for b in x[i + 1 :]]
        total = float(within.mean()) + between
        rows.append({
            **labels, "tasks": len(repeated), "repeats": max(len(x) for x in repeated),
            "tasks_varying": int(sum(np.ptp(x) > TIE_TOLERANCE for x in repeated)),
            "within_sd": float(np.sqrt(within).mean()), "between_sd": math.sqrt(between),
            "sampling_share": float(within.mean()) / total if total > 0 else math.nan,
            "flip_rate": float(np.mean(pairs)),
        })  # fmt: skip
    return pd.DataFrame(rows, columns=[*by, *SPREAD_COLUMNS])
