"""The harness at scale: explore sweeps on a Dask scheduler + worker processes against a fake endpoint.

Usage::

    .venv/bin/python benchmarks/bench_scale.py [--runs 2000] [--speed-runs 240] [--root DIR]

Every process is separate and has its own working directory: the fake OpenAI-compatible endpoint
(``fake_endpoint.py``: answers in microseconds, so what is measured is the harness), a Dask
scheduler, the workers (``dask_procs.py``, one thread each) and the sweep's driver. Prints:

1. runs/s with 1 worker and with 2 workers (``--speed-runs`` runs each, no call cache), the
   harness's CPU time per run and per tool call (the workers' CPU: loop, tools, scoring, trace,
   Dask), the driver's, the endpoint's and the Dask scheduler's, and the cores all of them kept
   busy on average (CPU seconds over wall seconds);
2. a ``--runs``-run sweep on 2 workers during which one worker is SIGKILLed (a fresh one joins)
   and later the driver is SIGKILLed and started again: rows lost / duplicated, runs retried,
   runs the restarted driver ran, the driver's resident memory as rows accumulate, trace bytes
   per run, and how long ``sl.load_runs`` takes on the result.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import resource
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE))
from dask_procs import ProcCluster  # noqa: E402

TICKS = os.sysconf("SC_CLK_TCK")


def cpu_s(pid: int) -> float:
    """User + system CPU seconds of a live process: its threads and its waited-for children (rg)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return sum(int(f) for f in fields[11:15]) / TICKS


def rss_mb() -> tuple[float, float]:
    """(resident, peak resident) MiB of this process."""
    status = dict(
        line.split(":", 1) for line in Path("/proc/self/status").read_text().splitlines() if ":" in line
    )
    return int(status["VmRSS"].split()[0]) / 1024, int(status["VmHWM"].split()[0]) / 1024


def write_config(root: Path, url: str, pool: int = 0) -> Path:
    """The repo's profiles.yaml with both models at ``url`` (``pool`` > 0: as a one-replica endpoint
    pool with that limit, so every model call also takes a cluster-wide semaphore slot)."""
    raw = yaml.safe_load((REPO / "profiles.yaml").read_text())
    for prof in raw["profiles"].values():
        if "system_prompt_file" in prof:
            prof["system_prompt_file"] = str(REPO / prof["system_prompt_file"])
    for model in raw["models"].values():
        if model:
            model.update(base_url=url, model="fake", **({"endpoints": {url: pool}} if pool else {}))
    raw["trace_dir"] = str(root / "runs")
    path = root / "profiles.yaml"
    path.write_text(yaml.safe_dump(raw))
    return path


SCAFFOLD_ENV = "BENCH_SCALE_SCAFFOLD"
"""``--scaffold``: the preset every run names (unset: the explore profile's own), so that two code
versions whose default scaffolds differ are timed on the same work; an environment variable, so
the driver process sees it too."""


def spec_for(name: str, runs: int) -> Any:
    """An explore grid of about ``runs`` runs over the suite's workspaces (2 models, n repeats)."""
    from subagent_lab.bench.suite import load_suite
    from subagent_lab.experiments.sweep import SweepSpec

    suite = [t.id for t in load_suite()]
    tasks = suite[: min(len(suite), 25)]
    return SweepSpec(
        name=name, tasks=tuple(tasks), models=("light", "main"), repeats=max(runs // (2 * len(tasks)), 1),
        scaffolds=tuple(filter(None, [os.environ.get(SCAFFOLD_ENV)])),
    )  # fmt: skip


# --- the driver, a process of its own ---------------------------------------------------------


def driver(config: str, out: str, address: str, name: str, runs: int) -> None:
    """Run the sweep on the cluster; print a JSON line every 2 % of the runs (rows so far, RSS)."""
    from subagent_lab.experiments.sweep import run_sweep

    count = 0
    every = max(runs // 50, 5)  # fine enough for the orchestrator to kill at 30 % and 60 %
    started = time.perf_counter()

    def on_row(row: dict[str, Any]) -> None:
        nonlocal count
        count += 1
        if count % every == 0:
            rss, peak = rss_mb()
            elapsed = time.perf_counter() - started
            print(json.dumps({"rows": count, "rss_mb": rss, "peak_mb": peak, "s": elapsed}), flush=True)

    spec = spec_for(name, runs)
    run_sweep(
        spec, config_path=config, out_dir=out, cluster=address, cache=False, progress=False, on_row=on_row
    )
    rss, peak = rss_mb()
    usage = resource.getrusage(resource.RUSAGE_SELF)
    cpu = usage.ru_utime + usage.ru_stime
    print(json.dumps({"done": count, "rss_mb": rss, "peak_mb": peak, "cpu_s": cpu}), flush=True)


def start_driver(
    config: Path, out: Path, address: str, name: str, runs: int, log: Path
) -> subprocess.Popen[str]:
    cmd = [sys.executable, __file__, "--driver", str(config), str(out), address, name, str(runs)]
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=log.open("a"), text=True, cwd=out)


def results_lines(out: Path, name: str) -> list[dict[str, Any]]:
    rows = []
    for path in out.glob(f"{name}-*/results.jsonl"):
        for line in path.read_text().splitlines():
            with contextlib.suppress(json.JSONDecodeError):  # a torn line of the killed driver
                rows.append(json.loads(line))
    return rows


# --- the phases ---------------------------------------------------------------------------------


def speed(root: Path, config: Path, workers: int, runs: int, fake_pid: int) -> dict[str, float]:
    """Runs/s and CPU per run on a fresh cluster of ``workers`` single-thread worker processes."""
    from subagent_lab.experiments.sweep import run_sweep

    with ProcCluster(root / f"speed-{workers}", idle_timeout_s=900) as cluster:
        procs = [cluster.add_worker(f"w{i}") for i in range(1, workers + 1)]
        cluster.wait_for_workers(workers)
        spec = spec_for(f"speed{workers}", runs)
        before = [cpu_s(p.pid) for p in procs]
        fake_before = cpu_s(fake_pid)
        scheduler_before = cpu_s(cluster.scheduler.pid)
        usage = resource.getrusage(resource.RUSAGE_SELF)
        mine = usage.ru_utime + usage.ru_stime
        t0 = time.perf_counter()
        df = run_sweep(spec, config_path=str(config), out_dir=root / "sweeps", cluster=cluster.address,
                       cache=False, progress=False)  # fmt: skip
        wall = time.perf_counter() - t0
        worker_cpu = sum(cpu_s(p.pid) - b for p, b in zip(procs, before, strict=True))
        scheduler_cpu = cpu_s(cluster.scheduler.pid) - scheduler_before
        usage = resource.getrusage(resource.RUSAGE_SELF)
        driver_cpu = usage.ru_utime + usage.ru_stime - mine
    tools = int(sum(df[f"{t}_executed"].sum() for t in ("Read", "Grep", "Glob")))
    return {
        "workers": workers,
        "runs": len(df),
        "completed": int((df["status"] == "completed").sum()),
        "wall_s": wall,
        "runs_per_s": len(df) / wall,
        "worker_cpu_ms_per_run": 1000 * worker_cpu / len(df),
        "worker_cpu_ms_per_tool_call": 1000 * worker_cpu / max(tools, 1),
        "tool_calls_per_run": tools / len(df),
        "model_calls_per_run": float(df["model_calls"].mean()),
        "driver_cpu_ms_per_run": 1000 * driver_cpu / len(df),
        "endpoint_cpu_ms_per_run": 1000 * (cpu_s(fake_pid) - fake_before) / len(df),
        "scheduler_cpu_ms_per_run": 1000 * scheduler_cpu / len(df),
        "cores_busy": (worker_cpu + scheduler_cpu + driver_cpu + cpu_s(fake_pid) - fake_before) / wall,
    }


def faults(root: Path, config: Path, runs: int) -> dict[str, Any]:
    """The big sweep: kill a worker at 30 %, the driver at 60 %, restart it, check the rows."""
    import subagent_lab as sl

    name, out = "scale", root / "sweeps"
    out.mkdir(parents=True, exist_ok=True)
    log = root / "driver.log"
    planned = len(spec_for(name, runs).model_dump()["tasks"]) * 2 * spec_for(name, runs).repeats
    memory: list[dict[str, float]] = []
    with ProcCluster(root / "scale", idle_timeout_s=1800) as cluster:
        cluster.add_worker("w1")
        cluster.add_worker("w2")
        cluster.wait_for_workers(2)
        t0 = time.perf_counter()
        first = start_driver(config, out, cluster.address, name, runs, log)
        killed_worker_at = killed_driver_at = -1
        assert first.stdout is not None
        for line in first.stdout:
            msg = json.loads(line)
            memory.append(msg)
            done = msg.get("rows", 0)
            if killed_worker_at < 0 and done >= 0.3 * planned:
                cluster.kill("w2")  # mid-run: its runs must go to w1 (and w3, which joins now)
                cluster.add_worker("w3")
                killed_worker_at = done
            if done >= 0.6 * planned:
                first.send_signal(signal.SIGKILL)
                first.wait()
                killed_driver_at = len({r["run_key"] for r in results_lines(out, name)})
                break
        first.wait()
        second = start_driver(config, out, cluster.address, name, runs, log)
        tail, _ = second.communicate()
        wall = time.perf_counter() - t0
    final = json.loads(tail.strip().splitlines()[-1])
    lines = results_lines(out, name)
    keys = [r["run_key"] for r in lines]
    (sweep,) = {p.parent for p in out.glob(f"{name}-*/results.jsonl")}
    t1 = time.perf_counter()
    df = sl.load_runs(sweep)
    load_s = time.perf_counter() - t1
    trace_files = [Path(p) for p in df["trace_path"] if isinstance(p, str)]
    return {
        "planned": planned,
        "rows": len(df),
        "lost": planned - len(set(keys)),
        "duplicated": len(keys) - len(set(keys)),
        "completed": int((df["status"] == "completed").sum()),
        "retried": int(df["retried"].fillna(False).astype(bool).sum()),
        "worker_killed_at_rows": killed_worker_at,
        "driver_killed_at_rows": killed_driver_at,
        "restarted_driver_ran": final["done"],
        "expected_after_restart": planned - killed_driver_at,
        "wall_s": wall,
        "driver_memory": [m for m in memory if "rows" in m],
        "driver2": final,
        "trace_bytes_per_run": float(df["trace_bytes"].mean()),
        "trace_bytes_compressed_per_run": float(df["trace_bytes_compressed"].mean()),
        "trace_files_present": sum(p.is_file() for p in trace_files),
        "load_runs_s": load_s,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=2000)
    parser.add_argument("--speed-runs", type=int, default=200)
    parser.add_argument("--root", default=None, help="working directory (default: a new temporary one)")
    parser.add_argument("--skip-speed", action="store_true")
    parser.add_argument("--skip-faults", action="store_true")
    parser.add_argument("--pool", type=int, default=0, help="models as an endpoint pool, this limit")
    parser.add_argument("--scaffold", default=None, help="a preset every run names (default: the profile's)")
    args = parser.parse_args()
    if args.scaffold:
        os.environ[SCAFFOLD_ENV] = args.scaffold
    root = Path(args.root or tempfile.mkdtemp(prefix="bench-scale-")).resolve()
    (root / "endpoint").mkdir(parents=True, exist_ok=True)
    fake = subprocess.Popen(
        [sys.executable, str(HERE / "fake_endpoint.py"), "--max-requests", "200000", "--max-seconds", "3600"],
        stdout=subprocess.PIPE, text=True, cwd=root / "endpoint",
    )  # fmt: skip
    try:
        assert fake.stdout is not None
        port = int(fake.stdout.readline().split()[1])
        config = write_config(root, f"http://127.0.0.1:{port}/v1", args.pool)
        print(
            f"root {root}; fake endpoint on 127.0.0.1:{port}; {os.cpu_count()} CPUs; load {os.getloadavg()}"
        )
        if not args.skip_speed:
            results = [speed(root, config, n, args.speed_runs, fake.pid) for n in (1, 2)]
            print("\nthroughput (fresh cluster each, 1 thread per worker, no call cache):")
            print(f"  {'':<30}" + "".join(f"{str(r['workers']) + ' worker(s)':>16}" for r in results))
            for key in list(results[0])[1:]:
                print(f"  {key:<30}" + "".join(f"{r[key]:>16.3f}" for r in results))
            print(f"  speed-up 2 vs 1 worker: {results[1]['runs_per_s'] / results[0]['runs_per_s']:.2f}x")
        if not args.skip_faults:
            res = faults(root, config, args.runs)
            print(f"\n{res['planned']} runs on 2 workers; a worker killed, the driver killed and restarted:")
            for key, value in res.items():
                if key != "driver_memory":
                    print(f"  {key:<32} {value}")
            print("  driver RSS (MiB) by rows done (first driver):")
            for m in res["driver_memory"][:: max(len(res["driver_memory"]) // 8, 1)]:
                print(f"    rows {m['rows']:>5}: rss {m['rss_mb']:.1f} peak {m['peak_mb']:.1f}")
        print(f"\nload after: {os.getloadavg()}")
    finally:
        fake.terminate()
        fake.wait(timeout=10)


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--driver":
        config_arg, out_arg, address_arg, name_arg, runs_arg = sys.argv[2:7]
        driver(config_arg, out_arg, address_arg, name_arg, int(runs_arg))
    else:
        main()
