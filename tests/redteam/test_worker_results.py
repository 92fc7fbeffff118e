"""Issue 39: the Dask driver trusts nothing a worker returns.

A worker's returned trace name and cache keys became paths of the driver's: ``..`` and absolute
values wrote files outside the sweep directory (``c66a494``), and a 64 KB gzip trace became a
64 MB file. Here the driver-side function (``accept_result``) gets hostile results directly, as
a compromised or buggy worker would send them (no cluster needed): each is a failed run whose
error says why, and nothing is written outside the sweep directory.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
from pathlib import Path
from typing import Any

import pytest

from subagent_lab.bench.suite import load_suite
from subagent_lab.core.types import ModelResponse
from subagent_lab.experiments import cluster
from subagent_lab.experiments.spec import RunSpec, Variant

KEY = hashlib.sha256(b"request").hexdigest()
ENTRY = ModelResponse(text="{}").model_dump_json()
TRACE = b'{"type": "run_started"}\n'


def _run(tmp_path: Path) -> RunSpec:
    sweep = tmp_path / "sweep"
    return RunSpec(
        run_key="run-1", task=load_suite()[0], model="light", profile="explore", variant=Variant(),
        repeat=0, config_path=None, trace_dir=str(sweep / "traces"), cache_dir=str(sweep / "cache"),
    )  # fmt: skip


def _good(**change: Any) -> dict[str, Any]:
    out: dict[str, Any] = {
        "row": {"run_key": "run-1", "status": "completed", "terminal_reason": "completed"},
        "trace_rel": "session-abc/explore-run-1.jsonl",
        "trace_gz": gzip.compress(TRACE),
        "cache": {KEY: ENTRY},
    }
    out.update(change)
    return out


def _files(root: Path) -> set[str]:
    return {str(Path(d, f).relative_to(root)) for d, _, fs in os.walk(root) for f in fs}


def _accept(run: RunSpec, out: Any) -> dict[str, Any]:
    """What the driver's loop does with one result (``run_on_cluster``)."""
    if not hasattr(cluster, "accept_result"):  # c66a494's loop, to show these tests fail there
        return _old_accept(run, out)
    try:
        return cluster.accept_result(run, out)
    except (cluster.WorkerResultError, OSError) as exc:
        return cluster.failed_row(run, f"malformed worker result: {exc}")


def _old_accept(run: RunSpec, out: Any) -> dict[str, Any]:
    from subagent_lab.models.cache import entry_path, store_entry

    try:
        row = out["row"]
        if out["trace_rel"] and out["trace_gz"] is not None:
            row["trace_path"] = str(cluster._write_trace(run, out["trace_rel"], out["trace_gz"]))
        for key, text in out["cache"].items():
            if not entry_path(str(run.cache_dir), key).exists():
                store_entry(str(run.cache_dir), key, text)
    except Exception as exc:
        return {"run_key": run.run_key, "status": "failed", "error": f"{type(exc).__name__}: {exc}"}
    return dict(row)


def test_a_well_formed_result_is_written_under_the_sweep(tmp_path: Path) -> None:
    run = _run(tmp_path)
    row = _accept(run, _good())
    assert row["status"] == "completed"
    assert Path(row["trace_path"]).read_bytes() == TRACE
    assert Path(row["trace_path"]).is_relative_to(tmp_path / "sweep" / "traces")
    assert (tmp_path / "sweep" / "cache" / KEY[:2] / f"{KEY}.json").read_text() == ENTRY


HOSTILE: dict[str, dict[str, Any]] = {
    "trace ..": _good(trace_rel="../../../escaped.jsonl"),
    "trace .. inside": _good(trace_rel="session/../../../escaped.jsonl"),
    "trace absolute": _good(trace_rel="{outside}/escaped.jsonl"),
    "trace three parts": _good(trace_rel="a/b/escaped.jsonl"),
    "trace not jsonl": _good(trace_rel="session/escaped.sh"),
    "trace name not text": _good(trace_rel=["x"]),
    "cache key ..": _good(cache={"../../../../escaped": ENTRY}),
    "cache key absolute": _good(cache={"{outside}/escaped": ENTRY}),
    "cache entry not a response": _good(cache={KEY: "#!/bin/sh\n"}),
    "gzip bomb": _good(trace_gz=gzip.compress(b"\n" * (64 * 1024 * 1024 + 1))),
    "not gzip": _good(trace_gz=b"plain"),
    "row not a mapping": _good(row=["completed"]),
    "result not a mapping": {"__not__": "x"},
}


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_a_hostile_worker_result_is_a_failed_run_and_writes_nothing(tmp_path: Path, name: str) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    raw = json.loads(json.dumps(HOSTILE[name], default=lambda b: b.hex()).replace("{outside}", str(outside)))
    out: Any = {k: bytes.fromhex(v) if k == "trace_gz" else v for k, v in raw.items()}
    if name == "result not a mapping":
        out = "completed"
    run = _run(tmp_path)
    row = _accept(run, out)
    assert row["status"] == "failed" and row["error"].startswith("malformed worker result:"), row
    assert row["run_key"] == "run-1"
    assert _files(tmp_path) == set(), _files(tmp_path)  # nothing written, inside or out


def test_a_gzip_bomb_is_refused_before_it_is_inflated_whole(tmp_path: Path) -> None:
    bomb = gzip.compress(b"\n" * (256 * 1024 * 1024))  # 256 MB of newlines: ~250 KB on the wire
    assert len(bomb) < 512 * 1024
    row = _accept(_run(tmp_path), _good(trace_gz=bomb))
    assert row["status"] == "failed" and "decompressed" in row["error"]


def test_a_row_claiming_another_run_is_the_drivers_run(tmp_path: Path) -> None:
    row = _accept(
        _run(tmp_path), _good(row={"run_key": "someone-else", "task_id": "x", "status": "completed"})
    )
    assert row["run_key"] == "run-1" and row["task_id"] == load_suite()[0].id


class _Done:
    """A finished Dask future as ``cluster._batch_rows`` reads it."""

    def __init__(self, result: Any = None, error: Exception | None = None) -> None:
        self._result, self._error = result, error

    def result(self) -> Any:
        if self._error is not None:
            raise self._error
        return self._result


def test_a_batch_result_is_checked_run_by_run(tmp_path: Path) -> None:
    """A task of several runs: each run's result is accepted or failed on its own; a result that is
    not one per run, or a task that failed, fails every run of it with the reason."""
    from subagent_lab.experiments.batching import Batcher
    from subagent_lab.experiments.sweep import SweepGrid, SweepSpec

    first = _run(tmp_path)
    second = first.model_copy(update={"run_key": "run-2"})
    grid = SweepGrid(SweepSpec(name="x", tasks=(first.task.id,), models=("light",)))
    batcher = Batcher(threads=1)
    raised = {"error": "RuntimeError: boom"}
    rows = cluster._batch_rows(grid, [first, second], _Done({"outs": [_good(), raised], "seconds": 0.2}),
                               None, batcher)  # fmt: skip
    assert [r["status"] for r in rows] == ["completed", "failed"]
    assert rows[1]["run_key"] == "run-2" and rows[1]["error"] == "RuntimeError: boom"
    assert batcher.runs == 2 and batcher.seconds == 0.2  # the batch's time sizes the next ones
    for bad in ({"outs": [_good()], "seconds": 0.1}, {"outs": "x"}, ["not", "a", "mapping"]):
        rows = cluster._batch_rows(grid, [first, second], _Done(bad), None, batcher)
        assert [r["status"] for r in rows] == ["failed", "failed"]
        assert all("not 2 results" in r["error"] for r in rows)
    rows = cluster._batch_rows(grid, [first, second], _Done(error=KeyError("lost")), None, batcher)
    assert [r["error"] for r in rows] == ["KeyError: 'lost'"] * 2
    assert batcher.runs == 2  # a failed task says nothing about how long runs take
