"""Sweeps on a Dask distributed cluster, with no filesystem shared between the driver and workers.

``run_sweep(spec, cluster="tcp://host:8786")`` hands the runs to ``run_on_cluster``. Each run is
one Dask task (``cluster_task``) that gets everything it needs from the driver: the run, and the
configuration as JSON (scattered once, system prompts inlined: no path of the driver's is read on
a worker). The worker writes the run's trace and call-cache entries in its own directory, then
returns the row, the trace gzip-compressed and the new cache entries; the driver writes the trace
under the sweep directory, the entries into its call cache and the row into ``results.jsonl``,
so resume, the one results log and the cache work as they do on one machine. With ``storage``
(an fsspec URL: ``file:///shared/x``, ``s3://bucket/x``) the worker writes the compressed trace
there instead and the row's ``trace_path`` is its URL.

The driver trusts nothing a worker returns (``accept_result``): the trace's name is checked
(a session directory and a file name, each one path component of a fixed alphabet), its size is
capped while it is decompressed, cache keys must be SHA-256 hex and entries valid responses, the
row's identity columns come from the driver's own run, and a storage URL is rebuilt by the driver.
A result that fails any check is a failed run whose ``error`` says why; nothing is written.

A worker lost mid-run: the scheduler runs its tasks again on another worker; every task start is
logged as a Dask event, so the row of a run that started more than once says ``retried`` (and
``attempts``). At most ``window`` runs are in flight, so the driver's memory does not grow with the
number of runs. Models with ``endpoints`` share cluster-wide concurrency limits (a
``distributed.Semaphore`` per endpoint).
"""

from __future__ import annotations

import contextlib
import gzip
import hashlib
import json
import os
import re
import shutil
import threading
import uuid
import zlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from itertools import islice
from pathlib import Path
from typing import Any

from subagent_lab.agents.launcher import ModelFactory
from subagent_lab.config.parsed import parsed_config
from subagent_lab.config.profiles import LabConfig, ModelConfig, load_config
from subagent_lab.core.model import Model
from subagent_lab.core.types import ModelChoice, ModelResponse
from subagent_lab.experiments.execute import execute_run
from subagent_lab.experiments.rows import base_row
from subagent_lab.experiments.spec import RunSpec
from subagent_lab.local_models.factory import default_model_factory
from subagent_lab.local_models.namespace import config_namespace
from subagent_lab.models.cache import CachingModel, entry_path, store_entry
from subagent_lab.models.pool import pooled_factory

START_TOPIC = "subagent-lab-run-started"
"""The Dask event topic every task start is logged under (``{"run_key", "worker"}``)."""


def cluster_limiter() -> Callable[[str, int], contextlib.AbstractContextManager[bool]]:
    """A pool limiter whose slots are cluster-wide: one ``distributed.Semaphore`` per endpoint."""
    from distributed import Semaphore

    semaphores: dict[str, Any] = {}
    lock = threading.Lock()

    @contextmanager
    def slot(name: str, limit: int) -> Iterator[bool]:
        with lock:
            sem = semaphores.get(name)
            if sem is None:
                digest = hashlib.sha256(name.encode()).hexdigest()[:12]
                sem = semaphores[name] = Semaphore(max_leases=limit, name=f"subagent-lab-endpoint-{digest}")
        got = bool(sem.acquire(timeout=600))
        try:
            yield got
        finally:
            if got:
                sem.release()

    return slot


_LIMITER: list[Callable[[str, int], contextlib.AbstractContextManager[bool]]] = []


def _worker_dir() -> Path:
    """This worker's own directory (Dask's ``local_directory``; the cwd outside a worker)."""
    try:
        from distributed import get_worker

        base = Path(get_worker().local_directory)
    except (ImportError, ValueError):
        base = Path.cwd()
    return base / "subagent-lab"


def _config_file(config_json: str, where: Path) -> Path:
    """The shipped configuration as a file of this worker's (JSON is YAML: ``load_config`` reads it)."""
    digest = hashlib.sha256(config_json.encode()).hexdigest()[:16]
    path = where / f"config-{digest}.json"
    if not path.exists():
        where.mkdir(parents=True, exist_ok=True)
        tmp = where / f".{path.name}.{uuid.uuid4().hex}"
        tmp.write_text(config_json, encoding="utf-8")
        os.replace(tmp, path)
    return path


def cluster_task(
    run: RunSpec,
    config_json: str,
    model_factory: ModelFactory | None,
    storage: str | None,
    driver: str = "",
) -> dict[str, Any]:
    """Run one sweep run on a worker; return its row, its compressed trace and new cache entries.

    ``driver``: the submitting driver's token, in the start event (several sweeps may share a cluster).
    """
    worker = ""
    try:
        from distributed import get_worker

        me = get_worker()
        worker = me.address
        me.log_event(START_TOPIC, {"run_key": run.run_key, "worker": worker, "driver": driver})
    except (ImportError, ValueError):
        pass  # not on a Dask worker (called directly): nothing to log
    home = _worker_dir()
    config_path = _config_file(config_json, home)
    lab = parsed_config(config_path)  # once per worker: the file is named by its content
    if model_factory is None and not _LIMITER and worker:
        _LIMITER.append(cluster_limiter())
    limiter = _LIMITER[0] if _LIMITER else None
    inner = model_factory or pooled_factory(
        lab, default_model_factory(lab), limiter=limiter, share_adapters=True
    )
    cached: list[CachingModel] = []
    cache_dir = home / "model-cache"

    def make(choice: ModelChoice, cfg: ModelConfig) -> Model:
        model = inner(choice, cfg)
        if run.cache_dir is None:
            return model
        wrapped = CachingModel(model, cache_dir, namespace=config_namespace(lab, cfg))
        cached.append(wrapped)
        return wrapped

    scratch = home / "traces" / uuid.uuid4().hex
    local = run.model_copy(
        update={"trace_dir": str(scratch), "cache_dir": None, "config_path": str(config_path)}
    )
    try:
        row = execute_run(local, make)
        row.update(cache_hits=sum(m.hits for m in cached), cache_misses=sum(m.misses for m in cached))
        trace_rel, blob, raw_size = _take_trace(row, scratch)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    row.update(worker=worker, trace_bytes=raw_size, trace_bytes_compressed=len(blob) if blob else 0)
    if storage and trace_rel and blob is not None:
        import fsspec

        url = f"{storage.rstrip('/')}/traces/{trace_rel}.gz"
        with fsspec.open(url, "wb", auto_mkdir=True) as fh:
            fh.write(blob)
        row["trace_path"], blob = url, None
    entries = {
        key: entry_path(cache_dir, key).read_text(encoding="utf-8") for m in cached for key in m.written
    }
    return {"row": row, "trace_rel": trace_rel, "trace_gz": blob, "cache": entries}


def _take_trace(row: dict[str, Any], scratch: Path) -> tuple[str | None, bytes | None, int]:
    """(path below the scratch dir, gzip bytes, raw size) of the run's trace; Nones when there is none."""
    path = Path(row["trace_path"]) if row.get("trace_path") else None
    if path is None or not path.is_file():
        return None, None, 0
    raw = path.read_bytes()
    return path.relative_to(scratch).as_posix(), gzip.compress(raw, compresslevel=6), len(raw)


MAX_TRACE_BYTES = 64 * 1024 * 1024
"""A returned trace larger than this, decompressed, is refused (a 64 KB gzip bomb is 64 MB)."""
MAX_ROW_BYTES = 1024 * 1024
"""A returned row larger than this as JSON is refused."""
MAX_CACHE_ENTRIES = 4096
MAX_CACHE_ENTRY_BYTES = 8 * 1024 * 1024
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,199}")
"""One path component, of a fixed alphabet, never ``.`` or ``..`` (it cannot start with a dot)."""
_CACHE_KEY = re.compile(r"[0-9a-f]{64}")


class WorkerResultError(ValueError):
    """What a worker returned cannot be accepted; the message says why."""


def _trace_rel(value: object) -> str | None:
    """A returned trace name: ``<session>/<file>.jsonl`` (or ``<file>.jsonl``), each part one
    component of ``_NAME``'s alphabet; None for no trace."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise WorkerResultError(f"trace name is a {type(value).__name__}, not text")
    parts = value.split("/")
    if not 1 <= len(parts) <= 2 or not all(_NAME.fullmatch(p) for p in parts) or not value.endswith(".jsonl"):
        raise WorkerResultError(f"trace name {value[:200]!r} is not '<session>/<name>.jsonl'")
    return value


def _inflate(blob: object, limit: int = MAX_TRACE_BYTES) -> bytes:
    """A returned gzip trace, decompressed, refused past ``limit`` bytes (checked as it inflates)."""
    if not isinstance(blob, bytes):
        raise WorkerResultError(f"trace is a {type(blob).__name__}, not bytes")
    inflater = zlib.decompressobj(wbits=31)  # gzip framing
    try:
        raw = inflater.decompress(blob, limit + 1)
    except zlib.error as exc:
        raise WorkerResultError(f"trace is not gzip data: {exc}") from None
    if len(raw) > limit or inflater.unconsumed_tail:
        raise WorkerResultError(f"trace is over {limit:,} bytes decompressed")
    return raw


def _write_trace(run: RunSpec, rel: str, raw: bytes) -> Path:
    """Write a returned trace (decompressed: every reader takes plain JSONL) under the sweep."""
    root = Path(run.trace_dir)
    dest = root / rel
    if not dest.resolve().is_relative_to(root.resolve()):  # a session directory that is a link
        raise WorkerResultError(f"trace name {rel!r} leads outside the sweep directory")
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_name(f".{dest.name}.{uuid.uuid4().hex}")
    tmp.write_bytes(raw)
    os.replace(tmp, dest)
    return dest


def _cache_entries(value: object) -> dict[str, str]:
    """Returned cache entries: SHA-256 hex keys, valid responses of bounded size."""
    if not isinstance(value, dict) or len(value) > MAX_CACHE_ENTRIES:
        raise WorkerResultError(f"cache entries are not a mapping of at most {MAX_CACHE_ENTRIES} items")
    for key, text in value.items():
        if not isinstance(key, str) or not _CACHE_KEY.fullmatch(key):
            raise WorkerResultError(f"cache key {str(key)[:200]!r} is not a SHA-256 hex digest")
        if not isinstance(text, str) or len(text) > MAX_CACHE_ENTRY_BYTES:
            raise WorkerResultError(
                f"cache entry {key} is not text of at most {MAX_CACHE_ENTRY_BYTES:,} bytes"
            )
        try:
            ModelResponse.model_validate_json(text)
        except ValueError:
            raise WorkerResultError(f"cache entry {key} is not a model response") from None
    return value


def _checked_row(run: RunSpec, value: object) -> dict[str, Any]:
    """A returned row: a JSON object of bounded size; its identity columns are the driver's."""
    if not isinstance(value, dict) or not all(isinstance(k, str) for k in value):
        raise WorkerResultError(f"row is a {type(value).__name__} with non-text keys or not a mapping")
    try:
        size = len(json.dumps(value, default=str))
    except (TypeError, ValueError, RecursionError) as exc:
        raise WorkerResultError(f"row cannot be written as JSON: {type(exc).__name__}") from None
    if size > MAX_ROW_BYTES:
        raise WorkerResultError(f"row is over {MAX_ROW_BYTES:,} bytes as JSON")
    # The run's identity is the driver's: a row claiming another run_key would be resumed past.
    # seed and temperature stay the worker's (the run reports what it used).
    identity = {k: v for k, v in base_row(run).items() if k not in ("seed", "temperature")}
    return {**value, **identity}


def accept_result(run: RunSpec, out: object, storage: str | None = None) -> dict[str, Any]:
    """Check what ``cluster_task`` returned for ``run``, write its trace and cache entries under
    the driver's own directories, and return its row; raises ``WorkerResultError`` (nothing
    written) when any part is malformed."""
    if not isinstance(out, dict):
        raise WorkerResultError(f"result is a {type(out).__name__}, not a mapping")
    row = _checked_row(run, out.get("row"))
    rel = _trace_rel(out.get("trace_rel"))
    blob = out.get("trace_gz")
    raw = _inflate(blob) if rel is not None and blob is not None else None
    entries = _cache_entries(out.get("cache", {})) if run.cache_dir else {}
    if rel is not None and raw is not None:
        row["trace_path"] = str(_write_trace(run, rel, raw))
    elif storage and rel is not None:
        row["trace_path"] = f"{storage.rstrip('/')}/traces/{rel}.gz"  # where cluster_task put it
    elif "trace_path" in row:
        row["trace_path"] = None  # a worker's own path means nothing here
    if run.cache_dir:
        for key, text in entries.items():
            if not entry_path(run.cache_dir, key).exists():
                store_entry(run.cache_dir, key, text)
    return row


def failed_row(run: RunSpec, error: str) -> dict[str, Any]:
    """The row of a run that produced no usable result."""
    return {
        **base_row(run),
        "terminal_reason": "crashed",
        "status": "failed",
        "error": error[:3000],
        "elapsed_s": 0.0,
    }


def run_on_cluster(
    runs: list[RunSpec],
    address: str,
    *,
    lab: LabConfig,
    model_factory: ModelFactory | None,
    on_row: Callable[[dict[str, Any]], None],
    storage: str | None = None,
    window: int | None = None,
) -> None:
    """Run ``runs`` on the Dask scheduler at ``address``; ``on_row`` gets each finished row."""
    from distributed import Client, as_completed

    with Client(address, set_as_default=False) as client:
        starts: dict[str, list[str]] = {}
        lock = threading.Lock()

        token = uuid.uuid4().hex

        def started(event: tuple[float, dict[str, Any]]) -> None:
            msg = event[1]
            if msg.get("driver") != token:
                return  # another sweep's run on the same cluster
            with lock:
                starts.setdefault(str(msg.get("run_key")), []).append(str(msg.get("worker")))

        client.subscribe_topic(START_TOPIC, started)
        config = client.scatter(lab.model_dump_json(), broadcast=True, hash=True)
        slots = window or max(2 * sum(client.nthreads().values()), 4)
        pending: dict[str, RunSpec] = {}

        def submit(run: RunSpec) -> Any:
            key = f"subagent-lab-run-{uuid.uuid4().hex}"
            pending[key] = run
            return client.submit(
                cluster_task, run, config, model_factory, storage, token, key=key, pure=False
            )

        todo = iter(runs)
        done = as_completed([submit(r) for r in islice(todo, slots)], loop=client.loop)
        for future in done:
            run = pending.pop(future.key)
            try:
                out = future.result()
            except Exception as exc:  # the task's workers kept dying (KilledWorker), or it was lost
                row = failed_row(run, f"{type(exc).__name__}: {exc}")
            else:
                try:
                    row = accept_result(run, out, storage)
                except (WorkerResultError, OSError) as exc:
                    row = failed_row(run, f"malformed worker result: {exc}")
            # The scheduler counts workers that died while running the task; the start events
            # also catch a start the scheduler gave up on. Either way the run started again.
            lost = _lost_workers(client, future.key)
            future.release()
            with lock:
                workers = starts.pop(run.run_key, [])
            attempts = max(len(workers), lost + 1)
            row.update(attempts=attempts, retried=attempts > 1)
            on_row(row)
            following = next(todo, None)
            if following is not None:
                done.add(submit(following))
        with contextlib.suppress(Exception):
            client.unsubscribe_topic(START_TOPIC)


def _suspicious(dask_scheduler: Any, key: str) -> int:
    task = dask_scheduler.tasks.get(key)
    return int(task.suspicious) if task is not None else 0


def _lost_workers(client: Any, key: str) -> int:
    """How many workers died while running task ``key`` (0 when the scheduler cannot say)."""
    try:
        return int(client.run_on_scheduler(_suspicious, key=key))
    except Exception:  # an old scheduler, a closed connection: the start events still count
        return 0


def dask_setup(worker: Any) -> None:
    """``dask worker --preload subagent_lab.experiments.cluster``: start this machine's embedded
    server when the worker starts (one per machine; CPU-only fleets), not on its first run.

    The configuration is ``$SUBAGENT_LAB_CONFIG`` (or the repository's ``profiles.yaml``) on the
    worker's machine; a failure is logged, and each run then reports it as a model error.
    """
    from subagent_lab.local_models.server import ensure_server

    try:
        ensure_server(load_config(), stop_at_exit=True)
    except Exception as exc:  # the worker still starts; its runs say what went wrong
        worker.log_event("subagent-lab-server", {"error": f"{type(exc).__name__}: {exc}"})
