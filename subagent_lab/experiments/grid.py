"""One grid engine: every cell of a grid run once, one row each, on threads, an executor or a cluster.

A ``Grid`` supplies its spec (a name and a key), its provenance, its cells and how one cell runs
(``execute(cell) -> row``). ``run_grid`` owns the rest, the same for every grid (the sweep,
``experiments.sweep``; the delegation study, ``experiments.delegation``):

- the directory (``grid_dir``): ``<out_dir>/<name>-<key>``, or ``<name>-<key>-<provenance key>``
  when that one exists already or the plain one holds rows of another provenance;
- the provenance (``experiments.stamp``), computed once: the cells' row stamps come from it, it is
  written to ``provenance.json`` and its key is in ``df.attrs["provenance"]``;
- resume: finished cells in ``results.jsonl`` (``experiments.rows.ResultLog``) are not run again,
  crashed ones are;
- the embedded server, started once up front (on a cluster each worker starts its own);
- one progress bar;
- the executor: a pool of threads, any ``concurrent.futures.Executor`` (a Dask client's
  ``get_executor()`` included), or a Dask scheduler's address (``experiments.cluster``).
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Callable
from concurrent.futures import Executor, Future, ThreadPoolExecutor, as_completed
from pathlib import Path
from typing import Any

import pandas as pd

from subagent_lab.config.profiles import LabConfig
from subagent_lab.core.types import FLOOR_CHOICES, ModelChoice
from subagent_lab.experiments.grid_types import C, Grid, GridCell, GridSpec, Row
from subagent_lab.experiments.rows import ResultLog, load_results, relative_row
from subagent_lab.experiments.stamp import Provenance

__all__ = [  # what a grid supplies (``experiments.grid_types``) is re-exported: grids import it from here
    "Grid", "GridCell", "GridSpec", "Progress", "Row", "grid_dir", "note_provenance", "recorded_provenance",
    "run_grid", "start_server",
]  # fmt: skip


def recorded_provenance(out: Path) -> Provenance | None:
    """The provenance a grid directory recorded, or None (no directory, or none written)."""
    try:
        return Provenance.model_validate_json((out / "provenance.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def grid_dir(spec: GridSpec, base: Path, prov: Provenance | None) -> Path:
    """``<base>/<name>-<key>``, or ``...-<provenance key>`` when that directory exists (an earlier
    run of this version) or the plain one recorded another provenance. Without ``prov`` there is
    nothing to compare: the plain directory.

    Existing directories stay resumable: a sweep's (plain, or suffixed after a conflict) and a
    delegation study's (always suffixed before the one engine) are found by the same rule.
    """
    plain = base / f"{spec.name}-{spec.key()}"
    if prov is None:
        return plain
    own = base / f"{plain.name}-{prov.key()}"
    old = recorded_provenance(plain)
    if (old is not None and old.same(prov)) or (old is None and not own.is_dir()):
        return plain
    return own


def note_provenance(spec: GridSpec, out: Path, prov: Provenance) -> None:
    """Write ``provenance.json``; say so when another version of this grid ran in its own directory."""
    for other in sorted(out.parent.glob(f"{spec.name}-{spec.key()}*")):
        old = recorded_provenance(other) if other != out else None
        if old is not None and not old.same(prov):
            moved = ", ".join(prov.differences(old))
            print(f"{spec.name!r}: {moved} differ from {other.name}; not resuming it: rows go to {out}")
    (out / "provenance.json").write_text(prov.model_dump_json(indent=2))


def start_server(lab: LabConfig, choices: set[ModelChoice]) -> None:
    """Start the local server once, up front, rather than racing to start it from workers."""
    if any(lab.resolve_model(choice)[1].base_url is None for choice in choices - FLOOR_CHOICES):
        from subagent_lab.local_models.server import ensure_server

        # On failure each run reports it as a model_error with the URL and the log path.
        with contextlib.suppress(Exception):
            ensure_server(lab)


class Progress:
    """One bar for every grid: cells done, with failures and tokens so far (none when disabled)."""

    def __init__(self, *, total: int, initial: int, enabled: bool) -> None:
        self.failed, self.tokens = 0, 0
        self.bar: Any = None
        if enabled:
            from tqdm.auto import tqdm

            self.bar = tqdm(total=total, initial=initial, desc="runs", unit="run")

    def add(self, row: Row) -> None:
        self.failed += row.get("status") == "failed"
        self.tokens += int(row.get("total_tokens") or 0)
        if self.bar is not None:
            self.bar.set_postfix(failed=self.failed, tokens=f"{self.tokens:,}")  # never 6e+5
            self.bar.update(1)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def run_grid(
    grid: Grid[C],
    lab: LabConfig,
    *,
    out_dir: str | Path | None = None,
    executor: Executor | None = None,
    max_workers: int = 1,
    cluster: str | None = None,
    storage: str | None = None,
    progress: bool = True,
    on_row: Callable[[Row], None] | None = None,
    on_start: Callable[[Path], None] | None = None,
) -> pd.DataFrame:
    """Run (or resume) ``grid`` and return its table, the latest row per run key.

    ``out_dir``: where grid directories go (default ``<trace_dir>/sweeps``). ``cluster``: a Dask
    scheduler's address (``storage``: an fsspec URL its workers write traces to); else
    ``executor``, else a pool of ``max_workers`` threads. ``on_start`` gets the directory before
    the first cell runs. ``df.attrs``: ``grid_dir`` and ``provenance`` (its key).
    """
    grid.check(lab)
    prov = grid.provenance(lab)
    out = grid_dir(grid.spec, Path(out_dir) if out_dir else lab.trace_root() / "sweeps", prov)
    out.mkdir(parents=True, exist_ok=True)
    spec = _movable_spec(json.loads(grid.spec.model_dump_json()), out)
    (out / "spec.json").write_text(json.dumps(spec, indent=2))
    note_provenance(grid.spec, out, prov)
    if on_start is not None:
        on_start(out)
    log = ResultLog(out / "results.jsonl")
    done = {row["run_key"] for row in log.rows() if row.get("terminal_reason") != "crashed"}
    cells = [c for c in grid.cells(lab, out, prov) if c.run_key not in done]
    if cells and grid.model_factory is None and cluster is None:  # on a cluster, each worker starts its own
        start_server(lab, grid.models(cells))
    bar = Progress(total=len(cells) + len(done), initial=len(done), enabled=progress)

    def record(row: Row) -> None:
        log.append(relative_row(row, out))  # saved relative: the directory can move
        bar.add(row)
        if on_row is not None:
            on_row(row)

    try:
        if cluster is not None:
            from subagent_lab.experiments.cluster import run_on_cluster

            run_on_cluster(grid, cells, cluster, lab=lab, on_row=record, storage=storage)
        else:
            _run_here(grid, cells, executor, max_workers, record)
    finally:
        bar.close()
    df = load_results(out)
    df.attrs.update(grid_dir=str(out), provenance=prov.key())
    return df


def _run_here(
    grid: Grid[C], cells: list[C], executor: Executor | None, max_workers: int, record: Callable[[Row], None]
) -> None:
    """Run ``cells`` on ``executor`` (or a pool of threads of this process), recording each row."""
    pool = executor or ThreadPoolExecutor(max_workers=max_workers)
    try:
        futures: list[Future[Row]] = [pool.submit(grid.execute, cell) for cell in cells]
        for future in as_completed(futures):
            record(future.result())
    finally:
        if executor is None:
            pool.shutdown(wait=True, cancel_futures=True)


def _movable_spec(spec: dict[str, Any], out: Path) -> dict[str, Any]:
    """A grid's spec as ``spec.json`` keeps it: a task file's path (``split``) relative to the grid's
    directory, as its rows' paths are, so the sweep and its task file can move together and no
    absolute path of the user's machine is saved; a built-in suite's id stays as it is."""
    split = spec.get("split")
    if isinstance(split, str) and os.path.isabs(split):
        return {**spec, "split": os.path.relpath(split, out)}
    return spec
