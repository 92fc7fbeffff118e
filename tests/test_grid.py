"""The one grid engine (``experiments.grid``): provenance computed once per grid, one directory
rule for the sweep and the delegation study, and the study on a Dask cluster as a sweep runs there."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

import subagent_lab as sl
import subagent_lab.api.sweeps  # loaded up front, so that the spy reaches their names for provenance
import subagent_lab.experiments.delegation
import subagent_lab.experiments.sweep
from subagent_lab.bench.suite import load_suite
from subagent_lab.core.trace import SubagentEvent, read_trace
from subagent_lab.experiments import stamp
from subagent_lab.experiments.delegation import Cell, DelegationSpec, run_study
from subagent_lab.models.scripted import ScriptedFactory, final, tool_call

TASK = next(t for t in load_suite() if t.id == "yaml-safe-load")
ANSWER = {
    "status": "completed",
    "summary": "safe_load uses SafeLoader.",
    "findings": ["safe_load calls load with SafeLoader"],
    "evidence": [g.label for g in TASK.gold],
    "unresolved_questions": [],
}
FACTORY = ScriptedFactory({"*": [tool_call("Grep", pattern="def safe_load"), final(ANSWER)]})
STUDY = DelegationSpec(splits=("dev",), tasks_per_split=1, cells=(Cell(arm="alone"),), baseline=True)


def _count_provenance(monkeypatch: pytest.MonkeyPatch) -> list[tuple[Any, ...]]:
    """Every call of ``stamp.provenance``, through whichever module's name for it."""
    real = stamp.provenance
    calls: list[tuple[Any, ...]] = []

    def spy(*args: Any, **kwargs: Any) -> stamp.Provenance:
        calls.append(args)
        return real(*args, **kwargs)

    for name, module in list(sys.modules.items()):
        if name.startswith("subagent_lab") and getattr(module, "provenance", None) is real:
            monkeypatch.setattr(module, "provenance", spy)
    return calls


def test_a_sweep_computes_its_provenance_once(
    config_path: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = _count_provenance(monkeypatch)
    df = sl.sweep(TASK.id, ["light", "main"], model=FACTORY, config=config_path, runs_dir=tmp_path,
                  name="once", progress=False, cache=False)  # fmt: skip
    assert len(df) == 2 and set(df["status"]) == {"completed"}
    assert len(calls) == 1  # not once for the directory, once per model's stamps, once for the attrs
    where = Path(df.attrs["sweep_dir"])
    assert where.parent == tmp_path / "sweeps" and (where / "provenance.json").is_file()
    assert df.attrs["provenance"] == df["provenance"].iloc[0]  # the rows' stamp is the grid's
    again = sl.sweep(TASK.id, ["light", "main"], model=FACTORY, config=config_path, runs_dir=tmp_path,
                     name="once", progress=False, cache=False)  # fmt: skip
    assert len(calls) == 2 and again.attrs["sweep_dir"] == str(where)  # resumed, once more


def test_a_study_computes_its_provenance_once_and_stamps_each_split(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = _count_provenance(monkeypatch)
    spec = STUDY.model_copy(update={"splits": ("dev", "test")})
    df = run_study(spec, out_dir=tmp_path)
    assert len(calls) == 1 and len(df) == 2 and df["error"].isna().all()
    # Each split's rows carry that split's suite hash, as when a provenance was computed per split.
    monkeypatch.undo()
    lab = sl.load_config()
    for split in ("dev", "test"):
        tasks = sl.study_tasks(split, 1)
        row = df.set_index("split").loc[split]
        alone = stamp.provenance(lab, tasks, ["none"])
        assert (row["suite_hash"], row["provenance"]) == (alone.suite_hash, alone.key())


def test_a_study_directory_of_before_the_engine_still_resumes(tmp_path: Path) -> None:
    df = run_study(STUDY, out_dir=tmp_path)
    plain = Path(df.attrs["study_dir"])
    assert plain.name == f"{STUDY.name}-{STUDY.key()}"  # the one rule: plain until a conflict
    # Before the one engine a study's directory always ended in its provenance key, with no
    # provenance.json: such a directory is found and resumed, not run again beside it.
    old = plain.with_name(f"{plain.name}-{df.attrs['provenance']}")
    shutil.move(plain, old)
    (old / "provenance.json").unlink()
    ran: list[str] = []
    again = run_study(STUDY, out_dir=tmp_path, on_row=lambda row: ran.append(row["run_key"]))
    assert ran == [] and again.attrs["study_dir"] == str(old) and len(again) == 1


@pytest.mark.timeout(300)
def test_the_delegation_study_runs_on_a_dask_cluster(tmp_path: Path) -> None:
    distributed = pytest.importorskip("distributed")
    cells = (Cell(arm="alone"), Cell(arm="forced-delegation"))
    spec = STUDY.model_copy(update={"cells": cells})
    here = run_study(spec, out_dir=tmp_path / "here")
    worker_dir = str(tmp_path / "worker")
    with distributed.LocalCluster(
        n_workers=1, threads_per_worker=2, processes=True, dashboard_address=None, local_directory=worker_dir
    ) as cluster:
        there = run_study(spec, out_dir=tmp_path / "there", cluster=cluster.scheduler_address)
        ran: list[str] = []
        again = run_study(spec, out_dir=tmp_path / "there", cluster=cluster.scheduler_address,
                          on_row=lambda row: ran.append(row["run_key"]))  # fmt: skip
    assert ran == [] and len(again) == 2  # resumed on the cluster too
    assert there["error"].isna().all() and there["worker"].str.startswith("tcp://").all()
    assert set(there["attempts"]) == {1}
    same = ["run_key", "cell", "status", "terminal_reason", "quality", "sub_agents", "provenance"]
    pd.testing.assert_frame_equal(there[same].sort_values("run_key").reset_index(drop=True),
                                  here[same].sort_values("run_key").reset_index(drop=True))  # fmt: skip
    # The parent's trace and its child's came back, under the driver's study directory, and the
    # parent's trace names the child's trace where the driver wrote it.
    study = Path(there.attrs["study_dir"])
    forced = there.set_index("cell").loc["forced-delegation"]
    (child,) = forced["child_traces"].split(",")
    assert Path(forced["trace_path"]).is_relative_to(study / "traces") and Path(child).is_file()
    named = [e.child_trace for e in read_trace(forced["trace_path"]) if isinstance(e, SubagentEvent)]
    assert named and set(named) == {child}
    assert not list((tmp_path / "worker").rglob("*.jsonl"))  # nothing left on the worker


def test_the_cli_study_takes_a_cluster(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``subagent-lab sweep --study delegation --cluster ADDRESS`` hands the address to the engine
    (here the engine runs a smaller study in this process, so no scheduler is needed)."""
    from subagent_lab.cli.main import main
    from subagent_lab.experiments import grid as engine

    real = engine.run_grid
    asked: dict[str, Any] = {}

    def run_grid(grid: Any, lab: Any, **kwargs: Any) -> pd.DataFrame:
        asked.update(kwargs, spec=grid.spec)
        small = grid.spec.model_copy(
            update={"splits": ("dev",), "cells": (*STUDY.cells, Cell(arm="forced-delegation"))}
        )
        return real(type(grid)(small, cache=grid.cache), lab, **{**kwargs, "cluster": None, "storage": None})

    monkeypatch.setattr(engine, "run_grid", run_grid)
    argv = ["sweep", "--study", "delegation", "--baseline", "--tasks-per-split", "1", "--out", str(tmp_path),
            "--cluster", "tcp://head:8786", "--storage", "file:///shared/x"]  # fmt: skip
    assert main(argv) == 0
    assert (asked["cluster"], asked["storage"]) == ("tcp://head:8786", "file:///shared/x")
    assert asked["spec"].baseline and asked["spec"].tasks_per_split == 1
    out = capsys.readouterr().out
    assert "study delegation-" in out and "quality_vs_context.png" in out
    assert len(list(tmp_path.glob("delegation-*/results.csv"))) == 1
