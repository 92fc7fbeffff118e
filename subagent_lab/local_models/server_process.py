"""The embedded server's files and processes, below the lifecycle API of ``server``.

Where each port's generated config, log and pid file live, the per-port lock, spawning the
server as a detached process, telling whether a recorded pid is still that server, and stopping
one. Nothing here probes HTTP or decides whether to reuse a server: that is ``server``'s.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from subagent_lab.config.endpoints import ServerConfig
from subagent_lab.config.profiles import LabConfig
from subagent_lab.local_models import weights
from subagent_lab.local_models.llama_server import PARENT_ENV as _PARENT_ENV

STARTED: dict[int, subprocess.Popen[bytes]] = {}
"""Servers started by this process, by port (for the exit hook and for reaping)."""


def server_dir() -> Path:
    """``<cache_root>/server``: generated config, log and pid file of each port."""
    return weights.cache_root() / "server"


def server_files(server: ServerConfig) -> tuple[Path, Path, Path]:
    """The generated config, the log and the pid file of ``server``'s port."""
    base = server_dir() / f"server-{server.port}"
    return base.with_suffix(".json"), base.with_suffix(".log"), base.with_suffix(".pid")


def log_tail(path: Path, lines: int = 30) -> str:
    """The last ``lines`` lines of a log, or a note that there is none."""
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return f"(no log at {path})"
    return "\n".join(text.splitlines()[-lines:])


@contextlib.contextmanager
def port_lock(server: ServerConfig) -> Iterator[None]:
    """Hold the port's lock file while deciding whether to reuse or start its server."""
    # Two processes (notebook kernels, workers) may want the server at once: the second waits
    # and then reuses the first's server instead of failing on "address in use".
    server_dir().mkdir(parents=True, exist_ok=True)
    with (server_dir() / f"server-{server.port}.lock").open("a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def read_pid(pid_file: Path) -> dict[str, Any]:
    """What the pid file records (``{}`` when it is missing or unreadable)."""
    try:
        data = json.loads(pid_file.read_text(encoding="utf-8"))
        return data if isinstance(data, dict) else {}
    except (OSError, ValueError):
        return {}


def alive(pid: int) -> bool:
    """Whether ``pid`` is still a server: our own running child, or a process started with --config_file."""
    proc = next((p for p in STARTED.values() if p.pid == pid), None)
    if proc is not None:
        return proc.poll() is None  # our own child: poll() also reaps a zombie
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    cmdline = Path(f"/proc/{pid}/cmdline")
    # Guard against a recycled pid: it must still be a server launched with --config_file.
    return not cmdline.exists() or b"--config_file" in cmdline.read_bytes()


def spawn(
    command: list[str], log: Path, pid_file: Path, srv: ServerConfig, *, watch_parent: bool
) -> subprocess.Popen[bytes]:
    """Start ``command`` detached, in its own session, logging to ``log``; record it in ``pid_file``."""
    log.parent.mkdir(parents=True, exist_ok=True)
    if log.exists():
        # Keep the previous run's log: after a crash it is the one worth reading.
        os.replace(log, log.with_suffix(".log.1"))
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    env.pop(_PARENT_ENV, None)
    if watch_parent:
        # atexit does not run when the parent is killed (SIGTERM/SIGKILL, a test timeout): the
        # server then notices the parent is gone and stops itself instead of lingering.
        env[_PARENT_ENV] = str(os.getpid())
    with log.open("ab") as out:
        out.write(f"# {time.strftime('%Y-%m-%d %H:%M:%S')} started: {' '.join(command)}\n".encode())
        out.flush()
        # A new session: Ctrl-C in a notebook or terminal must not kill a shared server.
        proc = subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
        )
    info = {"pid": proc.pid, "host": srv.host, "port": srv.port, "log": str(log), "command": command}
    pid_file.write_text(json.dumps(info), encoding="utf-8")
    return proc


def terminate(pid: int, proc: subprocess.Popen[bytes] | None = None, grace_s: float = 10.0) -> None:
    """SIGTERM the server's process group; SIGKILL what is left after ``grace_s``."""
    try:
        os.killpg(pid, signal.SIGTERM)  # the whole session: uvicorn plus anything it spawned
    except (ProcessLookupError, PermissionError):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline:
        if (proc.poll() is not None) if proc is not None else not alive(pid):
            return
        time.sleep(0.1)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)
    if proc is not None:
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=5)


def running_pid(config: LabConfig) -> int | None:
    """The live server of this port: from the pid file, else found by its generated config path."""
    cfg_path, _, pid_file = server_files(config.server)
    pid = read_pid(pid_file).get("pid")
    if isinstance(pid, int) and alive(pid):
        return pid
    # The pid file can be lost (a killed process that started it); the command line is not.
    needle = b"\0--config_file\0" + str(cfg_path).encode() + b"\0"
    for proc_dir in Path("/proc").glob("[0-9]*"):
        with contextlib.suppress(OSError):
            if needle in (proc_dir / "cmdline").read_bytes() + b"\0" and int(proc_dir.name) != os.getpid():
                return int(proc_dir.name)
    return None
