"""What the driver accepts of a cluster worker's result (``experiments.cluster``): it trusts nothing.

A trace's name is checked (a session directory and a file name, each one path component of a
fixed alphabet), its size is capped while it is decompressed (all of a run's traces together),
cache keys must be SHA-256 hex and entries valid responses, the row's identity columns come from
the driver's own cell (the grid's ``identity``), and a storage URL is rebuilt by the driver. A
result that fails any check is a failed run whose ``error`` says why; nothing is written.
"""

from __future__ import annotations

import json
import os
import re
import uuid
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

from subagent_lab.core.types import ModelResponse
from subagent_lab.experiments.grid_types import GridCell, Row
from subagent_lab.experiments.rows import base_row
from subagent_lab.models.cache import entry_path, store_entry

Identity = Callable[[Any], Row]
"""A grid's ``identity``: the columns of a cell's row only the driver may say."""
MAX_TRACE_BYTES = 64 * 1024 * 1024
"""A run's returned traces larger than this together, decompressed, are refused (a 64 KB gzip
bomb is 64 MB)."""
MAX_TRACES = 64
"""The most trace files one run may return (a parent and its children)."""
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


def _traces(out: dict[str, Any]) -> dict[str, bytes | None]:
    """Every returned trace, name -> gzip bytes (None: the worker wrote it to storage); the row's
    own first (``trace_rel``/``trace_gz``), then the others (``traces``: a parent's children)."""
    more = out.get("traces", {})
    if not isinstance(more, dict) or len(more) >= MAX_TRACES:
        raise WorkerResultError(f"traces are not a mapping of fewer than {MAX_TRACES} items")
    named: dict[str, bytes | None] = {}
    main = _trace_rel(out.get("trace_rel"))
    for rel, blob in ([(main, out.get("trace_gz"))] if main else []) + list(more.items()):
        checked = _trace_rel(rel)
        if checked is None:
            raise WorkerResultError("a trace has no name")
        named[checked] = blob
    return named


def _write_trace(cell: GridCell, rel: str, raw: bytes) -> Path:
    """Write a returned trace (decompressed: every reader takes plain JSONL) under the grid."""
    root = Path(cell.trace_dir)
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


def _checked_row(identity: Row, value: object) -> Row:
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
    return {**value, **{k: v for k, v in identity.items() if k not in ("seed", "temperature")}}


def accept_result(
    cell: GridCell, out: object, storage: str | None = None, identity: Identity = base_row
) -> Row:
    """Check what ``cluster_task`` returned for ``cell``, write its traces and cache entries under
    the driver's own directories, and return its row; raises ``WorkerResultError`` (nothing
    written) when any part is malformed. ``identity``: the grid's (default: a sweep's)."""
    if not isinstance(out, dict):
        raise WorkerResultError(f"result is a {type(out).__name__}, not a mapping")
    row = _checked_row(identity(cell), out.get("row"))
    traces = _traces(out)
    budget, raws = MAX_TRACE_BYTES, {}
    for rel, blob in traces.items():
        if blob is not None:
            raws[rel] = _inflate(blob, budget)
            budget -= len(raws[rel])
    entries = _cache_entries(out.get("cache", {})) if cell.cache_dir else {}
    where: dict[str, str] = {}  # the worker's name for a trace (below the driver's trace dir) -> ours
    for rel in traces:
        if rel in raws:
            where[rel] = str(_write_trace(cell, rel, raws[rel]))
        elif storage:
            where[rel] = f"{storage.rstrip('/')}/traces/{rel}.gz"  # where cluster_task put it
    main = _trace_rel(out.get("trace_rel"))
    if main is not None and main in where:
        row["trace_path"] = where[main]
    elif "trace_path" in row:
        row["trace_path"] = None  # a worker's own path means nothing here
    if row.get("child_traces"):
        ours = {str(Path(cell.trace_dir) / rel): path for rel, path in where.items()}
        row["child_traces"] = ",".join(ours[p] for p in str(row["child_traces"]).split(",") if p in ours)
    if cell.cache_dir:
        for key, text in entries.items():
            if not entry_path(cell.cache_dir, key).exists():
                store_entry(cell.cache_dir, key, text)
    return row


def failed_row(cell: GridCell, error: str, identity: Identity = base_row) -> Row:
    """The row of a run that produced no usable result."""
    return {**identity(cell), "terminal_reason": "crashed", "status": "failed", "error": error[:3000],
            "elapsed_s": 0.0}  # fmt: skip
