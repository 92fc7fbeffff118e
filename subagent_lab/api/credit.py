"""What each child of one delegating run contributed: ``child_credit`` (``sl.child_credit``).

For each Task child of a recorded parent, the parent is replayed (``api.replay.replay_parent``)
with that child alone swapped to the no-model floor (``none``) and to the other model (light for a
child on main, main for one on light); the rest is served from the record. A child's contribution is
the recorded score less the score with it swapped. The replays' live calls (their tokens) and their
wall time are what finding out cost; nothing served from the record is spent again. A replay with
nothing swapped comes first: it must reproduce the recorded parent with 0 live calls (the identity
check, reported on every row).
"""

from __future__ import annotations

import math
import time
import warnings
from collections.abc import Callable, Collection, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from subagent_lab.agents.launcher import ModelFactory
from subagent_lab.agents.result import MainRunResult
from subagent_lab.api.replay import ParentReplay, replay_parent
from subagent_lab.api.runs import ConfigArg
from subagent_lab.api.views import RunLike
from subagent_lab.bench.suite import BenchTask
from subagent_lab.core.trace import RunEnded, RunStarted, read_trace
from subagent_lab.core.types import FLOOR_CHOICES

if TYPE_CHECKING:
    from subagent_lab.experiments.delegation.replay import StudyRow

ScoreArg = Callable[[MainRunResult], float] | BenchTask | None
"""How a parent's final answer is scored: a function, a benchmark task (its answer quality, as the
delegation study scores it), or None: 1.0 when the answer is the recorded one, else 0.0."""
OTHER_MODEL = {"light": "main", "main": "light"}
CREDIT_COLUMNS = (
    "parent_run", "child", "profile", "child_task", "recorded_model", "swapped_to", "recorded_score", "score",
    "contribution", "answer_changed", "terminal_reason", "cache_hits", "cache_misses",
    "parent_live_calls", "live_prompt_tokens", "live_completion_tokens", "live_tokens", "replay_wall_s",
    "identity_misses", "identity_exact", "identity_wall_s",
)  # fmt: skip
"""The table's columns, in order (docs/numbers.md, "Per-child credit")."""


def _scorer(score: ScoreArg, recorded_answer: str | None) -> Callable[[MainRunResult], float]:
    if isinstance(score, BenchTask):
        from subagent_lab.experiments.delegation.ledger import score_parent

        task = score

        def quality(result: MainRunResult) -> float:
            value = score_parent(task, result, task.workspace_root()).quality
            return math.nan if value is None else value  # an unscored task: no number, not a zero

        return quality
    if score is None:
        return lambda result: float(result.answer == recorded_answer)
    return score


def child_credit(
    run: RunLike,
    score: ScoreArg = None,
    *,
    swaps: Sequence[str] = ("none", "other"),
    config: ConfigArg = None,
    live: ModelFactory | None = None,
    child_live: ModelFactory | None = None,
    target: str | Path | None = None,
    **agent: Any,
) -> pd.DataFrame:
    """One row per (Task child, swap) of the recorded parent ``run``: the parent's score with that
    child swapped beside the recorded score, and what the replay sent live.

    Args:
        run: The recorded parent (its ``MainRunResult``, trace path or study row).
        score: See ``ScoreArg``.
        swaps: Model choices to swap each child to; ``"other"`` is light for a child on main and
            main for one on light (skipped for a child on another choice).
        config, live, child_live, target, **agent: As for ``replay_parent``.

    First the parent is replayed with nothing swapped: its score is the recorded score (the run
    itself when ``run`` is a ``MainRunResult``); its live calls (which should be 0), whether it
    reproduced the run (``identity_exact``) and its wall time are on every row and in ``df.attrs``.
    A parent without Task children gives no row.
    """
    options: dict[str, Any] = dict(config=config, live=live, child_live=child_live, target=target, **agent)
    started = time.monotonic()
    identity = replay_parent(run, None, **options)
    checked = {
        "identity_misses": identity.live_calls,
        "identity_exact": identity_exact(identity),
        "identity_wall_s": time.monotonic() - started,
    }
    recorded = run if isinstance(run, MainRunResult) else identity.result
    scorer = _scorer(score, recorded.answer)
    recorded_score = scorer(recorded)
    parent_run = _run_id(identity.recorded_trace)
    rows: list[dict[str, Any]] = []
    unswapped: list[str] = []
    for child in identity.children:
        for wanted in swaps:
            to = OTHER_MODEL.get(child.model_choice) if wanted == "other" else wanted
            if to is None or to == child.model_choice:
                unswapped.append(child.model_choice)
                continue
            started = time.monotonic()
            replay = replay_parent(run, {child.index: {"model": to}}, **options)
            wall = time.monotonic() - started
            rows.append(
                {
                    "parent_run": parent_run,
                    "child": child.index,
                    "profile": child.profile,
                    "child_task": child.task[:200],
                    "recorded_model": child.model_choice,
                    "swapped_to": to,
                    "recorded_score": recorded_score,
                    **_outcome(replay, scorer, recorded_score, recorded.answer),
                    "replay_wall_s": wall,
                    **checked,
                }
            )
    df = pd.DataFrame(rows, columns=list(CREDIT_COLUMNS))
    df.attrs.update(checked, identity_live_calls=identity.live_calls, recorded_trace=identity.recorded_trace)
    df.attrs["unswapped"] = unswapped  # each child's recorded choice, once per swap that was the same
    return df


def identity_exact(identity: ParentReplay) -> bool:
    """The replay with nothing swapped is the recorded run: no live call, and it ended as the
    recorded trace's ``run_ended`` says (terminal reason, contract, the parent's tokens)."""
    ended = next((e for e in read_trace(identity.recorded_trace) if isinstance(e, RunEnded)), None)
    if ended is None or identity.live_calls:
        return False
    result = identity.result
    return (result.terminal_reason, result.contract, result.usage) == (
        ended.terminal_reason, ended.contract, ended.usage,
    )  # fmt: skip


def _run_id(trace: str | Path) -> str:
    start = next((e for e in read_trace(trace) if isinstance(e, RunStarted)), None)
    return start.run_id if start is not None else Path(trace).stem


def _outcome(
    replay: ParentReplay, scorer: Callable[[MainRunResult], float], recorded: float, answer: str | None
) -> dict[str, Any]:
    """One replay's score, its difference from the recorded score and its cost."""
    result, usage = replay.result, replay.live_usage
    score = scorer(result)
    return {
        "score": score,
        "contribution": recorded - score,
        "answer_changed": result.answer != answer,
        "terminal_reason": result.terminal_reason,
        "cache_hits": replay.served_calls,
        "cache_misses": replay.live_calls,
        "parent_live_calls": replay.tally.live["parent"],
        "live_prompt_tokens": usage.prompt_tokens,
        "live_completion_tokens": usage.completion_tokens,
        "live_tokens": usage.total_tokens,
    }


def study_credit(
    row: StudyRow,
    score: ScoreArg = None,
    *,
    swaps: Sequence[str] = ("none", "other"),
    config: str | Path | None = None,
    live: ModelFactory | None = None,
    child_live: ModelFactory | None = None,
) -> pd.DataFrame:
    """``child_credit`` for one parent run of the delegation study (a row of its table): replayed
    under the configuration and arm it ran with, scored like the study (``score_parent``'s answer
    quality) unless ``score`` says otherwise, the row's ``split``, ``task_id`` and ``cell`` in front.

    ``config``: the ``profiles.yaml`` the study ran with (None: the default). ``live`` and
    ``child_live`` default to the configured models (the no-model ones for a baseline study).
    """
    from subagent_lab.experiments.delegation.replay import study_replay

    setup = study_replay(row, config)
    df = child_credit(
        str(row["trace_path"]),
        setup.task if score is None else score,
        swaps=swaps,
        config=setup.config,
        live=live or setup.live,
        child_live=child_live or setup.child_live,
        target=setup.task.workspace_root(),
        **setup.agent,
    )
    for at, key in enumerate(("run_key", "split", "task_id", "cell")):
        df.insert(at, key, row.get(key))
    return df


def study_credit_table(
    rows: pd.DataFrame,
    score: ScoreArg = None,
    *,
    swaps: Sequence[str] = ("none", "other"),
    config: str | Path | None = None,
    live: ModelFactory | None = None,
    child_live: ModelFactory | None = None,
    done: Collection[str] = (),
    on_run: Callable[[pd.DataFrame], None] | None = None,
) -> pd.DataFrame:
    """``study_credit`` for every row of a delegation study's table whose parent had a child and
    did not crash, in table order, one table (columns: ``run_key``, ``split``, ``task_id``,
    ``cell``, then ``CREDIT_COLUMNS``).

    ``done``: run keys to leave out (replayed before: a resumed benchmark). ``on_run`` is called
    with each run's rows as soon as they are made (to write them down before the next run).
    """
    frames: list[pd.DataFrame] = []
    left_out = {"crashed": 0, "without a child": 0, "done before": 0}
    unswapped: list[str] = []
    for _, row in rows.iterrows():
        if row.get("terminal_reason") == "crashed":
            left_out["crashed"] += 1
        elif not row.get("sub_agents"):
            left_out["without a child"] += 1
        elif row["run_key"] in done:
            left_out["done before"] += 1
        else:
            df = study_credit(row, score, swaps=swaps, config=config, live=live, child_live=child_live)
            if on_run is not None:
                on_run(df)
            if len(df):  # a parent whose children were all left out has no row to add
                frames.append(df)
            unswapped += df.attrs.get("unswapped", [])
    columns = ["run_key", "split", "task_id", "cell", *CREDIT_COLUMNS]
    if frames:
        return pd.concat(frames, ignore_index=True)
    empty = pd.DataFrame(columns=columns)
    empty.attrs["empty_reason"] = _why_empty(len(rows), left_out, unswapped, swaps)
    warnings.warn(empty.attrs["empty_reason"], EmptyCreditTable, stacklevel=2)
    return empty


class EmptyCreditTable(UserWarning):
    """``study_credit_table`` made no row; the message (and ``df.attrs["empty_reason"]``) says why."""


def _why_empty(runs: int, left_out: dict[str, int], unswapped: list[str], swaps: Sequence[str]) -> str:
    """Why a credit table has no row: the runs left out, and the children no swap applied to."""
    parts = [f"{n} {why}" for why, n in left_out.items() if n]
    text = f"no credit rows from {runs} study runs"
    if parts:
        text += f": {', '.join(parts)} (left out)"
    if unswapped:
        choices = ", ".join(f"{choice!r}" for choice in sorted(set(unswapped)))
        text += (
            f"; {len(unswapped)} child swaps changed nothing: the children ran on {choices} and the swaps "
            f"{tuple(swaps)} name the same model or 'other', which is defined for light and main only"
        )
        if set(unswapped) <= FLOOR_CHOICES:
            text += (
                " (a baseline study: every child is a no-model floor; replay a study run on models, or "
                "pass swaps naming another model, e.g. swaps=('light', 'main'))"
            )
    return text
