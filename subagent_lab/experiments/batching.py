"""How many runs one Dask task carries (``run_on_cluster``): joblib's automatic batching.

A Dask task costs the scheduler and the driver a few milliseconds of CPU each (submit, assign,
report, release, the driver's bookkeeping), whatever it runs. A run of a real model takes seconds,
so that cost is lost in it and each run is a task of its own. Runs that take milliseconds (the
fake endpoint of ``benchmarks/bench_scale.py``, a sweep replayed from the call cache) would spend
as much CPU on Dask as on themselves, so several share one task: enough to fill ``TARGET_S`` of a
worker's time, by the mean duration of the runs finished so far. The first tasks carry one run
each (nothing is known yet), and a batch never takes more than a ``1 / (2 x threads)`` share of
the runs still waiting, so the last tasks still spread over every worker.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

TARGET_S = 0.5
"""A batch's target duration on its worker (joblib aims between 0.2 s and 2 s)."""
MAX_RUNS = 64
"""The most runs one task carries."""


@dataclass
class Batcher:
    """The size of the next batch, from the runs finished so far."""

    threads: int
    """Worker threads of the cluster (the runs that can run at once)."""
    runs: int = 0
    seconds: float = 0.0

    def observe(self, runs: int, seconds: float) -> None:
        """``runs`` finished in ``seconds`` of a worker's time (ignored unless a finite figure)."""
        if runs > 0 and math.isfinite(seconds) and seconds >= 0:
            self.runs += runs
            self.seconds += seconds

    def size(self, waiting: int) -> int:
        """Runs for the next task, with ``waiting`` runs not yet submitted (at least 1)."""
        if self.runs == 0:
            return 1
        per_run = max(self.seconds / self.runs, 1e-4)
        fill = int(TARGET_S / per_run)
        share = waiting // (2 * max(self.threads, 1))
        return max(1, min(fill, share, MAX_RUNS))
