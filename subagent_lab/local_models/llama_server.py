"""The embedded engine: one llama.cpp ``llama-server`` per model behind one router port.

Run as ``python -m subagent_lab.local_models.llama_server --config_file F``. It starts a ``llama-server``
process for each model in ``F`` (each on a private loopback port, with its own parallel slots and
prompt cache), waits until every one is healthy, then serves one OpenAI-compatible endpoint that
forwards each request to the model it names: ``model`` in a JSON body, else a ``?model=`` query
(``/tokenize``, ``/apply-template``, ``/metrics``). ``GET /v1/models`` and ``/health`` answer for
all models. One URL serves both aliases, as the previous engine did, so clients and the lifecycle
code (pid file, health probe, stop) stay the same.

The router is a thin byte pipe (one thread per connection): it adds about a millisecond to calls
that take seconds. When ``PARENT_ENV`` names a pid, the router stops itself and its backends once
that process is gone (``atexit`` cannot run when the parent is killed).
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import select
import signal
import socket
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

PARENT_ENV = "SUBAGENT_LAB_SERVER_PARENT"
"""When set to a pid, the server stops itself once that process is gone."""
BACKEND_TIMEOUT_S = 3600.0
_HOP_HEADERS = {"connection", "keep-alive", "transfer-encoding", "content-length", "host"}


def backend_command(binary: str, model: dict[str, Any], port: int) -> list[str]:
    """The ``llama-server`` command line for one model of the router config."""
    slots = int(model["parallel"])
    return [
        binary,
        "--model", str(model["path"]),
        "--alias", str(model["alias"]),
        "--host", "127.0.0.1",
        "--port", str(port),
        # llama-server splits --ctx-size evenly over the slots: each slot gets ctx_per_slot.
        "--ctx-size", str(int(model["ctx_per_slot"]) * slots),
        "--parallel", str(slots),
        "--threads", str(model["threads"]),
        "--threads-batch", str(model["threads"]),
        "--batch-size", str(model.get("batch_size", 512)),
        "--jinja",  # the GGUF's chat template, with native tool-call parsing (Qwen's <tool_call>)
        "--metrics",
        "--no-webui",
        "--cache-reuse", "256",  # reuse a cached prefix chunk even after a compaction edit
        "--seed", "0",
    ]  # fmt: skip


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class _Backends:
    """The llama-server processes, by alias."""

    def __init__(self, config: dict[str, Any]) -> None:
        self.ports: dict[str, int] = {}
        self.procs: list[subprocess.Popen[bytes]] = []
        for model in config["models"]:
            port = _free_port()
            command = backend_command(config["binary"], model, port)
            print(f"[router] starting {model['alias']}: {' '.join(command)}", flush=True)
            self.procs.append(subprocess.Popen(command, stdin=subprocess.DEVNULL))
            self.ports[model["alias"]] = port
        self.default = next(iter(self.ports))

    def wait_healthy(self, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        pending = dict(self.ports)
        while pending:
            for proc in self.procs:
                if proc.poll() is not None:
                    raise SystemExit(f"[router] a llama-server exited with code {proc.returncode} at start")
            for alias, port in list(pending.items()):
                status, _, _ = forward(port, "GET", "/health", b"", {}, timeout_s=2.0)
                if status == 200:
                    print(f"[router] {alias} ready on 127.0.0.1:{port}", flush=True)
                    pending.pop(alias)
            if time.monotonic() > deadline:
                raise SystemExit(f"[router] {sorted(pending)} not healthy within {timeout_s:.0f} s")
            time.sleep(0.2)

    def stop(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.terminate()
        for proc in self.procs:
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()


def _gone(client: socket.socket) -> bool:
    """Whether the client closed its connection (readable with nothing to read)."""
    try:
        return client.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) == b""
    except BlockingIOError:
        return False
    except OSError:
        return True


def forward(
    port: int,
    method: str,
    path: str,
    body: bytes,
    headers: dict[str, str],
    *,
    timeout_s: float,
    client: socket.socket | None = None,
) -> tuple[int, list[tuple[str, str]], bytes]:
    """One request to a backend; (status, headers, body), status 502 when it cannot be reached.

    With ``client``, a client that hangs up while the backend computes closes the backend
    connection too, and llama-server then stops that generation instead of finishing it for nobody.
    """
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout_s)
    try:
        conn.request(method, path, body=body or None, headers=headers)
        deadline = time.monotonic() + timeout_s
        while client is not None and conn.sock is not None:
            ready, _, _ = select.select([conn.sock, client], [], [], 1.0)
            if conn.sock in ready:
                break
            if (client in ready and _gone(client)) or time.monotonic() > deadline:
                message = json.dumps({"error": {"message": "client went away", "code": 499}})
                return 499, [("Content-Type", "application/json")], message.encode()
        resp = conn.getresponse()
        return resp.status, resp.getheaders(), resp.read()
    except (OSError, http.client.HTTPException) as exc:
        message = json.dumps({"error": {"message": f"backend on port {port} failed: {exc}", "code": 502}})
        return 502, [("Content-Type", "application/json")], message.encode()
    finally:
        conn.close()


def _model_of(path: str, body: bytes) -> str | None:
    query = parse_qs(urlsplit(path).query).get("model")
    if query:
        return query[0]
    if body[:1] == b"{":
        try:
            value = json.loads(body).get("model")
        except (ValueError, AttributeError):
            return None
        return value if isinstance(value, str) else None
    return None


def make_handler(backends: _Backends) -> type[BaseHTTPRequestHandler]:
    """The router's request handler over ``backends``."""

    class Router(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        # A reply leaves in one write (the server flushes after each request): headers and body as
        # two small writes on a kept-alive connection meet Nagle's algorithm and the client's
        # delayed ACK, ~40 ms on every call.
        wbufsize = 1 << 16

        def _reply(self, status: int, headers: list[tuple[str, str]], body: bytes) -> None:
            self.send_response(status)
            for name, value in headers:
                if name.lower() not in _HOP_HEADERS:
                    self.send_header(name, value)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def _json(self, status: int, value: Any) -> None:
            self._reply(status, [("Content-Type", "application/json")], json.dumps(value).encode())

        def _handle(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else b""
            route = urlsplit(self.path).path
            if route in ("/v1/models", "/models") and self.command == "GET":
                data = [
                    {"id": alias, "object": "model", "owned_by": "subagent_lab"} for alias in backends.ports
                ]
                return self._json(200, {"object": "list", "data": data})
            if route == "/health":
                states = {
                    a: forward(p, "GET", "/health", b"", {}, timeout_s=5)[0]
                    for a, p in backends.ports.items()
                }
                ok = all(code == 200 for code in states.values())
                return self._json(200 if ok else 503, {"status": "ok" if ok else "loading", "models": states})
            alias = _model_of(self.path, body) or backends.default
            if alias not in backends.ports:
                return self._json(
                    404, {"error": {"message": f"model {alias!r} is not served here", "code": 404}}
                )
            headers = {k: v for k, v in self.headers.items() if k.lower() not in _HOP_HEADERS}
            status, out_headers, out = forward(
                backends.ports[alias],
                self.command,
                self.path,
                body,
                headers,
                timeout_s=BACKEND_TIMEOUT_S,
                client=self.connection,
            )
            self._reply(status, out_headers, out)

        do_GET = do_POST = _handle

        def log_message(self, format: str, *args: Any) -> None:
            pass  # the backends log every request with timings

    return Router


def exit_with_parent(parent: int) -> None:
    """Stop this server gracefully (SIGTERM to itself) once process ``parent`` is gone."""
    while os.getppid() == parent:
        time.sleep(1.0)
    os.kill(os.getpid(), signal.SIGTERM)


def main(argv: list[str] | None = None) -> None:
    """Start the backends of ``--config_file``, then route requests until SIGTERM."""
    parser = argparse.ArgumentParser(prog="python -m subagent_lab.local_models.llama_server")
    parser.add_argument("--config_file", required=True)
    args = parser.parse_args(argv)
    with open(args.config_file, encoding="utf-8") as fh:
        config = json.load(fh)
    backends = _Backends(config)

    def _stop(signum: int, frame: object) -> None:
        backends.stop()
        raise SystemExit(0)

    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    parent = os.environ.get(PARENT_ENV)
    if parent:
        threading.Thread(target=exit_with_parent, args=(int(parent),), daemon=True).start()
    try:
        backends.wait_healthy(float(config.get("startup_timeout_s", 300)))
        httpd = ThreadingHTTPServer((config["host"], int(config["port"])), make_handler(backends))
        httpd.daemon_threads = True
        print(f"[router] serving {sorted(backends.ports)} on {config['host']}:{config['port']}", flush=True)
        httpd.serve_forever()
    finally:
        backends.stop()


if __name__ == "__main__":
    main(sys.argv[1:])
