"""Grids on a Dask distributed cluster, with no filesystem shared between the driver and workers.

``run_grid(grid, cluster="tcp://host:8786")`` (``run_sweep``, ``run_study``) hands the cells to
``run_on_cluster``. Each Dask task (``cluster_batch``) runs one cell, or several in a row where runs
are short (``experiments.batching``), and each cell (``cluster_task``) gets everything it needs
from the driver: the grid (its spec and any custom factory), the cell, and the configuration as
JSON (scattered once, system prompts inlined: no path of the driver's is read on a worker). The
worker runs the cell with its own directory for traces and call-cache entries, then returns the
row, the traces gzip-compressed (a parent's and its children's) and the new cache entries; the
driver writes the traces under the grid's directory, the entries into its call cache and the row
into ``results.jsonl``, so resume, the one results log and the cache work as they do on one
machine. With ``storage`` (an fsspec URL: ``file:///shared/x``, ``s3://bucket/x``) the worker
writes the compressed traces there instead and the row's ``trace_path`` is its URL. A batch comes
back as msgpack bytes of plain data, checked run by run against the run it belongs to
(``experiments.worker_result``). Dask's own transport pickles, so the cluster's processes are
trusted like the driver (docs/redteam.md, "Trust boundary of each surface"); what a run made is not.

A worker lost mid-run: the scheduler runs its tasks again on another worker; every task start is
logged as a Dask event, so the row of a run that started more than once says ``retried`` (and
``attempts``). At most ``window`` tasks are in flight, so the driver's memory does not grow with the
number of runs. Models with ``endpoints`` share cluster-wide concurrency limits (a
``distributed.Semaphore`` per endpoint).
"""

from __future__ import annotations

import contextlib
import gzip
import hashlib
import json
import os
import shutil
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from subagent_lab.config.endpoints import ModelConfig
from subagent_lab.config.parsed import parsed_config
from subagent_lab.config.profiles import LabConfig, load_config
from subagent_lab.core.model import Model
from subagent_lab.core.types import ModelChoice
from subagent_lab.experiments.batching import Batcher
from subagent_lab.experiments.grid_types import Grid, GridCell, Row
from subagent_lab.experiments.worker_result import (
    WorkerResultError,
    _write_trace,
    accept_result,
    decode_batch,
    encode_batch,
    failed_row,
    lab_namespaces,
)
from subagent_lab.local_models.factory import default_model_factory
from subagent_lab.local_models.namespace import config_namespace
from subagent_lab.models.cache import CachingModel, entry_path
from subagent_lab.models.pool import pooled_factory

__all__ = [  # the driver's checks are re-exported: the red-team tests reach them through this module
    "START_TOPIC", "WorkerResultError", "_write_trace", "accept_result", "cluster_batch", "cluster_limiter",
    "cluster_task", "dask_setup", "decode_batch", "encode_batch", "failed_row", "run_on_cluster",
]  # fmt: skip

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
    grid: Grid[Any], cell: GridCell, config_json: str, storage: str | None, driver: str = ""
) -> dict[str, Any]:
    """Run one cell of ``grid`` on a worker; return its row, its compressed traces and new cache
    entries (``worker_result.accept_result`` reads them).

    ``driver``: the submitting driver's token, in the start event (several grids may share a cluster).
    """
    worker = ""
    try:
        from distributed import get_worker

        me = get_worker()
        worker = me.address
        me.log_event(START_TOPIC, {"run_key": cell.run_key, "worker": worker, "driver": driver})
    except (ImportError, ValueError):
        pass  # not on a Dask worker (called directly): nothing to log
    home = _worker_dir()
    config_path = _config_file(config_json, home)
    lab = parsed_config(config_path)  # once per worker: the file is named by its content
    if grid.model_factory is None and not _LIMITER and worker:
        _LIMITER.append(cluster_limiter())
    limiter = _LIMITER[0] if _LIMITER else None
    inner = grid.model_factory or pooled_factory(
        lab, default_model_factory(lab), limiter=limiter, share_adapters=True
    )
    cached: list[CachingModel] = []
    cache_dir = home / "model-cache"

    def make(choice: ModelChoice, cfg: ModelConfig) -> Model:
        model = inner(choice, cfg)
        if cell.cache_dir is None:
            return model
        wrapped = CachingModel(model, cache_dir, namespace=config_namespace(lab, cfg), keep_requests=True)
        cached.append(wrapped)
        return wrapped

    scratch = home / "traces" / uuid.uuid4().hex
    local = cell.model_copy(
        update={"trace_dir": str(scratch), "cache_dir": None, "config_path": str(config_path)}
    )
    try:
        row = grid.execute(local, make)
        row.update(cache_hits=sum(m.hits for m in cached), cache_misses=sum(m.misses for m in cached))
        main, traces, raw_size = _take_traces(row, scratch, cell.trace_dir)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    blob = traces.get(main) if main else None
    row.update(worker=worker, trace_bytes=raw_size, trace_bytes_compressed=len(blob) if blob else 0)
    sent: dict[str, bytes | None] = dict(traces)
    if storage:  # the traces go there; the driver gets their names (None: stored)
        import fsspec

        for rel, gz in traces.items():
            with fsspec.open(f"{storage.rstrip('/')}/traces/{rel}.gz", "wb", auto_mkdir=True) as fh:
                fh.write(gz)
        sent = dict.fromkeys(traces)
        if main:
            row["trace_path"] = f"{storage.rstrip('/')}/traces/{main}.gz"
    entries = {
        key: {
            "request": (m.requests or {})[key],
            "response": entry_path(cache_dir, key).read_text(encoding="utf-8"),
        }
        for m in cached
        for key in m.written
    }
    others = {rel: gz for rel, gz in sent.items() if rel != main}
    plain = json.loads(json.dumps(row, default=str))  # the row as results.jsonl holds it: plain data
    return {"row": plain, "trace_rel": main, "trace_gz": sent.get(main) if main else None,
            "traces": others, "cache": entries}  # fmt: skip


def cluster_batch(
    grid: Grid[Any], cells: list[GridCell], config_json: str, storage: str | None, driver: str = ""
) -> bytes:
    """Run ``cells`` one after another on a worker (one Dask task) and return, as msgpack bytes
    (``worker_result.encode_batch``: plain data, which the driver decodes without unpickling):
    ``outs``, each cell's ``cluster_task`` result (or ``{"error": ...}`` where it raised), and
    ``seconds``, the batch's wall time here (which sizes the next batches)."""
    started = time.perf_counter()
    outs: list[dict[str, Any]] = []
    for cell in cells:
        try:
            outs.append(cluster_task(grid, cell, config_json, storage, driver))
        except Exception as exc:  # this cell's failure, not its batch's
            outs.append({"error": f"{type(exc).__name__}: {exc}"})
    return encode_batch(outs, time.perf_counter() - started)


def _take_traces(row: Row, scratch: Path, driver_dir: str) -> tuple[str | None, dict[str, bytes], int]:
    """The name of the row's own trace below ``scratch`` (None: there is none), every trace the
    run wrote there (name -> gzip bytes) and the row's own raw size. A parent's trace names its
    children's by path: the scratch directory in every trace, and in the row's ``child_traces``,
    becomes the driver's trace directory."""
    own = Path(row["trace_path"]) if row.get("trace_path") else None
    files = sorted(scratch.rglob("*.jsonl"))
    mine, theirs = json.dumps(str(scratch))[1:-1].encode(), json.dumps(driver_dir)[1:-1].encode()
    traces: dict[str, bytes] = {}
    size = 0
    for path in files:
        raw = path.read_bytes().replace(mine, theirs)
        size = len(raw) if path == own else size
        traces[path.relative_to(scratch).as_posix()] = gzip.compress(raw, compresslevel=6)
    if row.get("child_traces"):
        row["child_traces"] = str(row["child_traces"]).replace(str(scratch), driver_dir)
    main = own.relative_to(scratch).as_posix() if own is not None and own in files else None
    return main, traces, size


def run_on_cluster(
    grid: Grid[Any],
    cells: list[Any],
    address: str,
    *,
    lab: LabConfig,
    on_row: Callable[[Row], None],
    storage: str | None = None,
    window: int | None = None,
) -> int:
    """Run ``grid``'s ``cells`` on the Dask scheduler at ``address``; ``on_row`` gets each finished
    row. Returns the number of Dask tasks the runs took (``experiments.batching``)."""
    from distributed import Client, as_completed

    with Client(address, set_as_default=False) as client:
        starts: dict[str, list[str]] = {}
        lock = threading.Lock()

        token = uuid.uuid4().hex

        def started(event: tuple[float, dict[str, Any]]) -> None:
            msg = event[1]
            if msg.get("driver") != token:
                return  # another grid's run on the same cluster
            with lock:
                starts.setdefault(str(msg.get("run_key")), []).append(str(msg.get("worker")))

        client.subscribe_topic(START_TOPIC, started)
        config = client.scatter(lab.model_dump_json(), broadcast=True, hash=True)
        shipped = client.scatter(grid, broadcast=True, hash=False)  # once, not with every cell
        threads = sum(client.nthreads().values())
        slots = window or max(2 * threads, 4)
        pending: dict[str, list[GridCell]] = {}
        namespaces = lab_namespaces(lab)  # the workers' configuration is this one, shipped
        todo, batcher, tasks = deque(cells), Batcher(threads), 0

        def submit() -> Any:
            nonlocal tasks
            batch = [todo.popleft() for _ in range(min(batcher.size(len(todo)), len(todo)))]
            key = f"subagent-lab-run-{uuid.uuid4().hex}"
            pending[key], tasks = batch, tasks + 1
            return client.submit(cluster_batch, shipped, batch, config, storage, token, key=key, pure=False)

        done = as_completed([submit() for _ in range(min(slots, len(todo)))], loop=client.loop)
        for future in done:
            batch = pending.pop(future.key)
            rows = _batch_rows(grid, batch, future, storage, batcher, namespaces)
            # The scheduler counts workers that died while running the task; the start events
            # also catch a start the scheduler gave up on. Either way the run started again.
            lost = _lost_workers(client, future.key)
            future.release()
            with lock:
                workers = [starts.pop(run.run_key, []) for run in batch]
            for row, attempts in zip(rows, _attempts(rows, workers, lost), strict=True):
                row.update(attempts=attempts, retried=attempts > 1)
                on_row(row)
            if todo:
                done.add(submit())
        with contextlib.suppress(Exception):
            client.unsubscribe_topic(START_TOPIC)
    return tasks


def _batch_rows(
    grid: Grid[Any],
    batch: list[GridCell],
    future: Any,
    storage: str | None,
    batcher: Batcher,
    namespaces: frozenset[str] | None = None,
) -> list[Row]:
    """Each run's row from a finished task: accepted from what the worker returned, or a failed
    row (the task's workers kept dying, or it returned something malformed). ``namespaces``: the
    configuration's cache namespaces (None: each run's own, ``namespaces_of``)."""
    try:
        result = future.result()
    except Exception as exc:  # KilledWorker, or the task was lost
        return [failed_row(run, f"{type(exc).__name__}: {exc}", grid.identity) for run in batch]
    try:
        outs, seconds = decode_batch(result, len(batch))
    except WorkerResultError as exc:
        return [failed_row(run, f"malformed worker result: {exc}", grid.identity) for run in batch]
    batcher.observe(len(batch), seconds)
    rows = []
    for run, out in zip(batch, outs, strict=True):
        if isinstance(out, dict) and "error" in out:
            rows.append(failed_row(run, str(out["error"]), grid.identity))
            continue
        try:
            rows.append(accept_result(run, out, storage, grid.identity, namespaces))
        except (WorkerResultError, OSError) as exc:
            rows.append(failed_row(run, f"malformed worker result: {exc}", grid.identity))
    return rows


def _attempts(rows: list[Row], starts: list[list[str]], lost: int) -> list[int]:
    """How many times each run of a task started: its start events, and the workers the scheduler
    saw die running the task (``lost``), whose last start event may not have arrived. A task of one
    run counts each lost worker as a start of it. A task of several runs them in order, so a lost
    worker had started a prefix of them: the first run with no start on record but on the worker
    that finished it counts the lost workers too. That can say ``retried`` of one run per lost
    worker that had not started there (the worker died between two runs, or after all its start
    events arrived); it does not miss a restarted run unless two of its start events were lost.
    """
    if len(rows) == 1:
        return [max(len(starts[0]), lost + 1)]
    counts = [max(len(s), 1) for s in starts]
    if lost:
        finals = [str(row.get("worker", "")) for row in rows]
        cut = next((i for i, s in enumerate(starts) if all(w == finals[i] for w in s)), None)
        if cut is not None:
            counts[cut] = max(counts[cut], lost + 1)
    return counts


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

    The configuration is ``$SUBAGENT_LAB_CONFIG`` (else the working directory's ``profiles.yaml``,
    else the packaged one) on the worker's machine; a failure is logged, and each run then reports
    it as a model error.
    """
    from subagent_lab.local_models.server import ensure_server

    try:
        ensure_server(load_config(), stop_at_exit=True)
    except Exception as exc:  # the worker still starts; its runs say what went wrong
        worker.log_event("subagent-lab-server", {"error": f"{type(exc).__name__}: {exc}"})
