"""Where a sweep worker's CPU goes per run: ``cluster_task`` in this process against the fake endpoint.

Usage::

    PYTHONPATH=. .venv/bin/python benchmarks/profile_run.py [--runs 100] [--warm 10] [--profile out.prof]

Runs the explore grid of ``bench_scale.py`` (25 dev tasks x light, main; no call cache) one run at a
time through ``experiments.cluster.cluster_task``, the function a Dask worker runs, after ``--warm``
runs that pay the process's one-time costs (imports, the first parse of the configuration, the gold
files' syntax trees). Prints the CPU time per run and per tool call of the runs after them: this
process's and its children's (ripgrep). No Dask, so no scheduler traffic or worker heartbeats:
``bench_scale.py`` measures those too. With ``--profile``, also a cProfile on the CPU clock
(``time.process_time``; the profiler itself multiplies the Python-level time several-fold, so read
its shares, not its totals).
"""

from __future__ import annotations

import argparse
import cProfile
import inspect
import os
import pstats
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import bench_scale  # noqa: E402


def cpu_s() -> tuple[float, float]:
    """(this process's, its waited-for children's) CPU seconds."""
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime, kids.ru_utime + kids.ru_stime


def _one_run(spec: Any, shipped: str) -> Callable[[Any], dict[str, Any]]:
    """``cluster_task`` for one run, in this checkout's signature (a grid first since issue 38)."""
    from subagent_lab.experiments.cluster import cluster_task

    if "grid" not in inspect.signature(cluster_task).parameters:  # a commit before the grid engine
        return lambda run: cluster_task(run, shipped, None, None)  # type: ignore[arg-type]
    from subagent_lab.experiments.sweep import SweepGrid

    grid = SweepGrid(spec, cache=False)
    return lambda run: cluster_task(grid, run, shipped, None)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=100)
    parser.add_argument("--warm", type=int, default=10)
    parser.add_argument("--profile", type=Path, default=None, help="write a cProfile here and print its top")
    args = parser.parse_args()
    from subagent_lab.config.profiles import load_config
    from subagent_lab.experiments.cluster import cluster_task
    from subagent_lab.experiments.spec import plan_runs

    root = Path(tempfile.mkdtemp(prefix="profile-run-"))
    fake = subprocess.Popen(
        [sys.executable, str(HERE / "fake_endpoint.py"), "--max-requests", "200000", "--max-seconds", "3600"],
        stdout=subprocess.PIPE, text=True, cwd=root,
    )  # fmt: skip
    try:
        assert fake.stdout is not None
        port = int(fake.stdout.readline().split()[1])
        config = bench_scale.write_config(root, f"http://127.0.0.1:{port}/v1")
        lab = load_config(str(config))
        spec = bench_scale.spec_for("profile", args.runs + args.warm)
        runs = plan_runs(spec, config_path=str(config), out=root / "sweeps", cache=False, lab=lab)
        runs = runs[: args.runs + args.warm]
        shipped = lab.model_dump_json()
        one = _one_run(spec, shipped)
        os.chdir(root)  # the worker's directory: its traces and model cache go under it
        for run in runs[: args.warm]:
            one(run)
        prof = cProfile.Profile(time.process_time) if args.profile else None
        me0, kids0 = cpu_s()
        if prof:
            prof.enable()
        rows = [one(run)["row"] for run in runs[args.warm :]]
        if prof:
            prof.disable()
        me1, kids1 = cpu_s()
    finally:
        fake.terminate()
        fake.wait(timeout=10)
    tools = sum(int(row.get(f"{t}_executed") or 0) for row in rows for t in ("Read", "Grep", "Glob"))
    n = len(rows)
    print(f"code {Path(cluster_task.__code__.co_filename).parents[2]}; {n} runs, "
          f"statuses {sorted({r['status'] for r in rows})}")  # fmt: skip
    own, kids = 1000 * (me1 - me0) / n, 1000 * (kids1 - kids0) / n
    per_call = (own + kids) * n / max(tools, 1)
    note = " (profiled)" if prof else ""
    print(f"CPU per run: {own:.1f} ms in this process, {kids:.1f} ms in its children; "
          f"per tool call ({tools / n:.1f} a run): {per_call:.1f} ms{note}")  # fmt: skip
    if prof and args.profile:
        prof.dump_stats(str(args.profile))
        pstats.Stats(prof).sort_stats("cumulative").print_stats(40)


if __name__ == "__main__":
    main()
