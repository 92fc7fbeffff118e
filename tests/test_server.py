"""The embedded server's lifecycle: reuse, busy port, start-up failure, stop; one live test.

The unit tests use stand-ins (a stdlib HTTP server, a tiny subprocess) on free ports and a
temporary cache directory; only the ``live`` test loads the real models.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from subagent_lab.cli.main import main as cli_main
from subagent_lab.config.profiles import LabConfig, ModelConfig, ServerConfig
from subagent_lab.local_models import server, weights
from subagent_lab.local_models.llama_server import backend_command
from subagent_lab.local_models.server import ServerError

ALIASES = [spec.alias for spec in weights.SPECS.values()]

FAKE_SERVER = """
import json, sys
from http.server import BaseHTTPRequestHandler, HTTPServer
port, aliases = int(sys.argv[1]), sys.argv[2].split(",")
class Handler(BaseHTTPRequestHandler):
    def do_GET(self):
        body = json.dumps({"object": "list", "data": [{"id": a} for a in aliases]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *args):
        pass
print("fake server listening", flush=True)
HTTPServer(("127.0.0.1", port), Handler).serve_forever()
"""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def lab(config: LabConfig, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> LabConfig:
    """The repo's configuration on a free port, with a private cache directory."""
    monkeypatch.setenv("SUBAGENT_LAB_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(server, "PROBE_TIMEOUT_S", 0.5)
    return config.model_copy(update={"server": ServerConfig(port=free_port(), startup_timeout_s=20)})


class _Models(BaseHTTPRequestHandler):
    aliases: list[str] = ALIASES

    def do_GET(self) -> None:
        body = json.dumps({"object": "list", "data": [{"id": a} for a in self.aliases]}).encode()
        self.send_response(200 if self.path == "/v1/models" else 404)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def http_models(lab: LabConfig) -> Iterator[type[_Models]]:
    """An in-thread HTTP server at the lab's port answering ``/v1/models``; set ``.aliases``."""
    handler = type("Handler", (_Models,), {"aliases": list(ALIASES)})
    httpd = ThreadingHTTPServer((lab.server.host, lab.server.port), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield handler
    httpd.shutdown()
    httpd.server_close()


def must_not_start() -> list[str]:
    return [sys.executable, "-c", "raise SystemExit('a server was started although one was running')"]


def test_reuses_a_healthy_server(lab: LabConfig, http_models: type[_Models]) -> None:
    handle = server.ensure_server(lab, command=must_not_start())
    assert handle.started is False
    assert handle.url == f"http://127.0.0.1:{lab.server.port}/v1"
    assert handle.aliases == tuple(ALIASES)
    assert server.server_status(lab)["state"] == "healthy"


def test_server_without_our_models_counts_as_busy_port(lab: LabConfig, http_models: type[_Models]) -> None:
    http_models.aliases = ["some-other-model"]
    with pytest.raises(
        ServerError, match=rf"port {lab.server.port} on 127.0.0.1 is in use.*some-other-model"
    ):
        server.ensure_server(lab, command=must_not_start())


def test_busy_port_held_by_a_non_http_program(lab: LabConfig) -> None:
    with socket.socket() as sock:
        sock.bind((lab.server.host, lab.server.port))
        sock.listen()
        with pytest.raises(ServerError, match=rf"port {lab.server.port} .* in use by another program"):
            server.ensure_server(lab, command=must_not_start())


def test_startup_failure_quotes_the_log(lab: LabConfig) -> None:
    crash = [sys.executable, "-c", "import sys; print('boom: bad model file', file=sys.stderr); sys.exit(3)"]
    with pytest.raises(ServerError) as info:
        server.ensure_server(lab, command=crash)
    message = str(info.value)
    assert "exited with code 3" in message
    assert "boom: bad model file" in message
    assert str(server.log_path(lab)) in message
    assert not (server.server_dir() / f"server-{lab.server.port}.pid").exists()


def test_startup_timeout_kills_the_process(lab: LabConfig) -> None:
    sleeper = [sys.executable, "-c", "import time; print('loading...', flush=True); time.sleep(60)"]
    with pytest.raises(ServerError, match=r"did not become ready within 1 s(.|\n)*loading\.\.\."):
        server.ensure_server(lab, command=sleeper, timeout_s=1)
    assert server.stop_server(lab) is False


def test_no_start_gives_the_url_and_how_to_start(lab: LabConfig) -> None:
    with pytest.raises(
        ServerError, match=rf"127.0.0.1:{lab.server.port}/v1 is not answering.*subagent-lab serve"
    ):
        server.ensure_server(lab, start=False)


def test_start_reuse_and_stop_lifecycle(lab: LabConfig, tmp_path: Path) -> None:
    script = tmp_path / "fake_server.py"
    script.write_text(FAKE_SERVER)
    # --config_file marks it as a server process for the pid-recycling guard.
    command = [sys.executable, str(script), str(lab.server.port), ",".join(ALIASES), "--config_file", "x"]
    handle = server.ensure_server(lab, command=command, stop_at_exit=False)
    try:
        assert handle.started is True and handle.pid is not None
        assert "fake server listening" in handle.log_path.read_text()
        pid_info = json.loads((server.server_dir() / f"server-{lab.server.port}.pid").read_text())
        assert pid_info["pid"] == handle.pid
        again = server.ensure_server(lab, command=must_not_start())
        assert again.started is False and again.pid == handle.pid
        status = server.server_status(lab)
        assert status["state"] == "healthy" and status["pid"] == handle.pid
    finally:
        assert server.stop_server(lab) is True
        for suffix in (".json", ".log", ".log.1", ".lock"):  # one-off port: leave no files behind
            (server.server_dir() / f"server-{lab.server.port}{suffix}").unlink(missing_ok=True)
    with pytest.raises(ProcessLookupError):
        os.kill(handle.pid, 0)
    assert server.stop_server(lab) is False
    assert server.server_status(lab)["state"] == "free"


ORPHAN = """
import os, subprocess, sys, time
code = f"from subagent_lab.local_models.llama_server import exit_with_parent; exit_with_parent({os.getpid()})"
child = subprocess.Popen([sys.executable, "-c", code])
print(child.pid, flush=True)
time.sleep(60)
"""


def test_server_stops_when_its_parent_is_killed(tmp_path: Path) -> None:
    """The watchdog behind ``stop_at_exit``: atexit does not run when the parent is killed."""
    parent = subprocess.Popen([sys.executable, "-c", ORPHAN], stdout=subprocess.PIPE, text=True)
    assert parent.stdout is not None
    child = int(parent.stdout.readline())
    parent.kill()
    parent.wait()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            os.kill(child, 0)
        except ProcessLookupError:
            return
        time.sleep(0.1)
    os.kill(child, signal.SIGKILL)
    pytest.fail("the orphaned child did not stop itself")


def test_stop_finds_a_server_whose_pid_file_was_lost(lab: LabConfig, tmp_path: Path) -> None:
    script = tmp_path / "fake_server.py"
    script.write_text(FAKE_SERVER)
    cfg_path = server.server_dir() / f"server-{lab.server.port}.json"
    command = [
        sys.executable,
        str(script),
        str(lab.server.port),
        ",".join(ALIASES),
        "--config_file",
        str(cfg_path),
    ]
    handle = server.ensure_server(lab, command=command, stop_at_exit=False)
    (server.server_dir() / f"server-{lab.server.port}.pid").unlink()
    assert server.server_status(lab)["pid"] == handle.pid
    assert server.stop_server(lab) is True
    assert server.server_status(lab)["state"] == "free"


def test_stale_pid_file_is_ignored(lab: LabConfig) -> None:
    server.server_dir().mkdir(parents=True)
    (server.server_dir() / f"server-{lab.server.port}.pid").write_text(json.dumps({"pid": 2**22 + 12345}))
    assert server.stop_server(lab) is False
    assert server.server_status(lab)["pid"] is None


def test_server_settings_for_both_models(lab: LabConfig) -> None:
    paths = {"light": Path("/m/light.gguf"), "main": Path("/m/main.gguf")}
    settings = server.server_settings(lab, paths)
    assert settings["port"] == lab.server.port
    assert settings["binary"] == str(server.llama_server_binary())
    assert [m["alias"] for m in settings["models"]] == ALIASES
    for model in settings["models"]:
        assert model["ctx_per_slot"] == lab.server.n_ctx and model["parallel"] == lab.server.parallel
        assert model["threads"] >= 1
    custom = lab.model_copy(update={"server": ServerConfig(n_threads=3, parallel=4)})
    assert {m["threads"] for m in server.server_settings(custom, paths)["models"]} == {3}


def test_backend_command_gives_every_slot_the_configured_context() -> None:
    model = {"path": "/m/x.gguf", "alias": "a", "ctx_per_slot": 16384, "parallel": 2, "threads": 2}
    command = backend_command("/bin/llama-server", model, 9999)
    assert command[command.index("--ctx-size") + 1] == str(16384 * 2)  # split evenly over the slots
    assert command[command.index("--parallel") + 1] == "2"
    assert "--jinja" in command and command[command.index("--alias") + 1] == "a"


def test_missing_llama_server_binary_names_the_fix(
    lab: LabConfig, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SUBAGENT_LAB_LLAMA_SERVER", str(tmp_path / "nope" / "llama-server"))
    with pytest.raises(ServerError, match=r"llama-server at .*nope.*scripts/setup.sh"):
        server.ensure_server(lab)


def test_only_default_endpoints_are_managed(lab: LabConfig) -> None:
    assert server.managed_models(lab) == {"light": ALIASES[0], "main": ALIASES[1]}
    external = ModelConfig(model="gpt-x", base_url="http://example.invalid/v1")
    assert server.managed_models(lab.model_copy(update={"models": {"main": external}})) == {}
    unknown = ModelConfig(model="not-embedded")
    with pytest.raises(ServerError, match="not embedded models"):
        server.managed_models(lab.model_copy(update={"models": {"main": unknown}}))


def test_default_endpoint_error_names_url_and_log(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_text("line 1\nSegmentation fault\n")
    message = server.default_endpoint_error("http://127.0.0.1:8765/v1", log, tail_lines=1)
    assert "http://127.0.0.1:8765/v1" in message and str(log) in message
    assert message.endswith("Segmentation fault")


def test_cli_reports_errors_in_one_line(
    lab: LabConfig, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli_main(["models", "path", "light"]) == 2
    assert "models install" in capsys.readouterr().err
    assert cli_main(["status"]) in (0, 1)  # the repo's port: healthy or not, never an error


def _live_ready() -> str | None:
    if not server.llama_server_binary().is_file():
        return f"llama-server is not built at {server.llama_server_binary()} (run scripts/setup.sh)"
    for spec in weights.SPECS.values():
        if not weights.is_verified(spec):
            try:
                weights.find_parts(spec)
            except weights.WeightsError as exc:
                return str(exc)
    return None


@pytest.mark.live
def test_live_embedded_server_chat(config: LabConfig) -> None:
    reason = _live_ready()
    if reason:
        pytest.skip(reason)
    from openai import OpenAI

    lab = config.model_copy(update={"server": ServerConfig(port=free_port(), startup_timeout_s=300)})
    started = time.monotonic()
    handle = server.ensure_server(lab)
    try:
        assert handle.started and time.monotonic() - started < 300
        client = OpenAI(base_url=handle.url, api_key="none", max_retries=0)
        assert {m.id for m in client.models.list().data} >= set(ALIASES)
        reply = client.chat.completions.create(
            model=ALIASES[0],
            messages=[{"role": "user", "content": "Reply with the single word: pong"}],
            temperature=0,
            seed=0,
            max_tokens=8,
        )
        assert reply.choices[0].message.content
        assert reply.usage is not None and reply.usage.prompt_tokens > 0 and reply.usage.completion_tokens > 0
        # A stock OpenAI-tools client gets native tool calls (llama-server parses Qwen's <tool_call>).
        grep = {
            "type": "function",
            "function": {
                "name": "grep",
                "description": "Search the repository for a literal string.",
                "parameters": {
                    "type": "object",
                    "properties": {"pattern": {"type": "string"}},
                    "required": ["pattern"],
                },
            },
        }
        called = client.chat.completions.create(
            model=ALIASES[1],
            messages=[
                {"role": "user", "content": "Use the grep tool to search the repository for 'def load'."}
            ],
            tools=[grep],
            tool_choice="required",
            temperature=0,
            max_tokens=64,
        )
        calls = called.choices[0].message.tool_calls or []
        assert calls and calls[0].function.name == "grep"
        assert "pattern" in json.loads(calls[0].function.arguments)
    finally:
        assert server.stop_server(lab) is True
        for suffix in (".json", ".log", ".log.1", ".lock"):  # one-off port: leave no files behind
            (server.server_dir() / f"server-{lab.server.port}{suffix}").unlink(missing_ok=True)


def test_router_drops_the_backend_request_when_the_client_hangs_up() -> None:
    """A killed sweep must not leave llama-server computing answers nobody will read."""
    from subagent_lab.local_models.llama_server import forward

    class Slow(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            time.sleep(5)
            self.send_response(200)
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    backend = ThreadingHTTPServer(("127.0.0.1", 0), Slow)
    threading.Thread(target=backend.serve_forever, daemon=True).start()
    ours, theirs = socket.socketpair()
    theirs.close()  # the client went away
    started = time.monotonic()
    try:
        status, _, body = forward(
            backend.server_address[1], "POST", "/x", b"{}", {}, timeout_s=30, client=ours
        )
    finally:
        ours.close()
        backend.shutdown()
    assert status == 499 and b"client went away" in body
    assert time.monotonic() - started < 4
