"""The reading half of the public API: tables, scores, inspectors and comparisons of runs.

Everything here reads persisted files only (traces, a sweep's ``results.jsonl``), so it works
the same on a run that just finished and on one from last week, in a fresh kernel.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from subagent_lab.config.legacy import scaffold_of_fields
from subagent_lab.config.scaffolds import BASE, Scaffold, scaffold_hash

if TYPE_CHECKING:
    import ipywidgets
    import pandas as pd

    from subagent_lab.bench.scoring import Score
    from subagent_lab.bench.suite import BenchTask

__all__ = ["bench_task", "bench_workspace", "compare", "inspect", "load_runs", "score", "trace_table"]

RunLike = Any
"""A run result (anything with ``trace_path``: ``SubagentResult``, ``MainRunResult``, a sweep
row) or a trace path."""


def trace_of(run: RunLike) -> Path:
    """The trace file of a run result, a table row or a path (ValueError when there is none)."""
    path = run if isinstance(run, str | Path) else getattr(run, "trace_path", None)
    if path is None and hasattr(run, "get"):
        path = run.get("trace_path")  # a sweep row (pandas Series) or a dict
    if not isinstance(path, str | Path) or not str(path):
        raise ValueError(f"no trace path in {type(run).__name__}: pass a run result or a trace path")
    return Path(path)


def load_runs(source: str | Path | RunLike | Sequence[RunLike]) -> pd.DataFrame:
    """The runs ``source`` names as a table, one row per run.

    Args:
        source: A sweep directory (or its ``results.jsonl``): the sweep's scored table, as
            ``sl.sweep`` returned it. A directory of traces (e.g. ``runs/``): one row per
            ``.jsonl`` trace found below it (how it ended, tokens, tool calls, its path). A
            trace file, a run result, or a list of either: their rows, in that order.
    """
    from subagent_lab.analysis.metrics import runs_table
    from subagent_lab.experiments.sweep import load_results

    if isinstance(source, list | tuple):
        return runs_table([trace_of(run) for run in source])
    if not isinstance(source, str | Path):
        return runs_table([trace_of(source)])
    where = Path(source)
    if where.name == "results.jsonl" and where.is_file():
        where = where.parent
    if (where / "results.jsonl").is_file():
        df = load_results(where)
        df.attrs["sweep_dir"] = str(where)
        return df
    if where.is_file():
        return runs_table([where])
    if where.is_dir():
        traces = sorted(p for p in where.rglob("*.jsonl") if p.name != "results.jsonl")
        return runs_table(traces)
    raise FileNotFoundError(f"{source}: no sweep directory, trace directory or trace file there")


def trace_table(run: RunLike, kind: Literal["model", "tool"] = "model") -> pd.DataFrame:
    """One row per model call (``kind="model"``: purpose, tokens, latency, ``cache_hit``) or per
    tool call (``kind="tool"``: tool, arguments, status, size) of one run.

    Args:
        run: A run result, a sweep row, or a trace path.
        kind: ``"model"`` or ``"tool"``.
    """
    from subagent_lab.analysis.metrics import model_calls_table, tool_calls_table
    from subagent_lab.core.trace import ModelCalled, ModelCallFailed, read_trace

    events = read_trace(trace_of(run))
    if kind == "tool":
        return tool_calls_table(events)
    table = model_calls_table(events)
    if not table.empty:  # its rows are these events, in order
        calls = [e for e in events if isinstance(e, ModelCalled | ModelCallFailed)]
        table["cache_hit"] = [isinstance(e, ModelCalled) and e.cache_hit for e in calls]
    return table


def bench_task(task_id: str, suite: str | Path | None = None) -> BenchTask:
    """The benchmark task ``task_id`` (its ``prompt``, ``workspace``, ``gold`` spans, ``keywords``).

    ``suite``: a task file's path (or a built-in suite id) to look in; None: the dev and test suites.
    """
    from subagent_lab.bench.suite import load_suite

    tasks = load_suite(suite) if suite is not None else [*load_suite("dev"), *load_suite("test")]
    for task in tasks:  # ids are unique across the built-in splits, and within a file
        if task.id == task_id:
            return task
    raise KeyError(f"no benchmark task {task_id!r}; known: {[t.id for t in tasks]}")


def bench_workspace(task: str | BenchTask) -> Path:
    """The directory a benchmark task explores: its installed package, directory, or its git
    checkout or source tree (made in the cache if missing; ConfigError if it cannot be)."""
    return (bench_task(task) if isinstance(task, str) else task).workspace_root(fetch=True)


def score(task: str | BenchTask, run: Any) -> Score:
    """How well a run's answer fits a benchmark task (grounded evidence, gold recall, quality).

    Args:
        task: The benchmark task, or its id.
        run: The run's result (its ``contract`` is scored against the task's workspace, with what
            its trace says the harness listed and the tools showed, as sweeps score it).
    """
    from subagent_lab.bench.scoring import context_from_trace, score_run

    bench = bench_task(task) if isinstance(task, str) else task
    path = getattr(run, "trace_path", None)
    context = context_from_trace(path, require_seen=True) if path and Path(path).is_file() else None
    return score_run(bench, getattr(run, "contract", None), bench_workspace(bench), context=context)


def inspect(run_or_df: RunLike | pd.DataFrame) -> ipywidgets.VBox:
    """A widget to explore runs: the run inspector for one run, the sweep explorer for a table.

    Args:
        run_or_df: A run result or trace path (step through its model calls, tool calls,
            budgets and evidence), or a table from ``sl.sweep``/``sl.load_runs`` or a sweep or
            trace directory (filter, sort, and open any run).
    """
    import pandas as pd

    from subagent_lab.widgets import RunInspector, SweepExplorer

    if isinstance(run_or_df, pd.DataFrame):
        return SweepExplorer(run_or_df)
    if isinstance(run_or_df, str | Path) and Path(run_or_df).is_dir():
        return SweepExplorer(load_runs(run_or_df))
    return RunInspector(trace_of(run_or_df))


def compare(a: RunLike, b: RunLike, labels: tuple[str, str] | None = None) -> ipywidgets.HBox:
    """Two runs side by side in run inspectors (light vs main, a run and its re-run, ...).

    The default titles say which scaffold each side ran (a hash of its scaffold fields) and, when
    the two differ, which fields: a comparison of models should hold the scaffold fixed.

    Args:
        a: A run result, a sweep row, or a trace path.
        b: The same, for the right-hand side.
        labels: Titles of the two sides; default: profile, model, scaffold and how each ended.
    """
    from subagent_lab.widgets import side_by_side

    left, right = trace_of(a), trace_of(b)
    if labels:
        return side_by_side(left, right, labels=list(labels))
    fa, fb = set(_scaffold_of(left).labels()), set(_scaffold_of(right).labels())
    moved = sorted(fa ^ fb)
    note = "same scaffold" if not moved else "scaffold differs: " + ", ".join(moved)
    return side_by_side(left, right, labels=[f"{_label(left)} · {note}", f"{_label(right)} · {note}"])


def _scaffold_of(path: Path) -> Scaffold:
    from subagent_lab.widgets.records import run_view

    start = run_view(path).start
    return scaffold_of_fields(start.profile_fields if start else {}, BASE)


def _label(path: Path) -> str:
    from subagent_lab.widgets.records import run_view

    view = run_view(path)
    if view.start is None:
        return path.stem
    again = " · re-run" if view.start.rerun_of else ""
    scaffold = scaffold_hash(_scaffold_of(path))
    start = view.start
    return f"{start.profile} · {start.model_used} · scaffold {scaffold} · {view.terminal_reason}{again}"
