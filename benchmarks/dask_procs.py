"""A Dask scheduler and workers as separate processes on 127.0.0.1, each in its own directory.

No subagent_lab import (the scale benchmark and the cluster tests share it). Every process is
bounded: the scheduler exits after ``idle_timeout`` without work, a worker when its scheduler is
gone for ``death_timeout``; ``stop()`` (or leaving the ``with`` block) ends them all at once.
Workers run without a nanny, so a killed worker stays dead and its tasks go to the others.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path


class ProcCluster:
    """``with ProcCluster(root) as c: c.add_worker("w1"); run_sweep(..., cluster=c.address)``."""

    def __init__(self, root: str | Path, *, idle_timeout_s: int = 600, start_timeout_s: float = 60.0) -> None:
        self.root = Path(root)
        self.idle_timeout_s = idle_timeout_s
        self.start_timeout_s = start_timeout_s
        self.scheduler: subprocess.Popen[bytes] | None = None
        self.workers: dict[str, subprocess.Popen[bytes]] = {}
        self.address = ""

    def _env(self) -> dict[str, str]:
        env = dict(os.environ)
        env.setdefault("PYTHONUNBUFFERED", "1")
        return env

    def start(self) -> ProcCluster:
        where = self.root / "scheduler"
        where.mkdir(parents=True, exist_ok=True)
        info = where / "scheduler.json"
        info.unlink(missing_ok=True)
        self.scheduler = subprocess.Popen(
            [sys.executable, "-m", "distributed.cli.dask_scheduler", "--host", "127.0.0.1", "--port", "0",
             "--no-dashboard", "--scheduler-file", str(info), "--idle-timeout", f"{self.idle_timeout_s}s"],
            cwd=where, stdout=(where / "log.txt").open("wb"), stderr=subprocess.STDOUT, env=self._env(),
        )  # fmt: skip
        deadline = time.monotonic() + self.start_timeout_s
        while time.monotonic() < deadline:
            if info.exists():
                try:
                    self.address = json.loads(info.read_text())["address"]
                    return self
                except (ValueError, KeyError):
                    pass  # written but not yet complete
            if self.scheduler.poll() is not None:
                break
            time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"the Dask scheduler did not start; see {where / 'log.txt'}")

    def add_worker(self, name: str, *, nthreads: int = 1) -> subprocess.Popen[bytes]:
        """Start worker ``name`` in ``<root>/<name>`` (its working and local directory)."""
        where = self.root / name
        where.mkdir(parents=True, exist_ok=True)
        proc = subprocess.Popen(
            [sys.executable, "-m", "distributed.cli.dask_worker", self.address, "--name", name,
             "--nthreads", str(nthreads), "--no-nanny", "--no-dashboard", "--host", "127.0.0.1",
             "--local-directory", str(where), "--death-timeout", "60"],
            cwd=where, stdout=(where / "log.txt").open("wb"), stderr=subprocess.STDOUT, env=self._env(),
        )  # fmt: skip
        self.workers[name] = proc
        return proc

    def wait_for_workers(self, n: int, timeout_s: float | None = None) -> None:
        from distributed import Client

        with Client(self.address, set_as_default=False, timeout=30) as client:
            client.wait_for_workers(n, timeout=timeout_s or self.start_timeout_s)

    def kill(self, name: str) -> None:
        """SIGKILL worker ``name`` (no nanny: it stays dead)."""
        proc = self.workers[name]
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)

    def stop(self) -> None:
        for proc in [*self.workers.values(), *([self.scheduler] if self.scheduler else [])]:
            if proc.poll() is None:
                proc.terminate()
        for proc in [*self.workers.values(), *([self.scheduler] if self.scheduler else [])]:
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=5)

    def __enter__(self) -> ProcCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
