"""Append-only JSONL traces of typed, versioned events, flushed per event.

One file per run. A crash leaves a valid JSONL prefix; ``read_trace`` tolerates a torn last line.
Secrets are redacted on write by ``subagent_lab.core.redact.Redactor`` (re-exported here). The
events themselves are in ``core.trace_events`` (re-exported here).
"""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any, Protocol

from pydantic import BaseModel
from pydantic_core import PydanticSerializationError

from subagent_lab.core.redact import Redactor as Redactor  # re-exported: one redactor for everything
from subagent_lab.core.trace_events import (
    EVENT_ADAPTER,
    SCHEMA_VERSION,
    ActionForced,
    BudgetDecision,
    CandidateJudged,
    Compacted,
    ContractChecked,
    Event,
    ModelCalled,
    ModelCallFailed,
    PromptAdded,
    RunEnded,
    RunStarted,
    RunTotals,
    SubagentEvent,
    ToolFinished,
    ToolStarted,
    _Event,
)

__all__ = [
    "EVENT_ADAPTER", "MAX_EVENT_DEPTH", "SCHEMA_VERSION", "ActionForced", "BudgetDecision", "CandidateJudged",
    "Compacted", "ContractChecked", "Event", "ModelCallFailed", "ModelCalled", "PromptAdded", "Redactor",
    "RunEnded", "RunStarted", "RunTotals", "RunTrace", "SubagentEvent", "ToolFinished", "ToolStarted",
    "TraceSink", "TraceWriter", "new_id", "read_trace", "to_json", "trace_dicts",
]  # fmt: skip


def new_id(prefix: str) -> str:
    """A collision-free id (uuid4), readable prefix first."""
    return f"{prefix}-{uuid.uuid4().hex[:16]}"


def _scrub(value: Any) -> Any:
    """Lone surrogates (a non-UTF-8 file name, a model's ``"\\udce9"`` escape) cannot be written
    as UTF-8: they become visible ``\\udce9`` text instead of failing the write."""
    if isinstance(value, str):
        return value.encode("utf-8", "backslashreplace").decode("utf-8")
    if isinstance(value, dict):
        return {_scrub(k): _scrub(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_scrub(v) for v in value]
    return value


def to_json(model: BaseModel) -> str:
    """``model`` as one JSON line, even when it holds lone surrogates (see ``_scrub``) or data
    nested past the serialiser's depth limit (cut at ``MAX_EVENT_DEPTH`` levels, marked)."""
    try:
        return model.model_dump_json()
    except PydanticSerializationError:
        pass
    try:
        return json.dumps(_scrub(model.model_dump(mode="json")), ensure_ascii=False, separators=(",", ":"))
    except (ValueError, RecursionError):  # "Maximum serialization depth exceeded"
        fields = {name: _shallow(getattr(model, name), 0) for name in type(model).model_fields}
        return json.dumps(_scrub(fields), ensure_ascii=False, separators=(",", ":"), default=str)


MAX_EVENT_DEPTH = 64


def _shallow(value: Any, depth: int) -> Any:
    if isinstance(value, BaseModel):
        value = {name: getattr(value, name) for name in type(value).model_fields}
    if isinstance(value, (dict, list, tuple)) and depth >= MAX_EVENT_DEPTH:
        return f"<nested deeper than {MAX_EVENT_DEPTH} levels>"
    if isinstance(value, dict):
        return {str(k): _shallow(v, depth + 1) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_shallow(v, depth + 1) for v in value]
    return value


class TraceWriter:
    """Writes one run's events; thread-safe; each event is one flushed line.

    ``guarded`` (every run's trace, parent or child): a write that fails is recorded in ``error``,
    never raised, and nothing more is written after it (a trace with a hole in it would mislead);
    ``ended`` says whether a ``RunEnded`` made it out, so a fallback never writes a second one.
    Opening the file still raises OSError: the caller decides whether to run without a trace.
    """

    def __init__(
        self, path: Path, run_id: str, *, redactor: Redactor | None = None, guarded: bool = False
    ) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        # "x": a second writer for the same run id is a bug, never a silent merge of two runs.
        self._fh: IO[str] | None = path.open("x", encoding="utf-8")
        self.path = path
        self.run_id = run_id
        self._seq = 0
        self._lock = threading.Lock()
        self._redact = redactor or Redactor()
        self.guarded = guarded
        self.error: str | None = None
        """Why the trace is incomplete (guarded writers only); None while every write succeeded."""
        self.ended = False

    def emit(self, event: _Event) -> None:
        """Append ``event``; a guarded writer records a failure instead of raising it."""
        if not self.guarded:
            return self._write(event)
        if self.error is not None:
            return None
        try:
            self._write(event)
        except (OSError, ValueError) as exc:  # ValueError: the file was closed under us
            self.error = f"writing {self.path} failed: {type(exc).__name__}: {exc}"
        else:
            self.ended = self.ended or isinstance(event, RunEnded)
        return None

    def _write(self, event: _Event) -> None:
        """Append ``event`` (its ``seq`` is assigned here) and flush it to disk."""
        with self._lock:
            if self._fh is None:
                return
            event.seq = self._seq
            self._seq += 1
            line = self._redact.json_line(to_json(event))
            self._fh.write(line + "\n")
            self._fh.flush()

    def close(self) -> None:
        try:
            with self._lock:
                if self._fh is not None:
                    self._fh.close()
                    self._fh = None
        except OSError as exc:  # the final flush can fail too (a full disk)
            if not self.guarded:
                raise
            self.error = self.error or f"closing {self.path} failed: {type(exc).__name__}: {exc}"


class TraceSink(Protocol):
    """Where a run's events go: a ``TraceWriter`` (the loop writes through a ``RunTrace`` over it)."""

    run_id: str

    def emit(self, event: _Event) -> None: ...


class RunTrace:
    """A run's trace as the loop writes it: the sink stamps each event with the run id and the
    current step, moved on by ``offset`` (the steps earlier attempts of the run took, so step
    numbers continue across attempts)."""

    def __init__(self, inner: TraceSink, step: Callable[[], int], offset: int = 0) -> None:
        self.inner, self.run_id, self.step, self.offset = inner, inner.run_id, step, offset

    def emit(self, event: type[_Event], /, **fields: Any) -> None:
        """Build ``event`` from ``fields`` plus the stamps, and write it."""
        self.inner.emit(event(run_id=self.run_id, step=self.step() + self.offset, **fields))


def read_trace(path: str | Path) -> list[Event]:
    """Load a trace; a torn final line (a crash mid-write) is skipped, anything else is an error."""
    events: list[Event] = []
    lines = Path(path).read_text(encoding="utf-8").split("\n")
    for index, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            events.append(EVENT_ADAPTER.validate_json(line))
        except ValueError:
            if index >= len(lines) - 2:  # only the last written line may be torn
                break
            raise
    return events


def trace_dicts(path: str | Path) -> list[dict[str, Any]]:
    """The trace as plain dicts (for pandas)."""
    return [json.loads(e.model_dump_json()) for e in read_trace(path)]
