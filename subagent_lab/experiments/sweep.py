"""Sweeps: tasks x models x scaffolds x profile variants x repeats, one persisted row per run.

A sweep directory is keyed by its spec (and, when an earlier version of it ran there, by its
provenance too). Rows go to ``results.jsonl`` as runs finish (``experiments.rows``); running the
same spec again skips finished runs. Any ``concurrent.futures.Executor`` runs the grid, a Dask
client's ``get_executor()`` included, or a Dask scheduler's address (``experiments.cluster``): the
unit of work is the picklable ``RunSpec`` (``experiments.spec``) and the top-level function
``execute_run``.
"""

from __future__ import annotations

import contextlib
import time
import traceback
from collections.abc import Callable
from concurrent.futures import Executor, Future, ThreadPoolExecutor, as_completed
from pathlib import Path
from typing import Any

import pandas as pd

from subagent_lab.agents.launcher import ModelFactory, SubagentLauncher, SubagentRequest
from subagent_lab.analysis.metrics import child_metrics
from subagent_lab.bench.scoring import context_from_trace, score_run
from subagent_lab.bench.suite import validate_tasks
from subagent_lab.config.agent_profile import apply_overrides
from subagent_lab.config.parsed import parsed_config
from subagent_lab.config.profiles import (
    LabConfig,
    ModelConfig,
    RuntimeProfile,
    load_config,
)
from subagent_lab.config.scaffolds import SCAFFOLD_FIELDS, scaffold_hash
from subagent_lab.core.model import Model
from subagent_lab.core.trace import Redactor, read_trace
from subagent_lab.core.types import FLOOR_CHOICES, ModelChoice
from subagent_lab.experiments.rows import (
    OUTCOMES,
    SCORE_COLUMNS,
    TOOLS,
    ResultLog,
    base_row,
    load_results,
    origin_columns,
    result_row,
)
from subagent_lab.experiments.spec import RunSpec, SweepSpec, Variant, plan_runs, select_tasks, spec_tasks
from subagent_lab.experiments.stamp import Provenance, provenance
from subagent_lab.local_models import factory as local_factory
from subagent_lab.local_models.namespace import config_namespace
from subagent_lab.models.cache import CachingModel
from subagent_lab.models.pool import pooled_factory

__all__ = [  # the grid and the rows are re-exported: callers import a sweep's names from here
    "OUTCOMES", "SCORE_COLUMNS", "TOOLS", "ResultLog", "RunSpec", "SweepSpec", "Variant", "base_row",
    "execute_run", "load_results", "plan_runs", "result_row", "run_sweep", "select_tasks", "spec_tasks",
    "sweep_dir",
]  # fmt: skip


def _caching_factory(
    inner: ModelFactory, lab: LabConfig, cache_dir: str, models: list[CachingModel]
) -> ModelFactory:
    def make(choice: ModelChoice, cfg: ModelConfig) -> Model:
        model = CachingModel(inner(choice, cfg), cache_dir, namespace=config_namespace(lab, cfg))
        models.append(model)
        return model

    return make


def _preset_named(lab: LabConfig, ran: str) -> str:
    """The preset whose every scaffold field the run ran (by hash), else ``profile``: a run that
    named no preset but ran one exactly is that preset's run."""
    names = ["plain", *lab.scaffolds]
    return next((n for n in names if scaffold_hash(lab.scaffold(n).resolved()) == ran), "profile")


def execute_run(run: RunSpec, model_factory: ModelFactory | None = None) -> dict[str, Any]:
    """Run one cell and return its row. Never raises: a crash becomes a row with the traceback."""
    started = time.time()
    lab: LabConfig | None = None
    try:
        lab = parsed_config(run.config_path)
        # A model with several ``endpoints`` is served by an endpoint pool; others as before.
        factory = model_factory or pooled_factory(lab, local_factory.default_model_factory(lab))
        cached: list[CachingModel] = []
        if run.cache_dir:
            factory = _caching_factory(factory, lab, run.cache_dir, cached)
        root = run.task.workspace_root(fetch=True)  # made before the sweep; a cluster worker makes its own
        launcher = SubagentLauncher(lab, root, model_factory=factory, trace_dir=run.trace_dir)
        request = SubagentRequest(
            task=run.task.prompt,
            profile=run.profile,
            model=run.model,
            overrides={**run.scaffold_fields, **run.variant.overrides},
            seed=run.seed,
            temperature=run.temperature,
        )
        profile = launcher.resolve_profile(request)
        result = launcher.launch(request)
        # The trace says what the harness listed and what the tools showed: scoring needs both.
        # Every arm must cite what its tools showed (a line cited from memory is a guess), so the
        # scaffolds are scored by one rule whether or not their grammar enforced it.
        trace = Path(result.trace_path) if result.trace_path else None
        exists = trace is not None and trace.is_file()
        context = context_from_trace(trace, require_seen=True) if trace is not None and exists else None
        # A task without gold is run and tabulated (reason, tools, tokens) but not scored.
        score = score_run(run.task, result.contract, root, context=context) if run.task.scored else None
        events = read_trace(trace) if trace is not None and exists else None
        folded = child_metrics(events) if events is not None else None
        row = result_row(run, result.model_dump(mode="json"), score.model_dump(mode="json") if score else {})
        row.update(origin_columns(events or []))
        ran = scaffold_hash({k: getattr(profile, k) for k in sorted(SCAFFOLD_FIELDS)})
        # The retrieval floor holds the symbol tools whatever the preset (its definition), so its
        # run is labelled by the preset it was asked under: the floor of that scaffold's models.
        asked = ran
        if run.model == "retrieval" and run.scaffold is None:
            as_none = launcher.resolve_profile(request.model_copy(update={"model": "none"}))
            asked = scaffold_hash({k: getattr(as_none, k) for k in sorted(SCAFFOLD_FIELDS)})
        row.update(
            max_steps=profile.max_steps,
            context_token_budget=profile.context_token_budget,
            total_token_budget=profile.total_token_budget,
            scaffold_hash=ran,
            scaffold=run.scaffold or _preset_named(lab, asked),
            policies=",".join(result.policies),
            model_steps=folded.action_calls if folded else None,
            forced_actions=folded.forced_actions if folded else None,
            cache_hits=sum(m.hits for m in cached),
            cache_misses=sum(m.misses for m in cached),
        )
        return row
    except Exception as exc:  # recorded, not lost: the sweep goes on
        redact = lab.redactor() if lab else Redactor()  # every configured key, too
        return {
            **base_row(run),
            "terminal_reason": "crashed",
            "status": "failed",
            "error": redact("".join(traceback.format_exception(exc))[-3000:]),
            "elapsed_s": time.time() - started,
        }


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
