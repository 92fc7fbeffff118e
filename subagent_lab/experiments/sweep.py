"""Sweeps: tasks x models x scaffolds x profile variants x repeats, one persisted row per run.

A sweep directory is keyed by its spec (and, when an earlier version of it ran there, by its
provenance too). Rows go to ``results.jsonl`` as runs finish (``experiments.rows``); running the
same spec again skips finished runs. Any ``concurrent.futures.Executor`` runs the grid, a Dask
client's ``get_executor()`` included, or a Dask scheduler's address (``experiments.cluster``): the
unit of work is the picklable ``RunSpec`` (``experiments.spec``) and the top-level function
``execute_run`` (``experiments.execute``).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from concurrent.futures import Executor, Future, ThreadPoolExecutor, as_completed
from pathlib import Path
from typing import Any

import pandas as pd

from subagent_lab.agents.launcher import ModelFactory
from subagent_lab.bench.suite import validate_tasks
from subagent_lab.config.agent_profile import apply_overrides
from subagent_lab.config.profiles import (
    LabConfig,
    RuntimeProfile,
    load_config,
)
from subagent_lab.core.types import FLOOR_CHOICES, ModelChoice
from subagent_lab.experiments.execute import execute_run
from subagent_lab.experiments.rows import (
    OUTCOMES,
    SCORE_COLUMNS,
    TOOLS,
    ResultLog,
    base_row,
    load_results,
    result_row,
)
from subagent_lab.experiments.spec import RunSpec, SweepSpec, Variant, plan_runs, select_tasks, spec_tasks
from subagent_lab.experiments.stamp import Provenance, provenance

__all__ = [  # the grid and the rows are re-exported: callers import a sweep's names from here
    "OUTCOMES", "SCORE_COLUMNS", "TOOLS", "ResultLog", "RunSpec", "SweepSpec", "Variant", "base_row",
    "execute_run", "load_results", "plan_runs", "result_row", "run_sweep", "select_tasks", "spec_tasks",
    "sweep_dir",
]  # fmt: skip


def sweep_dir(spec: SweepSpec, out_dir: str | Path | None = None, lab: LabConfig | None = None) -> Path:
    """``<out_dir>/<name>-<grid hash>``, or ``...-<provenance hash>`` when that directory holds rows
    of another code, config, prompt, task or weights version than ``lab`` and this checkout
    (``experiments.stamp``). Without ``lab`` there is nothing to compare: the grid's first
    directory (``out_dir`` defaults to the default configuration's ``trace_dir``)."""
    base = Path(out_dir) if out_dir else (lab or load_config()).trace_root() / "sweeps"
    plain = base / f"{spec.name}-{spec.key()}"
    old = _recorded_provenance(plain) if lab is not None else None
    if lab is None or old is None:
        return plain
    prov = provenance(lab, spec_tasks(spec), spec.models)
    return plain if old.same(prov) else base / f"{plain.name}-{prov.key()}"


def _recorded_provenance(out: Path) -> Provenance | None:
    try:
        return Provenance.model_validate_json((out / "provenance.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def _note_provenance(spec: SweepSpec, out: Path, lab: LabConfig) -> None:
    """Write ``provenance.json``; say so when another version of this grid ran in its own directory."""
    prov = provenance(lab, spec_tasks(spec), spec.models)
    for other in sorted(out.parent.glob(f"{spec.name}-{spec.key()}*")):
        old = _recorded_provenance(other) if other != out else None
        if old is not None and not old.same(prov):
            moved = ", ".join(prov.differences(old))
            print(f"sweep {spec.name!r}: {moved} differ from {other.name}; not resuming it: rows go to {out}")
    (out / "provenance.json").write_text(prov.model_dump_json(indent=2))


def run_sweep(
    spec: SweepSpec,
    *,
    config_path: str | Path | None = None,
    out_dir: str | Path | None = None,
    executor: Executor | None = None,
    max_workers: int = 1,
    model_factory: ModelFactory | None = None,
    cache: bool = True,
    progress: bool = True,
    on_row: Callable[[dict[str, Any]], None] | None = None,
    cluster: str | None = None,
    storage: str | None = None,
) -> pd.DataFrame:
    """Run (or resume) a sweep and return its table, one row per run.

    ``cluster``: a Dask scheduler address (``tcp://host:8786``); the runs go to its workers, which
    need no file of the driver's (``subagent_lab.experiments.cluster``); rows then also say
    ``worker``, ``attempts`` and ``retried``. ``storage``: with ``cluster``, an fsspec URL the
    workers write traces to instead of returning them. Without ``cluster``, ``executor`` (any
    ``concurrent.futures.Executor``) or a pool of ``max_workers`` threads runs them.
    """
    lab = load_config(config_path)
    _check_variants(spec, lab)
    # Every workspace made (checkouts, sdists) and every gold span checked before any run starts.
    validate_tasks(spec_tasks(spec), where=spec.split)
    out = sweep_dir(spec, out_dir, lab)
    out.mkdir(parents=True, exist_ok=True)
    (out / "spec.json").write_text(spec.model_dump_json(indent=2))
    _note_provenance(spec, out, lab)
    log = ResultLog(out / "results.jsonl")
    done = {row["run_key"] for row in log.rows() if row.get("terminal_reason") != "crashed"}
    planned = plan_runs(spec, config_path=lab.source, out=out, cache=cache, lab=lab)
    runs = [r for r in planned if r.run_key not in done]
    if runs and model_factory is None and cluster is None:  # on a cluster, each worker starts its own
        _start_embedded_server(lab, {r.model for r in runs})
    bar = _progress(total=len(runs) + len(done), initial=len(done), enabled=progress)
    failures, tokens = 0, 0

    def record(row: dict[str, Any]) -> None:
        nonlocal failures, tokens
        log.append(row)
        failures += row.get("status") == "failed"
        tokens += int(row.get("total_tokens") or 0)
        if bar is not None:
            bar.set_postfix(failed=failures, tokens=f"{tokens:,}")  # never 6e+5
            bar.update(1)
        if on_row is not None:
            on_row(row)

    own = executor is None and cluster is None
    pool = executor or (ThreadPoolExecutor(max_workers=max_workers) if own else None)
    try:
        if cluster is not None:
            from subagent_lab.experiments.cluster import run_on_cluster

            run_on_cluster(
                runs, cluster, lab=lab, model_factory=model_factory, on_row=record, storage=storage
            )
        else:
            assert pool is not None
            futures: list[Future[dict[str, Any]]] = [pool.submit(execute_run, r, model_factory) for r in runs]
            for future in as_completed(futures):
                record(future.result())
    finally:
        if bar is not None:
            bar.close()
        if own and pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)
    return load_results(out)


def _check_variants(spec: SweepSpec, lab: LabConfig) -> None:
    """Validate every variant's overrides before any run starts (a ConfigError names the variant)."""
    base = lab.profile(spec.profile)
    presets = {name: lab.scaffold(name).resolved() for name in spec.scaffolds} or {"": {}}
    for variant in spec.variants:
        for name, fields in presets.items():
            where = f"variant {variant.label!r}" + (f" on scaffold {name!r}" if name else "")
            apply_overrides(
                RuntimeProfile, base, fields, variant.overrides, where=f"{where} of sweep {spec.name!r}"
            )


def _start_embedded_server(lab: LabConfig, choices: set[ModelChoice]) -> None:
    """Start the local server once, up front, rather than racing to start it from workers."""
    if any(lab.resolve_model(choice)[1].base_url is None for choice in choices - FLOOR_CHOICES):
        from subagent_lab.local_models.server import ensure_server

        # On failure each run reports it as a model_error with the URL and the log path.
        with contextlib.suppress(Exception):
            ensure_server(lab)


def _progress(*, total: int, initial: int, enabled: bool) -> Any:
    if not enabled:
        return None
    from tqdm.auto import tqdm

    return tqdm(total=total, initial=initial, desc="runs", unit="run")
