"""Sweeps: tasks x models x profile variants x repeats, one persisted row per run.

A sweep directory is keyed by its spec. Rows are appended to ``results.jsonl`` as runs finish
(one flushed line each), so a killed sweep loses only the runs in flight; running the same spec
again skips finished runs. Any ``concurrent.futures.Executor`` runs the grid, a Dask client's
``get_executor()`` included: the unit of work is the picklable ``RunSpec`` and the top-level
function ``execute_run``.

Repeats are independent: repeat ``i`` of a cell runs with seed ``SweepSpec.seed + i`` (a ``seed``
column in every row), so its requests, and their call-cache keys, differ from every other
repeat's. With temperature 0 (the shipped models) llama.cpp decodes greedily and a different seed
gives the same output: the repeats are then independent requests but deterministic runs, and their
spread is zero. Set ``SweepSpec.temperature`` above 0 to sample.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import threading
import time
import traceback
from collections.abc import Callable, Iterable
from concurrent.futures import Executor, Future, ThreadPoolExecutor, as_completed
from pathlib import Path
from typing import Any

import pandas as pd
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from subagent_lab.agents.launcher import ModelFactory, SubagentLauncher, SubagentRequest
from subagent_lab.bench.scoring import context_from_trace, score_run
from subagent_lab.bench.suite import BenchTask, load_suite
from subagent_lab.config.profiles import LabConfig, ModelConfig, RuntimeProfile, load_config
from subagent_lab.core.model import Model
from subagent_lab.core.trace import Redactor
from subagent_lab.core.types import ConfigError, ModelChoice
from subagent_lab.experiments.provenance import Provenance, Seeding, derive_seed, provenance, row_stamp
from subagent_lab.local_models import factory as local_factory
from subagent_lab.models.cache import CachingModel, config_namespace
from subagent_lab.models.pool import pooled_factory

TOOLS = ("Read", "Grep", "Glob")
SCORE_COLUMNS = (
    "evidence_count", "evidence_unique", "unseen_evidence", "evidence_precision_file",
    "evidence_precision_line", "gold_recall_file", "gold_recall_line", "strict_line_precision",
    "strict_line_recall", "gold_line_share", "keyword_recall", "keywords_in_task", "keywords_listed",
    "admits_absence", "absence_restated", "invented_evidence", "trace_checked", "quality",
    "quality_legacy",
)  # fmt: skip
"""The score's columns in a row (docs/numbers.md); list-valued ones as their counts."""
OUTCOMES = ("executed", "repeated", "denied", "failed")


class Variant(BaseModel):
    """A labelled set of profile overrides (e.g. a budget setting)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    label: str = "default"
    overrides: dict[str, Any] = Field(default_factory=dict)


class SweepSpec(BaseModel):
    """The grid. Tasks are suite task ids, or the selectors ``smoke``, ``all`` or a task kind."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = "sweep"
    split: str = "dev"
    """The suite split the tasks are chosen from (``bench.suite.load_suite``)."""
    tasks: tuple[str, ...] = ("smoke",)
    models: tuple[ModelChoice, ...] = ("light", "main")
    profile: str = "explore"
    variants: tuple[Variant, ...] = (Variant(),)
    scaffolds: tuple[str, ...] = ()
    """Scaffold presets (``profiles.yaml: scaffolds``, ``plain`` built in), one grid axis: each run
    applies its preset's every field, then its variant's overrides. Empty: the profile as written."""
    repeats: int = Field(default=1, ge=1)
    seed: int = 0
    """Base seed of the sweep; each run's seed is derived from it (see ``seeding``)."""
    seeding: Seeding = "derived"
    """``derived``: repeat ``i`` of a (task, model) runs with ``derive_seed(seed, task, model, i)``;
    ``base``: with ``seed + i`` for every task (the old scheme, which a call cache may hold)."""
    temperature: float | None = Field(default=None, ge=0.0, le=2.0)
    """Sampling temperature of every run; None keeps each model's. Above 0, repeats sample."""

    def key(self) -> str:
        """A short hash identifying the spec (its directory name)."""
        return hashlib.sha256(self.model_dump_json().encode()).hexdigest()[:10]


class RunSpec(BaseModel):
    """One cell of the grid; everything a worker (thread, process, Dask node) needs."""

    run_key: str
    task: BenchTask
    model: ModelChoice
    profile: str
    variant: Variant
    scaffold: str | None = None
    """The preset applied under the variant's overrides (None: the profile as written)."""
    scaffold_fields: dict[str, Any] = Field(default_factory=dict)
    """The preset's resolved fields (empty without a preset)."""
    repeat: int
    seed: int = 0
    """Sent with every model call of the run; distinct per repeat."""
    temperature: float | None = None
    """None: the model's own."""
    config_path: str | None
    trace_dir: str
    cache_dir: str | None
    stamp: dict[str, Any] = Field(default_factory=dict)
    """The sweep's provenance columns (``provenance.row_stamp``)."""


def select_tasks(selectors: Iterable[str], suite: list[BenchTask] | None = None) -> list[BenchTask]:
    """Resolve ids and selectors (``smoke``, ``all``, a kind) to tasks, in suite order."""
    suite = suite if suite is not None else load_suite()
    wanted = set(selectors)
    known = {t.id for t in suite} | {"smoke", "all"} | {t.kind for t in suite}
    unknown = sorted(wanted - known)
    if unknown:
        raise ValueError(
            f"unknown task ids or selectors {unknown}; use ids from the suite, 'smoke', 'all' or a kind"
        )
    return [
        t
        for t in suite
        if "all" in wanted or t.id in wanted or t.kind in wanted or ("smoke" in wanted and t.smoke)
    ]


def spec_tasks(spec: SweepSpec) -> list[BenchTask]:
    """The tasks of a sweep: its selectors over its split."""
    return select_tasks(spec.tasks, load_suite(split=spec.split))


def plan_runs(
    spec: SweepSpec, *, config_path: str | None, out: Path, cache: bool, lab: LabConfig | None = None
) -> list[RunSpec]:
    """Every run of the grid, in a deterministic order, grouped by model.

    The embedded server holds one model at a time: grouping by model avoids reloading weights and
    losing the prompt cache between neighbouring runs.
    """
    lab = lab or load_config(config_path)
    tasks = spec_tasks(spec)
    stamps = {m: row_stamp(provenance(lab, tasks, spec.models), m) for m in spec.models}
    presets = {name: lab.scaffold(name).resolved() for name in spec.scaffolds}
    scaffolds: list[str | None] = list(spec.scaffolds) or [None]
    return [
        RunSpec(
            run_key="|".join([task.id, model, *([scaffold] if scaffold else []), variant.label, str(repeat)]),
            task=task,
            model=model,
            profile=spec.profile,
            variant=variant,
            scaffold=scaffold,
            scaffold_fields=presets.get(scaffold, {}) if scaffold else {},
            repeat=repeat,
            seed=(
                derive_seed(spec.seed, task.id, model, repeat)
                if spec.seeding == "derived"
                else spec.seed + repeat
            ),
            temperature=spec.temperature,
            config_path=config_path,
            trace_dir=str(out / "traces"),
            cache_dir=str(out.parent / "model-cache") if cache else None,
            stamp=stamps[model],
        )
        for model in spec.models
        for task in tasks
        for scaffold in scaffolds
        for variant in spec.variants
        for repeat in range(spec.repeats)
    ]


def _caching_factory(
    inner: ModelFactory, lab: LabConfig, cache_dir: str, models: list[CachingModel]
) -> ModelFactory:
    def make(choice: ModelChoice, cfg: ModelConfig) -> Model:
        model = CachingModel(inner(choice, cfg), cache_dir, namespace=config_namespace(lab, cfg))
        models.append(model)
        return model

    return make


def execute_run(run: RunSpec, model_factory: ModelFactory | None = None) -> dict[str, Any]:
    """Run one cell and return its row. Never raises: a crash becomes a row with the traceback."""
    started = time.time()
    lab: LabConfig | None = None
    try:
        lab = load_config(run.config_path)
        # A model with several ``endpoints`` is served by an endpoint pool; others as before.
        factory = model_factory or pooled_factory(lab, local_factory.default_model_factory(lab))
        cached: list[CachingModel] = []
        if run.cache_dir:
            factory = _caching_factory(factory, lab, run.cache_dir, cached)
        root = run.task.workspace_root()
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
        score = score_run(run.task, result.contract, root, context=context)
        row = result_row(run, result.model_dump(mode="json"), score.model_dump(mode="json"))
        row.update(
            max_steps=profile.max_steps,
            context_token_budget=profile.context_token_budget,
            total_token_budget=profile.total_token_budget,
            cache_hits=sum(m.hits for m in cached),
            cache_misses=sum(m.misses for m in cached),
        )
        return row
    except Exception as exc:  # recorded, not lost: the sweep goes on
        redact = lab.redactor() if lab else Redactor()  # every configured key, too
        return {
            **_base_row(run),
            "terminal_reason": "crashed",
            "status": "failed",
            "error": redact("".join(traceback.format_exception(exc))[-3000:]),
            "elapsed_s": time.time() - started,
        }


def _base_row(run: RunSpec) -> dict[str, Any]:
    return {
        "run_key": run.run_key,
        "task_id": run.task.id,
        "kind": run.task.kind,
        "package": run.task.package,
        "split": run.task.split,
        "profile": run.profile,
        "model_choice": run.model,
        "variant": run.variant.label,
        "overrides": json.dumps(run.variant.overrides, sort_keys=True),
        "scaffold": run.scaffold or "profile",
        **run.stamp,
        "repeat": run.repeat,
        "seed": run.seed,
        "temperature": run.temperature,
    }


def result_row(run: RunSpec, result: dict[str, Any], score: dict[str, Any]) -> dict[str, Any]:
    """Flatten a SubagentResult (as a dict) and its Score into one table row."""
    usage = result["usage"]
    row = {
        **_base_row(run),
        "model_used": result["model_used"],
        "model_id": result["model_id"],
        "seed": result["seed"],
        "temperature": result["temperature"],
        "fallback": result["fallback"],
        "terminal_reason": result["terminal_reason"],
        "status": result["status"],
        "detail": result["detail"][-800:],
        "steps": result["steps"],
        "model_calls": result["model_calls"],
        "prompt_tokens": usage["prompt_tokens"],
        "completion_tokens": usage["completion_tokens"],
        "cached_tokens": usage["cached_tokens"],
        "total_tokens": usage["prompt_tokens"] + usage["completion_tokens"],
        "usage_estimated": usage["estimated"],
        "cost_usd": result["cost_usd"],
        "elapsed_s": result["elapsed_s"],
        "model_time_s": result["model_time_s"],
        "harness_time_s": max(result["elapsed_s"] - result["model_time_s"], 0.0),
        "contract_valid": result["contract"] is not None,
        "repairs_used": result["repairs_used"],
        "grace_used": result["grace_used"],
        "grounded_ratio": result["grounded_ratio"],
        "seen_ratio": result["seen_ratio"],
        "prompt_counts_exact": result["prompt_counts_exact"],
        "trace_path": result["trace_path"],
        "error": None,
    }
    for tool in TOOLS:
        for outcome in OUTCOMES:
            row[f"{tool}_{outcome}"] = result["tool_usage"].get(tool, {}).get(outcome, 0)
    for key in SCORE_COLUMNS:
        value = score.get(key)
        row[key] = len(value) if isinstance(value, list) else value  # a list column: its count
    return row


class _ResultLog:
    """Append-only results.jsonl with one flushed, fsynced line per finished run."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()

    def rows(self) -> list[dict[str, Any]]:
        if not self.path.exists():
            return []
        rows = []
        for line in self.path.read_text(encoding="utf-8").splitlines():
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError:
                continue  # a torn last line from a killed sweep; that run is simply redone
        return rows

    def append(self, row: dict[str, Any]) -> None:
        with self._lock, self.path.open("a+", encoding="utf-8") as fh:
            # A sweep killed mid-write leaves a torn line without its newline: never glue onto it.
            if fh.tell() > 0:
                fh.seek(fh.tell() - 1)
                torn = fh.read(1) != "\n"
                fh.seek(0, os.SEEK_END)
                if torn:
                    fh.write("\n")
            fh.write(json.dumps(row, default=str) + "\n")
            fh.flush()
            os.fsync(fh.fileno())


def sweep_dir(spec: SweepSpec, out_dir: str | Path | None = None, lab: LabConfig | None = None) -> Path:
    """``<out_dir>/<name>-<grid hash>``, or ``...-<provenance hash>`` when that directory holds rows
    of another code, config, prompt, task or weights version (``experiments.provenance``)."""
    lab = lab or load_config()
    base = Path(out_dir) if out_dir else lab.trace_root() / "sweeps"
    plain = base / f"{spec.name}-{spec.key()}"
    old = _recorded_provenance(plain)
    if old is None:
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
    out = sweep_dir(spec, out_dir, lab)
    out.mkdir(parents=True, exist_ok=True)
    (out / "spec.json").write_text(spec.model_dump_json(indent=2))
    _note_provenance(spec, out, lab)
    log = _ResultLog(out / "results.jsonl")
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


def load_results(out: str | Path) -> pd.DataFrame:
    """The table of a sweep directory (latest row per run key), readable in a fresh kernel."""
    rows = _ResultLog(Path(out) / "results.jsonl").rows()
    latest = {row["run_key"]: row for row in rows}
    return pd.DataFrame(list(latest.values()))


def _check_variants(spec: SweepSpec, lab: LabConfig) -> None:
    """Validate every variant's overrides before any run starts (a ConfigError names the variant)."""
    base = lab.profile(spec.profile)
    presets = {name: lab.scaffold(name).resolved() for name in spec.scaffolds} or {"": {}}
    for variant in spec.variants:
        for name, fields in presets.items():
            where = f"variant {variant.label!r}" + (f" on scaffold {name!r}" if name else "")
            try:
                profile = RuntimeProfile.model_validate({**base.model_dump(), **fields, **variant.overrides})
            except ValidationError as exc:
                problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
                raise ConfigError(f"{where} of sweep {spec.name!r}: {problems}") from None
            for choice in spec.models:
                lab.check_grammar_aids(profile.model_dump(), choice, f"{where} of sweep {spec.name!r}")


def _start_embedded_server(lab: LabConfig, choices: set[ModelChoice]) -> None:
    """Start the local server once, up front, rather than racing to start it from workers."""
    if any(lab.resolve_model(choice)[1].base_url is None for choice in choices - {"none"}):
        from subagent_lab.local_models.server import ensure_server

        # On failure each run reports it as a model_error with the URL and the log path.
        with contextlib.suppress(Exception):
            ensure_server(lab)


def _progress(*, total: int, initial: int, enabled: bool) -> Any:
    if not enabled:
        return None
    from tqdm.auto import tqdm

    return tqdm(total=total, initial=initial, desc="runs", unit="run")
