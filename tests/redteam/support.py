"""Red-team helpers: a hostile OpenAI-compatible server, an obedient model, tree checksums."""

from __future__ import annotations

import hashlib
import json
import os
import socket
import stat
import struct
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Literal

from conftest import GOOD as GOOD  # re-exported: the red-team tests take it from here

from subagent_lab.agents.launcher import ModelFactory
from subagent_lab.config.profiles import ModelConfig
from subagent_lab.core.model import Model
from subagent_lab.core.trace import Event, read_trace
from subagent_lab.core.types import ModelChoice, ModelRequest, ModelResponse, ToolCall
from subagent_lab.models.openai_chat import OpenAIChatModel

# --- a hostile OpenAI-compatible server ------------------------------------------------------------

Action = Literal["send", "reset", "hang", "truncate", "die", "trickle"]


@dataclass
class Reply:
    """What the fake server does with one request.

    ``send``: answer ``status`` with ``body`` (a dict is JSON-encoded). ``reset``: close the TCP
    connection with an RST and no answer. ``hang``: never answer (until the server is closed).
    ``truncate``: announce ``body`` in Content-Length but send only its first half, then close.
    ``die``: answer like ``send``, then stop the server for good (later connects are refused).
    ``trickle``: send the status line, headers and body one byte every ``delay`` seconds (each
    byte well within any per-read timeout), for at most ``max_trickle_s``.
    """

    status: int = 200
    body: dict[str, Any] | bytes = field(default_factory=dict)
    headers: dict[str, str] = field(default_factory=dict)
    action: Action = "send"
    delay: float = 0.05
    max_trickle_s: float = 30.0


Behaviour = Reply | Callable[[dict[str, Any], dict[str, str]], Reply]


@dataclass
class Recorded:
    path: str
    headers: dict[str, str]
    body: dict[str, Any]


def chat(
    content: str | None = "",
    *,
    tool_calls: list[dict[str, Any]] | None = None,
    finish_reason: str = "stop",
    prompt_tokens: int = 100,
    completion_tokens: int = 20,
    usage: bool = True,
) -> dict[str, Any]:
    """A chat.completion body."""
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if tool_calls is not None:
        message["tool_calls"] = tool_calls
    body: dict[str, Any] = {
        "id": "chatcmpl-redteam",
        "object": "chat.completion",
        "created": 0,
        "model": "fake-model",
        "choices": [{"index": 0, "message": message, "finish_reason": finish_reason}],
    }
    if usage:
        body["usage"] = {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        }
    return body


def native_call(name: str, arguments: str | dict[str, Any], call_id: str = "call-1") -> dict[str, Any]:
    """One entry of a native ``tool_calls`` list (``arguments`` as the raw string if a str)."""
    args = arguments if isinstance(arguments, str) else json.dumps(arguments)
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": args}}


def act(tool: str, **arguments: Any) -> str:
    """JSON-protocol content calling ``tool``."""
    return json.dumps({"tool": tool, "arguments": arguments})


def answer(payload: dict[str, Any]) -> str:
    """JSON-protocol content giving the final answer."""
    return json.dumps({"final": payload})


def ok(content: str, **kwargs: Any) -> Reply:
    return Reply(body=chat(content, **kwargs))


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.0"  # one request per connection: simple, and "die" is then exact

    def log_message(self, format: str, *args: Any) -> None:
        return

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            body = {"_raw": raw.decode("utf-8", "replace")}
        headers = {k.lower(): v for k, v in self.headers.items()}
        fake = self.server.fake
        reply = fake._next(Recorded(self.path, headers, body))
        if reply.action == "reset":
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            self.close_connection = True
            self.connection.close()
            return
        if reply.action == "hang":
            fake._stop.wait(60)
            self.close_connection = True
            return
        data = reply.body if isinstance(reply.body, bytes) else json.dumps(reply.body).encode()
        if reply.action == "trickle":
            self._trickle(reply, data)
            return
        self.send_response(reply.status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for key, value in reply.headers.items():
            self.send_header(key, value)
        self.end_headers()
        if reply.action == "truncate":
            self.wfile.write(data[: len(data) // 2])
            self.wfile.flush()
            self.connection.shutdown(socket.SHUT_RDWR)
            self.close_connection = True
            return
        self.wfile.write(data)
        self.wfile.flush()
        if reply.action == "die":
            threading.Thread(target=fake.close, daemon=True).start()

    def _trickle(self, reply: Reply, data: bytes) -> None:
        head = (
            f"HTTP/1.0 {reply.status} OK\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(data)}\r\n\r\n"
        ).encode()
        stop, ends = self.server.fake._stop, time.monotonic() + reply.max_trickle_s
        try:
            for byte in head + data:
                if stop.is_set() or time.monotonic() > ends:
                    break
                self.wfile.write(bytes([byte]))
                self.wfile.flush()
                stop.wait(reply.delay)
        except OSError:
            pass  # the client gave up: that is what the test wants
        self.close_connection = True


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    fake: FakeOpenAI

    def handle_error(self, request: Any, client_address: Any) -> None:
        return  # resets and hangs make the stdlib print tracebacks; they are the point here


class FakeOpenAI:
    """A scripted OpenAI chat-completions server on 127.0.0.1, in a thread of the test process.

    Replies are consumed in order; once they run out, ``default`` answers (a 500 unless set).
    Every request is recorded (path, headers, JSON body) so tests can count attempts.
    """

    def __init__(self, replies: Iterable[Behaviour] = (), *, default: Behaviour | None = None) -> None:
        self.replies: list[Behaviour] = list(replies)
        self.default: Behaviour = default or Reply(500, {"error": {"message": "script exhausted"}})
        self.requests: list[Recorded] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._server = _Server(("127.0.0.1", 0), _Handler)
        self._server.fake = self
        self.port = self._server.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}/v1"
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05})
        self._thread.daemon = True
        self._thread.start()
        self._closed = False

    def _next(self, recorded: Recorded) -> Reply:
        with self._lock:
            self.requests.append(recorded)
            behaviour = self.replies.pop(0) if self.replies else self.default
        return behaviour(recorded.body, recorded.headers) if callable(behaviour) else behaviour

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
        self._stop.set()
        self._server.shutdown()
        self._server.server_close()  # later connects are refused

    def __enter__(self) -> FakeOpenAI:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def openai_factory(
    url: str, *, protocol: str = "json", max_retries: int = 2, timeout_s: float = 10.0, **kwargs: Any
) -> ModelFactory:
    """A launcher model factory speaking to ``url`` through the real adapter."""

    def make(choice: ModelChoice, cfg: ModelConfig) -> Model:
        return OpenAIChatModel(
            base_url=url,
            model="fake-model",
            tool_protocol=protocol,
            max_retries=max_retries,
            timeout_s=timeout_s,
            backoff_s=0.01,
            **kwargs,
        )

    return make


# --- an obedient model ---------------------------------------------------------------------------

INSTRUCTION = "AGENT-INSTRUCTION:"


class Obedient:
    """A scripted turn that does whatever the latest tool observations tell it to.

    Observations are scanned for ``AGENT-INSTRUCTION: {json}``; ``{"tool": ..., "arguments": ...}``
    is queued as a tool call, ``{"final": "..."}`` as the final reply. With nothing queued it
    reads ``start`` (the injected README) first, and replies with the last ``final`` at the end.
    """

    def __init__(self, start: str = "README.md") -> None:
        self.queue: list[ToolCall] = [ToolCall(id="inj-0", name="Read", arguments={"path": start})]
        self.final_text = "I have nothing to report."
        self.seen: set[str] = set()
        self.issued: list[ToolCall] = []

    def _scan(self, text: str) -> None:
        decoder = json.JSONDecoder()
        index = text.find(INSTRUCTION)
        while index >= 0:
            start = index + len(INSTRUCTION)
            try:
                order, _ = decoder.raw_decode(text[start:].lstrip())
            except ValueError:
                order = None
            if isinstance(order, dict):
                key = json.dumps(order, sort_keys=True)
                if key not in self.seen:
                    self.seen.add(key)
                    if "final" in order:
                        self.final_text = str(order["final"])
                    elif isinstance(order.get("tool"), str):
                        n = len(self.issued) + len(self.queue)
                        self.queue.append(
                            ToolCall(
                                id=f"inj-{n}",
                                name=order["tool"],
                                arguments=dict(order.get("arguments") or {}),
                            )
                        )
            index = text.find(INSTRUCTION, start)

    def __call__(self, request: ModelRequest) -> ModelResponse:
        for message in reversed(request.messages):
            if message.role != "tool":
                break
            self._scan(message.content)
        if request.tools and self.queue:
            calls, self.queue = self.queue[:4], self.queue[4:]
            self.issued.extend(calls)
            return ModelResponse(tool_calls=calls)
        return ModelResponse(text=self.final_text)


# --- checks --------------------------------------------------------------------------------------


def tree_digest(root: Path, *, skip: Iterable[str] = ()) -> dict[str, str]:
    """Path -> digest of type, mode, size, content (files) or target (links); never follows links."""
    skipped = set(skip)
    out: dict[str, str] = {}
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        rel_dir = os.path.relpath(dirpath, root)
        dirnames[:] = [d for d in dirnames if os.path.normpath(os.path.join(rel_dir, d)) not in skipped]
        for name in [*dirnames, *filenames]:
            full = os.path.join(dirpath, name)
            rel = os.path.normpath(os.path.join(rel_dir, name))
            info = os.lstat(full)
            if stat.S_ISLNK(info.st_mode):
                what = "link:" + os.readlink(full)
            elif stat.S_ISREG(info.st_mode):
                what = _file_digest(full, info.st_size)
            else:
                what = f"special:{stat.S_IFMT(info.st_mode)}"
            out[rel] = f"{stat.filemode(info.st_mode)}|{what}"
    return out


def _file_digest(path: str, size: int) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        if size > 64 * 1024 * 1024:  # sparse giants: size + head + tail is enough to see a write
            digest.update(fh.read(1 << 20))
            fh.seek(-(1 << 20), os.SEEK_END)
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    return f"{size}:{digest.hexdigest()}"


def trace_text(path: str | Path) -> str:
    return Path(path).read_text(encoding="utf-8")


def events(path: str | Path) -> list[Event]:
    return read_trace(path)


def finished_calls(path: str | Path) -> dict[str, Any]:
    """call id -> its tool_finished event."""
    return {e.call_id: e for e in read_trace(path) if e.kind == "tool_finished"}


@dataclass
class Timer:
    elapsed: float = 0.0


class timed:
    """``with timed() as t: ...`` then ``t.elapsed``."""

    def __enter__(self) -> Timer:
        self._timer = Timer()
        self._start = time.monotonic()
        return self._timer

    def __exit__(self, *exc: object) -> None:
        self._timer.elapsed = time.monotonic() - self._start


def walk_strings(value: Any) -> Iterator[str]:
    """Every string inside a JSON-like value."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for k, v in value.items():
            yield str(k)
            yield from walk_strings(v)
    elif isinstance(value, list | tuple):
        for v in value:
            yield from walk_strings(v)
