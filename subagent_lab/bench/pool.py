"""Candidate recall@K: whether a retrieval's pool holds a gold unit at all, the ceiling of any
reranking of it (issue 49). Pure: the task's gold, the workspace's files, the pool's locations."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from subagent_lab.bench.locmetrics import Item, gold_of, same_function
from subagent_lab.bench.task import BenchTask


def pool_item(root: Path, path: str, start: int, end: int, rank: int = 0) -> Item:
    """Lines ``start..end`` of ``path`` (relative to ``root``) as a credited item."""
    return Item((root / path).resolve(), start, end, rank, True, f"{path}:{start}-{end}")


def candidate_hit(task: BenchTask, root: Path, pool: Sequence[tuple[str, int, int]]) -> float | None:
    """1.0 when a unit of ``pool`` (``(path, start, end)``, any order) is the function of one of the
    task's gold spans (``locmetrics.same_function``, the function Acc@k test), else 0.0; None for a
    task without gold (an ``absent`` task: no ceiling to measure)."""
    if not task.gold:
        return None
    golds = [gold_of((root / g.path).resolve(), g.start, g.end) for g in task.gold]
    items = [pool_item(root, path, start, end, n) for n, (path, start, end) in enumerate(pool)]
    return float(any(same_function(item, gold) for item in items for gold in golds))


def item_span(item: str) -> tuple[str, int, int] | None:
    """A ``path:line`` or ``path:start-end`` item as ``(path, start, end)``; None if it is neither."""
    path, _, lines = item.rpartition(":")
    first, _, last = lines.partition("-")
    if not path or not first.isdigit() or (last and not last.isdigit()):
        return None
    return path, int(first), int(last or first)


def pool_recall(task: BenchTask, root: Path, items: Sequence[str]) -> float | None:
    """``candidate_hit`` of a run's pool given as items (``path:line`` header lines); None for a
    task without gold or a run without a pool."""
    spans = [span for item in items if (span := item_span(item)) is not None]
    return candidate_hit(task, root, spans) if spans else None
