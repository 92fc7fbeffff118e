"""Durability: a sweep killed with SIGKILL mid-run leaves readable traces and a resumable table."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from conftest import REPO

from redteam.sweep_worker import SPEC, factory
from subagent_lab.analysis.metrics import child_metrics
from subagent_lab.core.trace import RunEnded, read_trace
from subagent_lab.experiments.sweep import load_results, run_sweep, sweep_dir

HERE = Path(__file__).resolve().parent


@pytest.fixture
def config_path(tmp_path: Path) -> str:
    raw = yaml.safe_load((REPO / "profiles.yaml").read_text())
    for section in ("profiles", "agents"):
        for prof in (raw.get(section) or {}).values():
            if "system_prompt_file" in prof:
                prof["system_prompt_file"] = str(REPO / prof["system_prompt_file"])
    raw["trace_dir"] = str(tmp_path / "runs")
    raw["profiles"]["explore"]["scaffold"] = "retrieval-start"  # the model writes the answer (not `rank`)
    path = tmp_path / "profiles.yaml"
    path.write_text(yaml.safe_dump(raw))
    return str(path)


def _rows(results: Path) -> list[str]:
    return results.read_text().splitlines() if results.exists() else []


def test_sigkill_mid_sweep_then_resume(config_path: str, tmp_path: Path) -> None:
    out = tmp_path / "sw"
    results = sweep_dir(SPEC, out) / "results.jsonl"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(HERE.parent), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.Popen(
        [sys.executable, str(HERE / "sweep_worker.py"), config_path, str(out), "0.4"],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 120
        # Wait until some runs are done and others are in flight, then kill without warning.
        while len(_rows(results)) < 3 and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.05)
        time.sleep(0.3)  # land inside the next runs' model turns
        assert proc.poll() is None, proc.stderr.read().decode() if proc.stderr else ""
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
        if proc.stderr is not None:
            proc.stderr.close()
    assert proc.returncode == -signal.SIGKILL

    # every trace file is a valid JSONL prefix; the killed runs simply have no run_ended
    traces = sorted((sweep_dir(SPEC, out) / "traces").rglob("*.jsonl"))
    finished_before = {json.loads(line)["run_key"] for line in _rows(results) if line.strip().endswith("}")}
    assert 3 <= len(finished_before) < 8
    ended = 0
    for path in traces:
        events = read_trace(path)
        assert events and events[0].kind == "run_started"
        if isinstance(events[-1], RunEnded):
            ended += 1
        else:
            assert child_metrics(events).terminal_reason == "unknown"
    assert ended >= len(finished_before) and len(traces) > ended  # some runs were cut mid-flight

    # the table loads as it is
    table = load_results(sweep_dir(SPEC, out))
    assert set(table["run_key"]) == finished_before and set(table["status"]) == {"completed"}

    # re-running completes the missing runs and redoes none of the finished ones
    rerun: list[str] = []
    df = run_sweep(
        SPEC,
        config_path=config_path,
        out_dir=out,
        model_factory=factory(0.0),
        cache=False,
        progress=False,
        on_row=lambda row: rerun.append(row["run_key"]),
    )
    assert not set(rerun) & finished_before
    assert len(rerun) == 8 - len(finished_before)
    assert len(df) == 8 and set(df["status"]) == {"completed"} and df["run_key"].is_unique
    keys = [json.loads(line)["run_key"] for line in _rows(results) if line.strip()]
    assert sorted(keys) == sorted(set(keys))  # no run recorded twice


def test_torn_trace_line_is_tolerated(tmp_path: Path, config_path: str) -> None:
    """A crash mid-write tears at most the last line: readers skip it, the metrics say 'unknown'."""
    df = run_sweep(
        SPEC.model_copy(update={"repeats": 1, "models": ("light",)}),
        config_path=config_path,
        out_dir=tmp_path / "sw",
        model_factory=factory(0.0),
        cache=False,
        progress=False,
    )
    path = Path(df["trace_path"].iloc[0])
    lines = path.read_text().splitlines()
    path.write_text("\n".join(lines[:-1]) + "\n" + lines[-1][: len(lines[-1]) // 2])
    events = read_trace(path)
    assert len(events) == len(lines) - 1 and child_metrics(events).terminal_reason == "unknown"
