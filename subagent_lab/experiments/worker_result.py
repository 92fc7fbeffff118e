"""What the driver accepts of a cluster worker's result (``experiments.cluster``): plain data,
checked against the run it belongs to.

A batch's result is one ``bytes`` value, msgpack (``encode_batch``), decoded by the driver with no
extension types and checked to hold only plain values (``decode_batch``): nothing the worker
built is unpickled by this code. (Dask's own protocol still pickles: the trust boundary of the
cluster's processes is docs/redteam.md's, "Trust boundary of each surface".) Its ``seconds`` must
be a finite duration.

Per run: a trace's name is checked (a session directory and a file name, each one path component
of a fixed alphabet), its session directory must be new (a run's traces never replace another
run's: no file is overwritten), its size is capped while it is decompressed (all of a run's
traces together); each cache entry comes with its request, whose key under one of the
configuration's model namespaces must be the entry's key and whose seed must be the run's (a
sweep's runs have seeds of their own), so a worker cannot plant an answer for another run's
request; the row's identity columns come from the driver's own cell (the grid's ``identity``),
and a storage URL is rebuilt by the driver. A result that fails any check is a failed run whose
``error`` says why; nothing is written.
"""

from __future__ import annotations

import json
import math
import os
import re
import uuid
import zlib
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import msgpack

from subagent_lab.config.parsed import parsed_config
from subagent_lab.config.profiles import LabConfig
from subagent_lab.core.types import ModelRequest, ModelResponse
from subagent_lab.experiments.grid_types import GridCell, Row
from subagent_lab.experiments.rows import base_row
from subagent_lab.local_models.namespace import config_namespace
from subagent_lab.models.cache import entry_path, request_key, store_entry

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
MAX_RESULT_BYTES = 512 * 1024 * 1024
"""A batch's result larger than this, encoded, is refused before it is decoded."""
MAX_DEPTH = 64
"""The deepest nesting a decoded result may have."""
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,199}")
"""One path component, of a fixed alphabet, never ``.`` or ``..`` (it cannot start with a dot)."""
_CACHE_KEY = re.compile(r"[0-9a-f]{64}")


class WorkerResultError(ValueError):
    """What a worker returned cannot be accepted; the message says why."""


def encode_batch(outs: list[dict[str, Any]], seconds: float) -> bytes:
    """A batch's result as the worker sends it: msgpack of ``{"outs": [...], "seconds": s}``."""
    return msgpack.packb({"outs": outs, "seconds": seconds}, use_bin_type=True)


def _refuse_ext(code: int, data: bytes) -> object:
    raise WorkerResultError(f"msgpack extension type {code}: only plain data is accepted")


def _check_plain(value: object) -> None:
    """Raise unless ``value`` is only maps with text keys, lists, text, bytes, numbers, booleans
    and None, nested at most ``MAX_DEPTH`` deep."""
    stack: list[tuple[object, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise WorkerResultError(f"result is nested deeper than {MAX_DEPTH}")
        if isinstance(item, dict):
            if not all(isinstance(k, str) for k in item):
                raise WorkerResultError("a map of the result has keys that are not text")
            stack.extend((v, depth + 1) for v in item.values())
        elif isinstance(item, list):
            stack.extend((v, depth + 1) for v in item)
        elif item is not None and not isinstance(item, str | bytes | int | float | bool):
            raise WorkerResultError(f"result holds a {type(item).__name__}: only plain data is accepted")


def decode_batch(blob: object, runs: int) -> tuple[list[object], float]:
    """The per-run results and the worker's wall time of a batch of ``runs`` from the bytes a worker
    returned (``encode_batch``); ``WorkerResultError`` for anything else: an object (what a pickled
    result would be), bytes that are not msgpack of plain data, not one result per run, or a
    ``seconds`` that is not a finite duration. Never unpickles."""
    if not isinstance(blob, bytes):
        raise WorkerResultError(f"result is a {type(blob).__name__}, not msgpack bytes")
    if len(blob) > MAX_RESULT_BYTES:
        raise WorkerResultError(f"result is over {MAX_RESULT_BYTES:,} bytes")
    try:
        data = msgpack.unpackb(blob, raw=False, strict_map_key=True, ext_hook=_refuse_ext, timestamp=0)
    except WorkerResultError:
        raise
    except (ValueError, TypeError, RecursionError, msgpack.UnpackException) as exc:
        raise WorkerResultError(f"result is not msgpack: {type(exc).__name__}") from None
    _check_plain(data)
    outs = data.get("outs") if isinstance(data, dict) else None
    if not isinstance(outs, list) or len(outs) != runs:
        raise WorkerResultError(f"not {runs} results")
    seconds = data.get("seconds")
    if isinstance(seconds, bool) or not isinstance(seconds, int | float) or not 0 <= seconds < math.inf:
        raise WorkerResultError(f"seconds {str(seconds)[:40]!r} is not a finite duration")
    return outs, float(seconds)


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


def _fresh_places(cell: GridCell, names: Iterable[str]) -> None:
    """Raise unless every returned trace goes where no run's trace is: a session directory of
    its own that does not exist yet (a run's session id is new), or a file name that is free."""
    root = Path(cell.trace_dir)
    for rel in names:
        first = root / rel.split("/")[0]
        if os.path.lexists(first):
            raise WorkerResultError(f"trace name {rel!r} is taken: another run's trace is there")


def _write_trace(cell: GridCell, rel: str, raw: bytes) -> Path:
    """Write a returned trace (decompressed: every reader takes plain JSONL) under the grid; it
    never replaces a file (another run's trace): ``WorkerResultError`` when the name is taken."""
    root = Path(cell.trace_dir)
    dest = root / rel
    if not dest.resolve().is_relative_to(root.resolve()):  # a session directory that is a link
        raise WorkerResultError(f"trace name {rel!r} leads outside the sweep directory")
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_name(f".{dest.name}.{uuid.uuid4().hex}")
    tmp.write_bytes(raw)
    try:
        os.link(tmp, dest)  # fails where the name exists: no trace is ever replaced
    except FileExistsError:
        raise WorkerResultError(f"trace name {rel!r} is taken: another run's trace is there") from None
    finally:
        tmp.unlink()
    return dest


def lab_namespaces(lab: LabConfig) -> frozenset[str]:
    """The call-cache namespaces of the models ``lab`` holds."""
    return frozenset(config_namespace(lab, cfg) for cfg in lab.models.values() if cfg is not None)


def namespaces_of(cell: GridCell) -> frozenset[str]:
    """The call-cache namespaces of the models the cell's configuration holds (the driver's file)."""
    return lab_namespaces(parsed_config(cell.config_path))


def _cache_entries(value: object, cell: GridCell, namespaces: frozenset[str]) -> dict[str, str]:
    """Returned cache entries, key -> response text: SHA-256 hex keys, each with its request and a
    valid response of bounded size; the key must be the request's under one of ``namespaces`` and
    the request's seed the run's (where the run has one)."""
    if not isinstance(value, dict) or len(value) > MAX_CACHE_ENTRIES:
        raise WorkerResultError(f"cache entries are not a mapping of at most {MAX_CACHE_ENTRIES} items")
    seed = getattr(cell, "seed", None)
    entries: dict[str, str] = {}
    for key, entry in value.items():
        if not isinstance(key, str) or not _CACHE_KEY.fullmatch(key):
            raise WorkerResultError(f"cache key {str(key)[:200]!r} is not a SHA-256 hex digest")
        request, text = (
            (entry.get("request"), entry.get("response")) if isinstance(entry, dict) else (None, None)
        )
        if not all(isinstance(t, str) and len(t) <= MAX_CACHE_ENTRY_BYTES for t in (request, text)):
            raise WorkerResultError(
                f"cache entry {key} is not a request and a response, each at most "
                f"{MAX_CACHE_ENTRY_BYTES:,} bytes"
            )
        assert isinstance(request, str) and isinstance(text, str)
        try:
            ModelResponse.model_validate_json(text)
            asked = ModelRequest.model_validate(json.loads(request))  # lone surrogates as sent
        except (ValueError, RecursionError):
            raise WorkerResultError(f"cache entry {key} is not a model request and response") from None
        if not any(request_key(ns, asked) == key for ns in namespaces):
            raise WorkerResultError(f"cache entry {key} is not its request's key under this configuration")
        if seed is not None and asked.seed != seed:
            raise WorkerResultError(
                f"cache entry {key} is another run's request (seed {asked.seed}, not {seed})"
            )
        entries[key] = text
    return entries


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
    cell: GridCell,
    out: object,
    storage: str | None = None,
    identity: Identity = base_row,
    namespaces: frozenset[str] | None = None,
) -> Row:
    """Check what ``cluster_task`` returned for ``cell``, write its traces and cache entries under
    the driver's own directories, and return its row; raises ``WorkerResultError`` (nothing
    written) when any part is malformed. ``identity``: the grid's (default: a sweep's);
    ``namespaces``: the cache namespaces of the configuration (None: ``namespaces_of(cell)``)."""
    if not isinstance(out, dict):
        raise WorkerResultError(f"result is a {type(out).__name__}, not a mapping")
    row = _checked_row(identity(cell), out.get("row"))
    traces = _traces(out)
    budget, raws = MAX_TRACE_BYTES, {}
    for rel, blob in traces.items():
        if blob is not None:
            raws[rel] = _inflate(blob, budget)
            budget -= len(raws[rel])
    if cell.cache_dir:
        entries = _cache_entries(
            out.get("cache", {}), cell, namespaces_of(cell) if namespaces is None else namespaces
        )
    else:
        entries = {}
    _fresh_places(cell, [rel for rel in traces if rel in raws])
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
