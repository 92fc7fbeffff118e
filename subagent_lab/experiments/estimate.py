"""What a sweep will cost before it starts: its runs per model times the median wall time of that
model's recorded runs (the committed rows of ``benchmarks/results``, or any rows given).

Only runs without a cache hit are timed (a replayed call takes no model time). A model with no
recorded run is named as unknown, never guessed.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path

import pandas as pd

RESULTS = Path(__file__).resolve().parents[2] / "benchmarks" / "results"
"""The committed rows of a source checkout (absent from an installed package: then no estimate)."""
REAL_MODEL_WORKERS = 1
"""The default workers of a sweep that runs a language model: one server, one request at a time,
so temperature-0 repeats decode alike (two slots batch and can differ; docs/evaluation.md)."""
FLOOR_WORKERS = 2
"""The default workers of a sweep of floors only (no server, nothing to keep apart)."""


def default_workers(models: Iterable[str], floors: Iterable[str]) -> int:
    """``REAL_MODEL_WORKERS`` when one of ``models`` is not a floor, else ``FLOOR_WORKERS``."""
    return REAL_MODEL_WORKERS if set(models) - set(floors) else FLOOR_WORKERS


def recorded_walls(sources: Iterable[Path] | None = None) -> dict[str, tuple[float, int]]:
    """Per model choice: the median ``elapsed_s`` of its uncached recorded runs and their count,
    from the CSVs ``sources`` (default: every CSV under ``RESULTS``)."""
    paths = sorted(RESULTS.glob("*.csv")) if sources is None else list(sources)
    frames = []
    for path in paths:
        try:
            columns = set(pd.read_csv(path, nrows=0).columns)
        except (OSError, ValueError):
            continue
        if not {"model_choice", "elapsed_s"} <= columns:
            continue
        wanted = [c for c in ("model_choice", "elapsed_s", "cache_hits") if c in columns]
        frames.append(pd.read_csv(path, usecols=wanted))
    if not frames:
        return {}
    rows = pd.concat(frames, ignore_index=True).dropna(subset=["elapsed_s"])
    if "cache_hits" in rows.columns:
        rows = rows[rows["cache_hits"].fillna(0) == 0]
    grouped = rows.groupby(rows["model_choice"].astype(str))["elapsed_s"]
    return {
        str(m): (float(med), int(n))
        for (m, med), n in zip(grouped.median().items(), grouped.size(), strict=True)
    }


def estimate_lines(
    runs: Mapping[str, int], walls: Mapping[str, tuple[float, int]], workers: int
) -> list[str]:
    """What to print before a sweep: one line per model (runs x recorded median wall), then the
    total on ``workers`` workers (a lower bound where a model has no recorded run)."""
    lines, total, unknown = [], 0.0, []
    for model, n in runs.items():
        if model in walls:
            median, count = walls[model]
            total += n * median
            recorded = f"median of {count} recorded runs"
            lines.append(f"  {model}: {n} runs x {median:.1f} s ({recorded}) = {_span(n * median)}")
        else:
            unknown.append(model)
            lines.append(f"  {model}: {n} runs, no recorded run to time it by")
    head = (
        f"estimate: {sum(runs.values())} runs, about {_span(total / max(workers, 1))} on {workers} worker(s)"
    )
    if unknown:
        head += f" plus the runs of {', '.join(unknown)}"
    return [head, *lines]


def _span(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"
