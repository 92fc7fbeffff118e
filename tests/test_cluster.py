"""Sweeps on a real Dask cluster: a scheduler and workers as separate processes on 127.0.0.1.

The workers run in directories of their own and read no file of the driver's: the configuration
travels as JSON, traces and call-cache entries come back with the rows. The models are the fake
OpenAI-compatible endpoint of ``benchmarks/fake_endpoint.py`` (threads of this test process,
bounded in requests and time), reached through an endpoint pool.
"""

from __future__ import annotations

import gzip
import json
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import REPO

from subagent_lab.config.profiles import load_config
from subagent_lab.core.trace import read_trace
from subagent_lab.experiments.sweep import SweepSpec, load_results, run_sweep

pytest.importorskip("distributed")
sys.path.insert(0, str(REPO / "benchmarks"))
from dask_procs import ProcCluster
from fake_endpoint import FakeEndpoint

TASK = "yaml-safe-load"


def _config(tmp_path: Path, endpoints: dict[str, int]) -> str:
    """The repo's profiles.yaml with both models served by ``endpoints`` (a pool of fakes)."""
    raw = yaml.safe_load((REPO / "profiles.yaml").read_text())
    # The fake answers without the harness's opening retrieval: the explore profile as `aided`.
    aided = load_config(REPO / "profiles.yaml", env={}).scaffold("aided").resolved()
    raw["profiles"]["explore"].update(aided)
    for prof in raw["profiles"].values():
        if "system_prompt_file" in prof:
            prof["system_prompt_file"] = str(REPO / prof["system_prompt_file"])
    for model in raw["models"].values():
        if model:
            model.update(base_url=next(iter(endpoints)), model="fake", endpoints=endpoints)
    raw["trace_dir"] = str(tmp_path / "runs")
    path = tmp_path / "profiles.yaml"
    path.write_text(yaml.safe_dump(raw))
    return str(path)


@pytest.mark.timeout(240)
def test_sweep_on_separate_scheduler_and_worker_processes(tmp_path: Path) -> None:
    with (
        FakeEndpoint(max_requests=400, max_seconds=200) as good,
        FakeEndpoint(statuses=(500,), max_requests=400, max_seconds=200) as down,
        ProcCluster(tmp_path / "cluster", idle_timeout_s=200) as cluster,
    ):
        worker = cluster.add_worker("w1", nthreads=2)
        cluster.wait_for_workers(1)
        config = _config(tmp_path, {good.url: 2, down.url: 2})
        spec = SweepSpec(name="c", tasks=(TASK,), models=("light", "main"), repeats=3)
        out = tmp_path / "sweeps"
        df = run_sweep(spec, config_path=config, out_dir=out, cluster=cluster.address, progress=False)
        seen: list[dict[str, Any]] = []
        again = run_sweep(
            spec, config_path=config, out_dir=out, cluster=cluster.address, progress=False, on_row=seen.append
        )
        stored = run_sweep(
            spec.model_copy(update={"name": "s", "repeats": 1}),
            config_path=config,
            out_dir=out,
            cluster=cluster.address,
            progress=False,
            storage=(tmp_path / "store").as_uri(),
        )
        assert worker.poll() is None
    assert len(df) == 6 and set(df["status"]) == {"completed"}, df[["status", "error"]]
    assert seen == [] and len(again) == 6  # resume: nothing left to run
    assert set(df["worker"]) == {df["worker"].iloc[0]} and df["worker"].iloc[0].startswith("tcp://127.0.0.1")
    assert not df["retried"].any() and set(df["attempts"]) == {1}
    (here,) = (p.parent for p in out.glob("c-*/results.jsonl"))
    for path in df["trace_path"]:
        assert Path(path).is_relative_to(here / "traces")  # written by the driver, under the sweep
        assert read_trace(path)[-1].kind == "run_ended"
    assert (df["trace_bytes"] > df["trace_bytes_compressed"]).all()
    assert (df["trace_bytes_compressed"] > 0).all()
    # No trace stays behind on the worker; its call-cache entries reached the driver's cache.
    assert not list((tmp_path / "cluster" / "w1").rglob("*.jsonl"))
    driver_cache = list((out / "model-cache").rglob("*.json"))
    assert len(driver_cache) == int(df["cache_misses"].sum()) > 0
    # The replica answering 500 was tried, then taken out of the pool; every answer came from the other.
    assert down.answered.get(500, 0) >= 1 and good.answered[200] == int(df["model_calls"].sum())
    assert down.answered.get(500, 0) < good.answered[200]
    # With a storage URL the worker writes the compressed trace there; the row names its URL.
    assert len(stored) == 2 and set(stored["status"]) == {"completed"}
    for url in stored["trace_path"]:
        assert url.startswith((tmp_path / "store").as_uri()) and url.endswith(".jsonl.gz")
        events = gzip.decompress(Path(url.removeprefix("file://")).read_bytes()).decode().splitlines()
        assert json.loads(events[-1])["kind"] == "run_ended"


@pytest.mark.timeout(240)
def test_killed_worker_runs_rerun_elsewhere_no_row_lost_or_duplicated(tmp_path: Path) -> None:
    spec = SweepSpec(name="k", tasks=(TASK,), models=("light", "main"), repeats=6)
    out = tmp_path / "sweeps"
    rows: list[dict[str, Any]] = []
    with (
        FakeEndpoint(max_requests=2000, max_seconds=200, delay_s=0.15) as fake,
        ProcCluster(tmp_path / "cluster", idle_timeout_s=200) as cluster,
    ):
        cluster.add_worker("w1")
        cluster.add_worker("w2")
        cluster.wait_for_workers(2)
        config = _config(tmp_path, {fake.url: 4})
        killed = threading.Event()

        def on_row(row: dict[str, Any]) -> None:
            rows.append(row)
            if len(rows) == 2 and not killed.is_set():
                killed.set()
                cluster.kill("w2")  # mid-sweep: w2 is in the middle of a run

        df = run_sweep(
            spec, config_path=config, out_dir=out, cluster=cluster.address, progress=False, on_row=on_row
        )
    assert killed.is_set()
    (results,) = out.glob("k-*/results.jsonl")
    lines = [json.loads(line) for line in results.read_text().splitlines()]
    keys = [row["run_key"] for row in lines]
    assert len(keys) == len(set(keys)) == 12  # none lost, none twice
    assert set(df["status"]) == {"completed"}
    retried = df[df["retried"]]
    assert len(retried) >= 1 and (retried["attempts"] >= 2).all()
    assert retried["worker"].nunique() == 1  # re-run on the surviving worker
    assert len(load_results(results.parent)) == 12


@pytest.mark.timeout(240)
def test_short_runs_share_tasks_and_every_run_has_its_own_row(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Runs of a few milliseconds (a fake that answers at once) go several to a Dask task; each
    still comes back as its own row with its own trace, once."""
    import subagent_lab.experiments.cluster as cluster_module
    from subagent_lab.experiments.batching import Batcher

    sizes: list[int] = []

    class Spy(Batcher):
        def size(self, waiting: int) -> int:
            sizes.append(super().size(waiting))
            return sizes[-1]

    monkeypatch.setattr(cluster_module, "Batcher", Spy)
    spec = SweepSpec(name="b", tasks=(TASK,), models=("light", "main"), repeats=20)
    with (
        FakeEndpoint(max_requests=2000, max_seconds=200) as fake,
        ProcCluster(tmp_path / "cluster", idle_timeout_s=200) as cluster,
    ):
        cluster.add_worker("w1")
        cluster.wait_for_workers(1)
        config = _config(tmp_path, {fake.url: 4})
        df = run_sweep(spec, config_path=config, out_dir=tmp_path / "sweeps", cluster=cluster.address,
                       progress=False)  # fmt: skip
    assert sum(sizes) == 40 and len(sizes) < 40 and max(sizes) > 1, sizes
    assert len(df) == 40 and df["run_key"].nunique() == 40 and set(df["status"]) == {"completed"}
    assert not df["retried"].any() and set(df["attempts"]) == {1}
    assert df["trace_path"].nunique() == 40
    for path in df["trace_path"]:
        assert read_trace(path)[-1].kind == "run_ended"
