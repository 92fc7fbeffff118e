"""The embedded OpenAI-compatible model server: llama.cpp's ``llama-server``, one per model.

``ensure_server`` reuses a healthy server at ``server.host:server.port`` or starts one as a
detached process (log, pid file and generated config under ``<cache_root>/server``), waiting
for readiness. Only models whose ``base_url`` is None are served here. The process started is
``python -m subagent_lab.local_models.llama_server --config_file F``: a router that runs one ``llama-server``
per embedded model (built by ``scripts/setup.sh`` from the llama.cpp sources vendored in the
pinned llama-cpp-python sdist) and serves both aliases on one port. The files and processes
under this API (pid file, port lock, spawning and stopping) are ``server_process``'s.
"""

from __future__ import annotations

import atexit
import json
import os
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import httpx

from subagent_lab.config.endpoints import ServerConfig
from subagent_lab.config.profiles import LabConfig
from subagent_lab.local_models import weights
from subagent_lab.local_models.server_process import (
    STARTED,
    alive,
    log_tail,
    port_lock,
    read_pid,
    running_pid,
    server_files,
    spawn,
    terminate,
)
from subagent_lab.local_models.server_process import server_dir as server_dir  # re-exported: public

ProbeState = Literal["free", "healthy", "busy", "foreign"]
PROBE_TIMEOUT_S = 3.0
"""How long a health probe waits for an answer (a busy server is then asked without the lock)."""


class ServerError(RuntimeError):
    """The embedded server cannot be reached, started or stopped; the message says why and where."""


@dataclass(frozen=True)
class ServerHandle:
    """A running embedded server."""

    url: str
    """OpenAI base URL, ``http://host:port/v1``."""
    host: str
    port: int
    log_path: Path
    aliases: tuple[str, ...]
    pid: int | None = None
    started: bool = False
    """True when this call started it (False: an existing server was reused)."""


def log_path(config: LabConfig) -> Path:
    """The log file of the embedded server of ``config``."""
    return server_files(config.server)[1]


def default_endpoint_error(url: str, log_path: Path | str | None, *, tail_lines: int = 0) -> str:
    """The message for a default endpoint that stopped answering: URL, log path, how to restart."""
    msg = (
        f"the embedded model server at {url} is not answering (crashed, stopped or overloaded); "
        f"restart it with `subagent-lab serve`"
    )
    if log_path is not None:
        msg += f"; server log: {log_path}"
        if tail_lines > 0:
            msg += "\n" + log_tail(Path(log_path), tail_lines)
    return msg


def served_aliases(config: LabConfig) -> tuple[str, ...]:
    """Aliases the embedded server must serve: every embedded model (configured or not)."""
    return tuple(spec.alias for spec in weights.SPECS.values())


def managed_models(config: LabConfig, *, strict: bool = True) -> dict[str, str]:
    """Model choice -> alias for the models that use the embedded server (``base_url`` None).

    With ``strict``, a model without ``base_url`` that is not an embedded alias is an error.
    """
    managed = {c: m.model for c, m in config.models.items() if m is not None and m.base_url is None}
    unknown = {c: a for c, a in managed.items() if a not in served_aliases(config)}
    if unknown and strict:
        raise ServerError(
            f"models {unknown} have no base_url but are not embedded models "
            f"(embedded: {list(served_aliases(config))}); set base_url to their endpoint"
        )
    return managed


def _threads(server: ServerConfig) -> int:
    if server.n_threads:
        return server.n_threads
    # The affinity mask, not cpu_count(), is what a container or taskset actually gives us.
    affinity = getattr(os, "sched_getaffinity", None)
    return len(affinity(0)) if affinity else os.cpu_count() or 1


LLAMA_CPP_BUILD = "llama-cpp-python-0.3.16-vendored-4227c9b"
"""The llama.cpp source ``scripts/setup.sh`` builds ``llama-server`` from (the tree vendored in the
pinned llama-cpp-python sdist, llama.cpp commit 4227c9b); names the cached build directory."""


def llama_server_binary() -> Path:
    """``$SUBAGENT_LAB_LLAMA_SERVER``, else the binary ``scripts/setup.sh`` builds into the cache."""
    env = os.environ.get("SUBAGENT_LAB_LLAMA_SERVER")
    if env:
        return Path(env).expanduser()
    return weights.cache_root() / "llama.cpp" / LLAMA_CPP_BUILD / "bin" / "llama-server"


def server_settings(config: LabConfig, model_paths: dict[str, Path]) -> dict[str, Any]:
    """The router's ``--config_file`` content for ``model_paths`` (choice -> GGUF)."""
    srv = config.server
    models = [
        {
            "alias": weights.SPECS[choice].alias,
            "path": str(path),
            "ctx_per_slot": srv.n_ctx,
            "parallel": srv.parallel,
            "threads": _threads(srv),
            "batch_size": srv.batch_size,
        }
        for choice, path in model_paths.items()
    ]
    return {
        "host": srv.host,
        "port": srv.port,
        "binary": str(llama_server_binary()),
        "startup_timeout_s": srv.startup_timeout_s,
        "models": models,
    }


def probe(
    host: str, port: int, aliases: Sequence[str], *, timeout_s: float | None = None
) -> tuple[ProbeState, str]:
    """What answers at ``host:port``: nothing, our models, a busy llama.cpp server, or something else."""
    base = f"http://{host}:{port}"
    with httpx.Client(timeout=timeout_s or PROBE_TIMEOUT_S, trust_env=False) as client:
        try:
            resp = client.get(f"{base}/v1/models")
        except httpx.ConnectError:
            return "free", "nothing listens"
        except httpx.TimeoutException:
            # The router answers /v1/models from its own table, even while the models compute.
            return "foreign", "it does not answer HTTP"
        except httpx.HTTPError as exc:
            return "foreign", f"not an HTTP model server ({type(exc).__name__})"
    try:
        served = [m["id"] for m in resp.json()["data"]]
    except (ValueError, KeyError, TypeError):
        return "foreign", f"GET /v1/models answered {resp.status_code} without a model list"
    missing = [a for a in aliases if a not in served]
    if missing:
        return "foreign", f"a model server without {missing} (serves {served})"
    return "healthy", f"serves {served}"


def _handle(config: LabConfig, *, pid: int | None, started: bool) -> ServerHandle:
    srv, log = config.server, server_files(config.server)[1]
    return ServerHandle(srv.base_url, srv.host, srv.port, log, served_aliases(config), pid, started)


def default_command(config_path: Path) -> list[str]:
    """The server command: the router that runs one ``llama-server`` per embedded model."""
    return [sys.executable, "-m", "subagent_lab.local_models.llama_server", "--config_file", str(config_path)]


def _check_llama_installed() -> None:
    binary = llama_server_binary()
    if not (binary.is_file() and os.access(binary, os.X_OK)):
        raise ServerError(
            f"the embedded server needs llama.cpp's llama-server at {binary}, which is missing; run "
            f"scripts/setup.sh, which builds it (about 10 minutes on 2 cores, without the AMX kernels "
            f"that crash on some CPUs), or set SUBAGENT_LAB_LLAMA_SERVER to an existing binary"
        )


def prepare_server(config: LabConfig) -> list[str]:
    """Check llama-server, assemble the weights, write the server config; returns the command."""
    _check_llama_installed()
    cfg_path = server_files(config.server)[0]
    cfg_path.parent.mkdir(parents=True, exist_ok=True)
    settings = server_settings(config, weights.install_all())
    cfg_path.write_text(json.dumps(settings, indent=2), encoding="utf-8")
    return default_command(cfg_path)


def run_foreground(config: LabConfig) -> None:
    """Replace this process by the server (logs to the terminal); returns only on an error."""
    srv = config.server
    state, detail = probe(srv.host, srv.port, served_aliases(config))
    if state != "free":
        raise ServerError(f"port {srv.port} on {srv.host} is taken ({detail}); see `subagent-lab status`")
    command = prepare_server(config)
    info = {"pid": os.getpid(), "host": srv.host, "port": srv.port, "log": None, "command": command}
    server_files(srv)[2].write_text(json.dumps(info), encoding="utf-8")
    os.execv(command[0], command)


def ensure_server(
    config: LabConfig,
    *,
    start: bool = True,
    command: Sequence[str] | None = None,
    timeout_s: float | None = None,
    stop_at_exit: bool = True,
) -> ServerHandle:
    """A healthy embedded server: reuse the one at host:port, or start it (``start``).

    ``command`` replaces the server command (the generated config path is then not passed);
    ``stop_at_exit`` stops a server started here when this interpreter exits. Raises
    ``ServerError`` for a busy port, a failed start (quoting the log) or a timeout.
    """
    srv = config.server
    managed_models(config)
    aliases = served_aliases(config)
    timeout = timeout_s or srv.startup_timeout_s
    _, log, pid_file = server_files(srv)
    with port_lock(srv):
        state, detail = probe(srv.host, srv.port, aliases)
        pid = read_pid(pid_file).get("pid")
        if state == "busy" and isinstance(pid, int) and alive(pid):
            # Our own server, in the middle of a request: don't queue behind it just to list models.
            return _handle(config, pid=pid, started=False)
        if state == "busy":
            state, detail = probe(srv.host, srv.port, aliases, timeout_s=timeout)
        if state == "healthy":
            return _handle(config, pid=pid, started=False)
        if state in ("foreign", "busy"):
            raise ServerError(
                f"port {srv.port} on {srv.host} is in use by another program ({detail}); stop it, or "
                f"set server.port in {config.source or 'profiles.yaml'} to a free port"
            )
        if not start:
            raise ServerError(default_endpoint_error(srv.base_url, log if log.exists() else None))
        if command is None:
            command = prepare_server(config)
        proc = spawn(list(command), log, pid_file, srv, watch_parent=stop_at_exit)
        try:
            _wait_ready(proc, srv, aliases, log, timeout)
        except BaseException:
            terminate(proc.pid, proc)
            if read_pid(pid_file).get("pid") == proc.pid:
                pid_file.unlink(missing_ok=True)
            raise
        STARTED[srv.port] = proc
        if stop_at_exit:
            atexit.register(_stop_started, config, proc.pid)
        return _handle(config, pid=proc.pid, started=True)


def _wait_ready(
    proc: subprocess.Popen[bytes], srv: ServerConfig, aliases: Sequence[str], log: Path, timeout: float
) -> None:
    deadline = time.monotonic() + timeout
    while True:
        code = proc.poll()
        if code is not None:
            raise ServerError(
                f"the model server (pid {proc.pid}) exited with code {code} while starting on "
                f"{srv.host}:{srv.port}; log {log}:\n{log_tail(log)}"
            )
        state, detail = probe(srv.host, srv.port, aliases)
        if state == "healthy":
            return
        if state == "foreign":
            raise ServerError(f"port {srv.port} answered as another program ({detail}) while starting")
        if time.monotonic() > deadline:
            raise ServerError(
                f"the model server did not become ready within {timeout:.0f} s on {srv.host}:{srv.port}; "
                f"log {log}:\n{log_tail(log)}"
            )
        time.sleep(0.25)


def stop_server(config: LabConfig) -> bool:
    """Stop the embedded server of ``config`` (pid file, else its command line); False if none ran."""
    pid_file = server_files(config.server)[2]
    pid = running_pid(config)
    if pid is None:
        pid_file.unlink(missing_ok=True)
        return False
    proc = next((p for p in STARTED.values() if p.pid == pid), None)
    terminate(pid, proc)
    STARTED.pop(config.server.port, None)
    pid_file.unlink(missing_ok=True)
    return True


def _stop_started(config: LabConfig, pid: int) -> None:
    # Exit hook: only the server this process started, and only if it is still that one.
    if read_pid(server_files(config.server)[2]).get("pid") == pid:
        stop_server(config)


def server_status(config: LabConfig) -> dict[str, Any]:
    """State of the embedded server: url, state (``healthy``/``busy``/``free``/``foreign``), pid, log."""
    srv = config.server
    cfg_path, log, _ = server_files(srv)
    state, detail = probe(srv.host, srv.port, served_aliases(config))
    pid = running_pid(config)
    return {
        "url": srv.base_url,
        "state": state,
        "detail": detail,
        "pid": pid,
        "log": str(log),
        "config_file": str(cfg_path),
        "aliases": list(served_aliases(config)),
        "managed_models": managed_models(config, strict=False),
    }
