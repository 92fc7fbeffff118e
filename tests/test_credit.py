"""The per-child credit table of the delegation study (``sl.study_credit_table``) and its
summaries (``sl.credit_runs``, ``sl.credit_by_swap``), on stand-in models: the no-model parent,
a recorded child that finds the gold, and an empty child standing in for a swap that finds nothing."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd

from subagent_lab.api.credit import CREDIT_COLUMNS, study_credit_table
from subagent_lab.config.profiles import ModelConfig
from subagent_lab.core.model import Model
from subagent_lab.core.types import ModelChoice
from subagent_lab.experiments.delegation import Cell, DelegationSpec, run_study
from subagent_lab.experiments.delegation.credit import credit_by_swap, credit_runs
from subagent_lab.experiments.parent_baseline import ParentBaseline
from subagent_lab.models.baseline import BaselineModel
from subagent_lab.models.scripted import ScriptedModel, final

NOTHING = {"status": "partial", "summary": "Nothing found.", "findings": [], "evidence": [],
           "unresolved_questions": ["Where is it?"]}  # fmt: skip


def _parents(choice: ModelChoice, cfg: ModelConfig) -> Model:
    return ParentBaseline()


def _recorded_children(choice: ModelChoice, cfg: ModelConfig) -> Model:
    """The children as recorded: the no-model baseline, whatever model is asked (it cites the gold
    class of the study's first dev task, which the no-model parent then cites)."""
    return BaselineModel()


def _swapped_children(choice: ModelChoice, cfg: ModelConfig) -> Model:
    """As recorded, except that a child swapped to ``none`` finds nothing: an empty child."""
    return ScriptedModel([final(NOTHING)] * 12) if choice == "none" else BaselineModel()


def test_a_child_whose_evidence_the_parent_cites_has_credit_and_an_equal_swap_none(tmp_path: Path) -> None:
    spec = DelegationSpec(splits=("dev",), tasks_per_split=1, cells=(Cell(arm="delegate-light"),))
    study = run_study(spec, out_dir=tmp_path, parent_factory=_parents, child_factory=_recorded_children)
    row = study.iloc[0]
    assert row["sub_agents"] == 1 and row["quality"] > 0  # the child's locations scored as the parent's
    seen: list[pd.DataFrame] = []
    df = study_credit_table(study, live=_parents, child_live=_swapped_children, on_run=seen.append)
    assert list(df.columns) == ["run_key", "split", "task_id", "cell", *CREDIT_COLUMNS]
    # One row per child and swap; the run handed over as soon as it was made.
    swaps = [(r.child, r.recorded_model, r.swapped_to) for r in df.itertuples()]
    assert swaps == [(0, "light", "none"), (0, "light", "main")]
    assert len(seen) == 1 and seen[0].equals(df)
    # The replay with nothing swapped reproduced the recorded parent: 0 misses, the same ending.
    assert (df["identity_misses"] == 0).all() and df["identity_exact"].all()
    assert set(df["recorded_score"]) == {row["quality"]}  # scored as the study scored it
    empty, other = df.iloc[0], df.iloc[1]
    # Swapped to an empty child the parent has nothing to cite: its score drops, the credit is positive.
    assert empty["score"] < row["quality"] and empty["contribution"] == row["quality"] - empty["score"] > 0
    assert empty["answer_changed"] and empty["parent_live_calls"] > 0
    # Swapped to main the (stand-in) child answers the same: the parent answers the same, no credit.
    assert other["contribution"] == 0 and not other["answer_changed"]
    # Both swaps ran the child live; the envelope names the model and its cost, so the parent went live too.
    for swapped in (empty, other):
        assert swapped["cache_misses"] > swapped["parent_live_calls"] > 0 and swapped["live_tokens"] > 0
        assert swapped["cache_hits"] > 0 and swapped["replay_wall_s"] > 0
    # A resumed table leaves out what was done.
    again = study_credit_table(study, live=_parents, child_live=_swapped_children, done={row["run_key"]})
    assert again.empty and list(again.columns) == list(df.columns)


def _credit_rows() -> pd.DataFrame:
    """Two parents' credit rows: one with two children, one with one; one unscored replay."""
    rows = [
        # run_key, cell, parent_run, child, model, swap, recorded, score, hits, misses, tokens, wall
        ("a", "delegate-light", "run-a", 0, "light", "none", 0.5, 0.0, 6, 3, 900, 4.0),
        ("a", "delegate-light", "run-a", 0, "light", "main", 0.5, 0.5, 7, 2, 800, 6.0),
        ("a", "delegate-light", "run-a", 1, "light", "none", 0.5, 0.75, 8, 1, 300, 1.0),
        ("a", "delegate-light", "run-a", 1, "light", "main", 0.5, math.nan, 8, 1, 200, 2.0),
        ("b", "delegate-main", "run-b", 0, "main", "none", 0.25, 0.0, 2, 2, 100, 1.5),
    ]
    df = pd.DataFrame(rows, columns=["run_key", "cell", "parent_run", "child", "recorded_model", "swapped_to",
                                     "recorded_score", "score", "cache_hits", "cache_misses", "live_tokens",
                                     "replay_wall_s"])  # fmt: skip
    return df.assign(
        contribution=df["recorded_score"] - df["score"],
        identity_misses=[0, 0, 0, 0, 1],
        identity_exact=[True, True, True, True, False],
        identity_wall_s=[0.5, 0.5, 0.5, 0.5, 0.25],
    )


def test_credit_runs_checks_identity_and_sums_the_cost_per_parent() -> None:
    runs = credit_runs(_credit_rows())
    assert list(runs["parent_run"]) == ["run-a", "run-b"]
    assert list(runs["children"]) == [2, 1] and list(runs["replays"]) == [4, 1]
    assert list(runs["identity_misses"]) == [0, 1] and list(runs["identity_exact"]) == [True, False]
    assert list(runs["cache_hits"]) == [29, 2] and list(runs["cache_misses"]) == [7, 2]
    assert list(runs["live_tokens"]) == [2200, 100]
    assert list(runs["wall_s"]) == [13.5, 1.75]  # the replays' and the identity replay's, once
    assert credit_runs(_credit_rows().iloc[:0]).empty


def test_credit_by_swap_counts_children_that_helped_hurt_or_did_nothing() -> None:
    table = credit_by_swap(_credit_rows())
    assert [(r.cell, r.recorded_model, r.swapped_to) for r in table.itertuples()] == [
        ("delegate-light", "light", "none"), ("delegate-light", "light", "main"),
        ("delegate-main", "main", "none"),
    ]  # fmt: skip
    light_none, light_main, main_none = (table.iloc[i] for i in range(3))
    assert (light_none["helped"], light_none["hurt"], light_none["no_change"]) == (1, 1, 0)
    assert light_none["contribution"] == (0.5 - 0.25) / 2
    # The unscored replay is a child counted, in none of the three, its contribution left out of the mean.
    counts = [light_main[k] for k in ("children", "helped", "hurt", "no_change")]
    assert counts == [2, 0, 0, 1]
    assert light_main["contribution"] == 0.0
    assert (main_none["children"], main_none["helped"], main_none["live_tokens"]) == (1, 1, 100)


def test_a_baseline_study_gives_an_empty_table_and_says_why(tmp_path: Path) -> None:
    """On the no-model baseline every child is ``none``: no swap applies (``none`` is the same,
    ``other`` is for light and main), so the table is empty, and says so instead of nothing."""
    import pytest

    from subagent_lab.api.credit import EmptyCreditTable

    cells = (Cell(arm="alone"), Cell(arm="forced-delegation"))
    spec = DelegationSpec(splits=("dev",), tasks_per_split=1, cells=cells, baseline=True)
    study = run_study(spec, out_dir=tmp_path)
    assert study["sub_agents"].sum() == 1
    with pytest.warns(EmptyCreditTable) as caught:
        df = study_credit_table(study)
    assert df.empty and list(df.columns) == ["run_key", "split", "task_id", "cell", *CREDIT_COLUMNS]
    why = df.attrs["empty_reason"]
    assert str(caught[0].message) == why
    assert "from 2 study runs" in why and "1 without a child" in why
    assert "ran on 'none'" in why and "baseline study" in why
