"""How many runs a Dask task carries (``experiments.batching``) and how a task's restarts are
counted per run (``experiments.cluster._attempts``); the cluster itself is in test_cluster.py."""

from __future__ import annotations

import math

from subagent_lab.experiments.batching import MAX_RUNS, TARGET_S, Batcher
from subagent_lab.experiments.cluster import _attempts


def test_one_run_per_task_until_runs_are_seen_then_enough_to_fill_the_target() -> None:
    batcher = Batcher(threads=2)
    assert batcher.size(1000) == 1  # nothing known yet
    batcher.observe(runs=4, seconds=4 * 0.025)  # 25 ms a run
    assert batcher.size(1000) == int(TARGET_S / 0.025) == 20


def test_a_run_of_a_real_model_is_a_task_of_its_own() -> None:
    batcher = Batcher(threads=2)
    batcher.observe(runs=1, seconds=12.0)
    batcher.observe(runs=1, seconds=0.4)
    assert batcher.size(1000) == 1


def test_the_last_runs_still_spread_over_every_worker_and_a_batch_is_capped() -> None:
    batcher = Batcher(threads=2)
    batcher.observe(runs=10, seconds=0.001)
    assert batcher.size(100_000) == MAX_RUNS
    assert batcher.size(40) == 10  # a quarter of what is waiting: 2 tasks per thread remain
    assert batcher.size(3) == 1


def test_a_figure_that_is_not_a_duration_is_ignored() -> None:
    batcher = Batcher(threads=1)
    for bad in (math.nan, math.inf, -1.0):
        batcher.observe(runs=5, seconds=bad)
    assert batcher.size(1000) == 1


def test_a_single_run_task_counts_every_lost_worker_as_a_start() -> None:
    assert _attempts([{"worker": "b"}], [["b"]], lost=0) == [1]
    assert _attempts([{"worker": "b"}], [["a", "b"]], lost=1) == [2]
    assert _attempts([{"worker": "b"}], [["b"]], lost=1) == [2]  # the lost worker's start never arrived


def test_a_batch_counts_the_lost_worker_against_the_run_it_was_in() -> None:
    rows = [{"worker": "b"}] * 4
    # Worker a finished runs 0 and 1, was in run 2 when it died; run 2's start there never arrived.
    assert _attempts(rows, [["a", "b"], ["a", "b"], ["b"], ["b"]], lost=1) == [2, 2, 2, 1]
    # No worker lost: each run counts its own starts only.
    assert _attempts(rows, [["b"], ["b"], ["b"], ["b"]], lost=0) == [1, 1, 1, 1]
    # A task whose workers kept dying has no finishing worker: the starts on record are the count.
    failed = [{"status": "failed"}] * 2
    assert _attempts(failed, [["a", "c"], ["a"]], lost=3) == [2, 1]
