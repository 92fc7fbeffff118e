"""Issue 39: the Dask driver trusts nothing a worker returns.

A worker's returned trace name and cache keys became paths of the driver's: ``..`` and absolute
values wrote files outside the sweep directory (``c66a494``), and a 64 KB gzip trace became a
64 MB file. Here the driver-side function (``accept_result``) gets hostile results directly, as
a compromised or buggy worker would send them (no cluster needed): each is a failed run whose
error says why, and nothing is written outside the sweep directory.
"""

from __future__ import annotations

import gzip
import json
import os
from pathlib import Path
from typing import Any

import msgpack
import pytest

from subagent_lab.bench.suite import load_suite
from subagent_lab.config.parsed import parsed_config
from subagent_lab.core.types import Message, ModelRequest, ModelResponse
from subagent_lab.experiments import cluster
from subagent_lab.experiments.spec import RunSpec, Variant
from subagent_lab.experiments.worker_result import lab_namespaces
from subagent_lab.models.cache import request_key

REQUEST = ModelRequest(messages=[Message(role="user", content="request")], seed=0)
# The entry of a request of the run (seed 0) under the configuration's light model: a worker sends
# each entry with its request, and the driver checks the key against it (issue 52).
KEY = request_key(sorted(lab_namespaces(parsed_config(None)))[0], REQUEST)
ENTRY = ModelResponse(text="{}").model_dump_json()
SENT = {"request": REQUEST.model_dump_json(), "response": ENTRY}
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
        "cache": {KEY: SENT},
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
                store_entry(str(run.cache_dir), key, text["response"])
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
    sent = cluster.encode_batch([_good(), raised], 0.2)  # what a worker returns: msgpack bytes
    rows = cluster._batch_rows(grid, [first, second], _Done(sent), None, batcher)
    assert [r["status"] for r in rows] == ["completed", "failed"], rows[0].get("error")
    assert rows[1]["run_key"] == "run-2" and rows[1]["error"] == "RuntimeError: boom"
    assert batcher.runs == 2 and batcher.seconds == 0.2  # the batch's time sizes the next ones
    for bad in ({"outs": [_good()], "seconds": 0.1}, {"outs": "x"}, ["not", "a", "mapping"]):
        rows = cluster._batch_rows(grid, [first, second], _Done(msgpack.packb(bad)), None, batcher)
        assert [r["status"] for r in rows] == ["failed", "failed"]
        assert all("not 2 results" in r["error"] for r in rows)
    rows = cluster._batch_rows(grid, [first, second], _Done(error=KeyError("lost")), None, batcher)
    assert [r["error"] for r in rows] == ["KeyError: 'lost'"] * 2
    assert batcher.runs == 2  # a failed task says nothing about how long runs take


# Issue 52: a worker's result is plain data (msgpack bytes), checked against the run it belongs to.


class _Gadget:
    """What a hostile worker's pickled result would hold: unpickling it creates ``marker``."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[Any, ...]:
        return (os.makedirs, (str(self.marker),))


def test_a_pickled_result_is_refused_and_never_unpickled_by_the_driver(tmp_path: Path) -> None:
    """The driver's decode takes msgpack of plain data only: a pickle stream whose unpickling runs
    code (a ``__reduce__`` gadget), or an object handed over as it is, is a malformed result of
    every run of the batch, and the gadget never runs. (Dask's own transport is the cluster's
    boundary, docs/redteam.md.)"""
    import pickle

    from subagent_lab.experiments.batching import Batcher
    from subagent_lab.experiments.sweep import SweepGrid, SweepSpec

    marker = tmp_path / "gadget-ran"
    pickle.loads(pickle.dumps(_Gadget(marker)))  # the gadget works: unpickling it makes the marker
    assert marker.exists()
    marker.rmdir()
    run = _run(tmp_path)
    grid = SweepGrid(SweepSpec(name="x", tasks=(run.task.id,), models=("light",)))
    hostile = [
        pickle.dumps({"outs": [_Gadget(marker)], "seconds": 0.1}),  # pickle bytes
        pickle.dumps(_Gadget(marker), protocol=0),
        _Gadget(marker),  # an object, not bytes
        msgpack.packb({"outs": [msgpack.ExtType(5, pickle.dumps(_Gadget(marker)))], "seconds": 0.1}),
        msgpack.packb({"outs": [{"row": msgpack.ExtType(1, b"x")}], "seconds": 0.1}),
    ]
    for blob in hostile:
        with pytest.raises(cluster.WorkerResultError):
            cluster.decode_batch(blob, 1)
        (row,) = cluster._batch_rows(grid, [run], _Done(blob), None, Batcher(threads=1))
        assert row["status"] == "failed" and row["error"].startswith("malformed worker result:"), row
    assert not marker.exists()
    assert _files(tmp_path) == set()


@pytest.mark.parametrize("seconds", [float("inf"), float("nan"), -1.0, "0.2", None, True])
def test_a_batch_whose_seconds_is_not_a_duration_fails_its_runs_and_the_sweep_goes_on(
    tmp_path: Path, seconds: Any
) -> None:
    from subagent_lab.experiments.batching import Batcher
    from subagent_lab.experiments.sweep import SweepGrid, SweepSpec

    first = _run(tmp_path)
    second = first.model_copy(update={"run_key": "run-2"})
    grid = SweepGrid(SweepSpec(name="x", tasks=(first.task.id,), models=("light",)))
    batcher = Batcher(threads=1)
    bad = msgpack.packb({"outs": [_good()], "seconds": seconds})
    (row,) = cluster._batch_rows(grid, [first], _Done(bad), None, batcher)
    assert row["status"] == "failed" and "finite duration" in row["error"], row
    assert batcher.runs == 0 and _files(tmp_path) == set()
    good = cluster.encode_batch([_good(trace_rel="session-b/explore-run-2.jsonl")], 0.1)
    (row,) = cluster._batch_rows(grid, [second], _Done(good), None, batcher)  # the next batch
    assert row["status"] == "completed" and batcher.runs == 1


@pytest.mark.parametrize(
    "name", ["session-abc/explore-run-1.jsonl", "session-abc/another.jsonl", "explore-run-1.jsonl"]
)
def test_a_result_cannot_overwrite_or_join_another_runs_traces(tmp_path: Path, name: str) -> None:
    first = _run(tmp_path)
    plain = first.model_copy(update={"run_key": "run-0"})
    row = _accept(plain, _good(trace_rel="explore-run-1.jsonl", cache={}))  # a trace at the top
    assert row["status"] == "completed"
    row = _accept(first, _good())
    assert row["status"] == "completed"
    written = {p: p.read_bytes() for p in (tmp_path / "sweep" / "traces").rglob("*.jsonl")}
    second = first.model_copy(update={"run_key": "run-2"})
    row = _accept(second, _good(trace_rel=name, trace_gz=gzip.compress(b'{"type": "forged"}\n'), cache={}))
    assert row["status"] == "failed" and "another run's trace" in row["error"], row
    assert {p: p.read_bytes() for p in (tmp_path / "sweep" / "traces").rglob("*.jsonl")} == written


def test_a_result_cannot_plant_a_cache_entry_for_another_runs_request(tmp_path: Path) -> None:
    """Run 2 (seed 7) sends an answer keyed by run 1's request (seed 0), or an answer under a key
    that is not its request's: either fails run 2, and the driver's cache holds neither."""
    second = _run(tmp_path).model_copy(update={"run_key": "run-2", "seed": 7})
    ns = sorted(lab_namespaces(parsed_config(None)))[0]
    poisoned = ModelResponse(text='{"status": "forged"}').model_dump_json()
    own = REQUEST.model_copy(update={"seed": 7})
    for cache in (
        {KEY: {"request": REQUEST.model_dump_json(), "response": poisoned}},  # run 1's request
        {KEY: {"request": own.model_dump_json(), "response": poisoned}},  # its own, under run 1's key
        {KEY: poisoned},  # no request at all
    ):
        row = _accept(second, _good(cache=cache))
        assert row["status"] == "failed" and "cache entry" in row["error"], row
    assert not (tmp_path / "sweep" / "cache").exists()
    mine = {request_key(ns, own): {"request": own.model_dump_json(), "response": poisoned}}
    assert _accept(second, _good(cache=mine))["status"] == "completed"  # its own request: kept
