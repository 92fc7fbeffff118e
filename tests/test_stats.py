"""Bootstrap intervals, paired differences and the comparison table on synthetic result rows."""

from __future__ import annotations

import math
import re
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from subagent_lab.analysis.stats import (
    COMPARE_COLUMNS,
    Interval,
    compare_table,
    comparison_sentence,
    derive_seed,
    mean_ci,
    paired_difference,
    repeat_spread,
)

FAST = 2000
"""Resamples for the loops of many intervals (the default 9999 for single ones)."""


def _rows(arm: str, values: list[float] | np.ndarray, repeats: int = 1, **extra: object) -> pd.DataFrame:
    """One row per (task, repeat); task i gets ``values[i]`` on every repeat."""
    return pd.DataFrame(
        [{"task_id": f"t{i:02d}", "model_choice": arm, "repeat": r, "quality": float(v), **extra}
         for i, v in enumerate(values) for r in range(repeats)]
    )  # fmt: skip


# ---------------------------------------------------------------- seeds


def test_derived_seeds_are_stable_distinct_and_in_range() -> None:
    grid = [
        (t, m, r)
        for t in ("a", "b", "c", "yaml-safe-load")
        for m in ("light", "main", "none")
        for r in range(4)
    ]
    seeds = [derive_seed(0, *cell) for cell in grid]
    assert len(set(seeds)) == len(grid)  # no two cells share a seed (base + repeat shared them)
    assert all(0 <= s < 2**31 for s in seeds)
    assert derive_seed(1, "a", "light", 0) != derive_seed(0, "a", "light", 0)
    # Recorded sweeps must replay: the value may not depend on the process's hash seed.
    code = (
        "from subagent_lab.analysis.stats import derive_seed as d; print(d(7, 'yaml-safe-load', 'main', 2))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        env={"PYTHONHASHSEED": "123"},
    )
    assert int(out.stdout) == derive_seed(7, "yaml-safe-load", "main", 2)


# ---------------------------------------------------------------- one mean


def test_interval_is_deterministic_with_the_seed() -> None:
    df = _rows("main", np.random.default_rng(1).uniform(0, 1, 20))
    a, b = mean_ci(df), mean_ci(df)
    assert a == b and a.method == "BCa" and a.low < a.mean < a.high
    other = mean_ci(df, seed=5)
    assert other.mean == a.mean and (other.low, other.high) != (a.low, a.high)


def test_intervals_cover_the_true_mean_about_95_percent_of_the_time() -> None:
    rng = np.random.default_rng(42)
    covered = 0
    trials = 150
    for _ in range(trials):
        ci = mean_ci(_rows("m", rng.beta(2, 3, 30)), n_resamples=FAST)  # true mean 0.4
        covered += ci.low <= 0.4 <= ci.high
    assert 0.88 <= covered / trials <= 0.99


def test_all_equal_values_give_a_zero_width_interval_not_nan() -> None:
    ci = mean_ci(_rows("m", [0.5] * 12))
    assert ci == Interval(0.5, 0.5, 0.5, 12, 1, "constant")


def test_one_task_or_none_gives_no_interval() -> None:
    one = mean_ci(_rows("m", [0.7]))
    assert one.mean == 0.7 and one.n == 1 and math.isnan(one.low) and math.isnan(one.high)
    empty = mean_ci(_rows("m", []).reindex(columns=["task_id", "quality"]))
    assert empty.n == 0 and math.isnan(empty.mean)


def test_few_distinct_values_fall_back_from_bca_without_nan() -> None:
    ci = mean_ci(_rows("m", [0.0] * 9 + [1.0]))
    assert not math.isnan(ci.low) and ci.low <= ci.mean <= ci.high


def test_repeats_are_resampled_within_tasks() -> None:
    rng = np.random.default_rng(3)
    # Task means spread a little; the repeats of each task spread a lot (sampling noise).
    rows = [{"task_id": f"t{i}", "repeat": r, "quality": 0.5 + 0.02 * i + rng.normal(0, 0.3)}
            for i in range(12) for r in range(3)]  # fmt: skip
    df = pd.DataFrame(rows)
    hier = mean_ci(df)
    assert hier.method == "hierarchical" and hier.repeats == 3 and hier.n == 12
    task_means = df.groupby("task_id", as_index=False).agg(quality=("quality", "mean"))
    flat = mean_ci(task_means)
    assert hier.mean == pytest.approx(flat.mean)
    assert hier == mean_ci(df)  # deterministic too
    # Identical repeats add nothing: the two-stage interval matches the over-task one closely.
    same = _rows("m", np.linspace(0, 1, 12), repeats=3)
    assert mean_ci(same).high - mean_ci(same).low == pytest.approx(
        mean_ci(_rows("m", np.linspace(0, 1, 12))).high - mean_ci(_rows("m", np.linspace(0, 1, 12))).low,
        rel=0.25,
    )


# ---------------------------------------------------------------- paired differences


def test_pairing_by_task_narrows_the_interval_of_a_difference() -> None:
    rng = np.random.default_rng(7)
    difficulty = rng.uniform(0, 0.8, 30)  # tasks differ far more than the arms do
    light = difficulty + rng.normal(0, 0.02, 30)
    main = difficulty + 0.05 + rng.normal(0, 0.02, 30)
    df = pd.concat([_rows("light", light), _rows("main", main)])
    paired = paired_difference(df, "main", "light")
    assert paired.diff.mean == pytest.approx(0.05, abs=0.02)
    assert 0 < paired.diff.low < paired.diff.high  # the shift is found ...
    unpaired_low = mean_ci(_rows("main", main)).low - mean_ci(_rows("light", light)).high
    assert unpaired_low < 0  # ... where comparing the two intervals would not find it
    assert paired.wins + paired.losses + paired.ties == 30 and paired.wins > paired.losses
    assert paired.a_mean - paired.b_mean == pytest.approx(paired.diff.mean)


def test_paired_difference_uses_only_common_tasks_and_counts_ties() -> None:
    df = pd.concat([_rows("a", [1.0, 0.5, 0.2, 0.9]), _rows("b", [0.0, 0.5, 0.4])])
    d = paired_difference(df, "a", "b")
    assert d.diff.n == 3 and (d.wins, d.losses, d.ties) == (1, 1, 1)
    assert d.diff.mean == pytest.approx((1.0 + 0.0 - 0.2) / 3)


def test_identical_arms_give_a_zero_difference() -> None:
    values = np.linspace(0, 1, 10)
    d = paired_difference(pd.concat([_rows("a", values), _rows("b", values)]), "a", "b")
    assert (d.diff.mean, d.diff.low, d.diff.high, d.ties) == (0.0, 0.0, 0.0, 10)
    shifted = paired_difference(pd.concat([_rows("a", values + 0.1), _rows("b", values)]), "a", "b")
    assert shifted.diff.low == pytest.approx(0.1) and shifted.diff.high == pytest.approx(0.1)


def test_the_sentence_reads_as_the_report_leads_with_it() -> None:
    rng = np.random.default_rng(11)
    base = rng.uniform(0, 1, 30)
    df = pd.concat([_rows("light", base), _rows("main", np.clip(base + rng.normal(0.12, 0.1, 30), 0, 1))])
    d = paired_difference(df, "main", "light")
    text = comparison_sentence(d, split="test", scaffold="aided", baseline=0.19)
    pattern = (
        r"main − light = \+0\.\d\d \[−?0\.\d\d, 0\.\d\d\] on test "
        r"\(30 tasks, same scaffold `aided`; \d+ non-tied, sign test p (= [0-9.]+|< 0\.001)\); "
        r"no-model baseline 0\.19"
    )
    assert re.fullmatch(pattern, text), text
    one = paired_difference(pd.concat([_rows("light", [0.2]), _rows("main", [0.1])]), "main", "light")
    assert comparison_sentence(one, split="dev", scaffold="plain") == (
        "main − light = −0.10 [n/a] on dev (1 task, same scaffold `plain`; 1 non-tied, sign test p = 1.000)"
    )


def test_a_paired_difference_carries_its_non_tied_count_and_an_exact_sign_test() -> None:
    # The audit's case: 1 win, 6 losses, 53 ties. A BCa interval over so few non-tied tasks can
    # exclude 0; the sign test says p = 0.125, and both are reported.
    a = [1.0] + [0.0] * 6 + [0.5] * 53
    b = [0.0] + [1.0] * 6 + [0.5] * 53
    d = paired_difference(pd.concat([_rows("main", a), _rows("none", b)]), "main", "none")
    assert (d.wins, d.losses, d.ties, d.non_tied) == (1, 6, 53, 7)
    assert d.sign_p == pytest.approx(0.125)
    assert "7 non-tied, sign test p = 0.125" in comparison_sentence(d, split="t", scaffold="s")
    table = compare_table(pd.concat([_rows("main", a), _rows("none", b)]), ["model_choice"], "none")
    assert table.set_index("model_choice").loc["main", "sign_p"] == pytest.approx(0.125)


# ---------------------------------------------------------------- the table


def test_compare_table_gives_means_intervals_and_lift_over_the_baseline() -> None:
    rng = np.random.default_rng(5)
    base = rng.uniform(0, 0.5, 20)
    frames = []
    for scaffold, gain in (("plain", 0.0), ("aided", 0.2)):
        frames += [
            _rows("none", base, scaffold=scaffold),
            _rows("light", base + gain + rng.normal(0, 0.05, 20), scaffold=scaffold),
            _rows("main", base + gain + 0.1 + rng.normal(0, 0.05, 20), scaffold=scaffold, repeats=3),
        ]
    df = pd.concat(frames)
    table = compare_table(df, by=["scaffold", "model_choice"], baseline="none", n_resamples=FAST)
    assert list(table.columns) == ["scaffold", "model_choice", *COMPARE_COLUMNS]
    assert len(table) == 6 and set(table["n"]) == {20}
    row = {(r["scaffold"], r["model_choice"]): r for r in table.to_dict("records")}
    assert row[("aided", "main")]["repeats"] == 3
    assert math.isnan(row[("plain", "none")]["lift"]) and pd.isna(row[("plain", "none")]["wins"])
    for scaffold in ("plain", "aided"):
        for arm in ("light", "main"):
            r = row[(scaffold, arm)]
            assert r["lift"] == pytest.approx(r["mean"] - row[(scaffold, "none")]["mean"])
            assert r["ci_low"] <= r["mean"] <= r["ci_high"]
            assert r["lift_ci_low"] <= r["lift"] <= r["lift_ci_high"]
            assert r["wins"] + r["losses"] + r["ties"] == 20
    assert row[("aided", "main")]["lift_ci_low"] > 0.2  # +0.3 on aided
    assert abs(row[("plain", "light")]["lift"]) < 0.04  # no gain on plain: a lift near 0


def test_compare_table_without_a_baseline_arm_leaves_lift_empty() -> None:
    table = compare_table(_rows("main", [0.2, 0.4, 0.6]), by=["model_choice"], baseline="none")
    assert len(table) == 1 and math.isnan(table["lift"].iloc[0]) and table["n"].iloc[0] == 3
    with pytest.raises(ValueError, match="arm"):
        compare_table(_rows("main", [0.2]), by=["model_choice"], baseline="none", arm="scaffold")


def test_repeat_spread_separates_sampling_from_task_differences() -> None:
    rows = [
        # arm a: task t1 flips between 0 and 1, t2 is stable at 0.5; arm b never varies
        *({"arm": "a", "task_id": "t1", "quality": q} for q in (0.0, 1.0, 1.0)),
        *({"arm": "a", "task_id": "t2", "quality": 0.5} for _ in range(3)),
        *({"arm": "b", "task_id": t, "quality": q} for t, q in (("t1", 0.2), ("t2", 0.8)) for _ in range(2)),
        {"arm": "c", "task_id": "t1", "quality": 1.0},  # no repeats: left out
    ]
    out = repeat_spread(pd.DataFrame(rows), ["arm"]).set_index("arm")
    assert list(out.index) == ["a", "b"]
    a, b = out.loc["a"], out.loc["b"]
    assert (a["tasks"], a["repeats"], a["tasks_varying"]) == (2, 3, 1)
    # t1's sd is sqrt(1/3), t2's is 0: their mean
    assert a["within_sd"] == pytest.approx(np.sqrt(1 / 3) / 2)
    # of t1's three pairs two differ, none of t2's
    assert a["flip_rate"] == pytest.approx(2 / 6)
    within, between = (1 / 3) / 2, np.var([2 / 3, 0.5], ddof=1)
    assert a["sampling_share"] == pytest.approx(within / (within + between))
    assert (b["tasks_varying"], b["within_sd"], b["flip_rate"], b["sampling_share"]) == (0, 0.0, 0.0, 0.0)
    assert b["between_sd"] == pytest.approx(np.std([0.2, 0.8], ddof=1))
