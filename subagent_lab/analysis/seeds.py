"""Sampling seeds for a sweep's repeats, stable across processes and platforms.

Apart from ``analysis.stats`` (numpy, pandas, scipy): a sweep's plan and every process that
reads a run's cell (a Dask scheduler, each worker) need the seed, not the statistics.
"""

from __future__ import annotations

import hashlib


def derive_seed(base: int, task_id: str, model: str, repeat: int) -> int:
    """A sampling seed for one (task, model, repeat), stable across processes and platforms.

    The SHA-256 of ``base|task_id|model|repeat``, cut to 31 bits (what every endpoint accepts).
    Unlike ``base + repeat``, no two tasks or models share a seed, so one unlucky seed cannot move
    a whole repeat of the suite the same way.
    """
    digest = hashlib.sha256(f"{base}|{task_id}|{model}|{repeat}".encode()).digest()
    return int.from_bytes(digest[:8], "big") % (2**31 - 1)
