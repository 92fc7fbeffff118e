"""A fast fake OpenAI-compatible endpoint on 127.0.0.1, for measuring the harness and testing faults.

Standard library only (no subagent_lab import), so it runs anywhere as a module or a process::

    python benchmarks/fake_endpoint.py --max-requests 100000 --max-seconds 900 [--statuses 429,200]

prints ``PORT <n>`` on its first line, then serves until either bound is reached and stops by
itself. ``POST /v1/chat/completions`` answers in microseconds from a script:

- with a ``response_format`` JSON schema (the harness's grammar), the smallest instance of the
  schema: for an action turn, ``Grep`` before any tool result, then ``Read``, then ``finish``; any
  other schema (the final answer) filled with the first allowed value of every field (so the
  evidence is a line the harness listed as citable);
- without one, the same order written as the flat action protocol, then a plain answer;
- with ``tools`` (a native-tools client: ``tool_protocol: native``, ``LLM_TOOL_PROTOCOL=native``),
  the same order as ``tool_calls`` (``Grep``, then ``Read`` of a file the results named, then
  ``finish``), and the final answer as a ``final_answer`` call when the request offers that tool,
  its arguments the smallest instance of the tool's parameters.

``statuses`` is a cycle of HTTP statuses per request (``200`` answers, anything else is an error
body with that status), e.g. ``429,200`` to rate-limit every other request or ``500`` for a replica
that is down. ``GET /v1/models`` lists the one model ``fake``; ``POST /apply-template`` and
``/tokenize`` at the root count a prompt as llama-server does for an adapter's ``count_url``.
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import re
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

_WORD = re.compile(r"`([A-Za-z_][\w.]*)`|\b([A-Za-z_][A-Za-z0-9_]{3,})\b")
_ORDER = ("Grep", "Read", "finish")


def instance(schema: Any, prefer: dict[str, str] | None = None) -> Any:
    """A small value valid for a (simplified) JSON schema: first enum/const, required fields only."""
    if not isinstance(schema, dict):
        return None
    if "const" in schema:
        return schema["const"]
    if schema.get("enum"):
        return schema["enum"][0]
    for key in ("anyOf", "oneOf"):
        if schema.get(key):
            options = [s for s in schema[key] if s.get("type") != "null"] or schema[key]
            return instance(options[0], prefer)
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "null")
    if kind == "object" or "properties" in schema:
        props = schema.get("properties", {})
        out = {}
        for name in schema.get("required", list(props)):
            if prefer and name in prefer and props.get(name, {}).get("type") == "string":
                out[name] = prefer[name][: props[name].get("maxLength", 10_000)]
            else:
                out[name] = instance(props.get(name, {}), prefer)
        return out
    if kind == "array":
        return [instance(schema.get("items", {}), prefer) for _ in range(max(schema.get("minItems", 1), 1))]
    if kind == "string":
        return "x" * max(schema.get("minLength", 1), 1)
    if kind in ("integer", "number"):
        return schema.get("minimum", 1)
    if kind == "boolean":
        return False
    return None


def _task_word(messages: list[dict[str, Any]]) -> str:
    """A name from the task (the first user message) to search for."""
    task = next((str(m.get("content", "")) for m in messages if m.get("role") == "user"), "")
    for quoted, word in _WORD.findall(task):
        if quoted or word[0].islower():
            return quoted or word
    return "def"


def reply_for(body: dict[str, Any]) -> str:
    """The scripted reply to one chat-completion request body."""
    messages = body.get("messages", [])
    results = sum(1 for m in messages if str(m.get("content", "")).startswith("Result of "))
    schema = ((body.get("response_format") or {}).get("json_schema") or {}).get("schema")
    prefer = {"pattern": _task_word(messages), "thought": "", "summary": "Found it."}
    if isinstance(schema, dict):
        options = schema.get("anyOf") or [schema]
        tools = {o.get("properties", {}).get("tool", {}).get("const"): o for o in options}
        if None not in tools:  # an action turn
            for name in _ORDER[min(results, 2) :] + _ORDER:
                if name in tools:
                    return json.dumps(instance(tools[name], prefer))
        return json.dumps(instance(schema, prefer))
    if results < 2:
        args = {"pattern": prefer["pattern"]} if results == 0 else {"path": ".", "line": 1}
        return json.dumps({"thought": "", "tool": _ORDER[results], **args})
    return json.dumps({"status": "completed", "summary": "Found it.", "findings": [], "evidence": []})


_PLACE = re.compile(r"([\w./-]+\.\w+):\d+")


def native_reply(body: dict[str, Any]) -> dict[str, Any]:
    """The scripted assistant message for a request that offers ``tools``: one tool call."""
    messages = body.get("messages", [])
    tools = {
        t["function"]["name"]: t["function"].get("parameters") or {}
        for t in body.get("tools") or []
        if isinstance(t, dict) and isinstance(t.get("function"), dict) and "name" in t["function"]
    }
    if not tools:  # no tool it can name: the text protocol's reply
        return {"role": "assistant", "content": reply_for(body)}
    results = [str(m.get("content") or "") for m in messages if m.get("role") == "tool"]
    place = next((m.group(1) for text in results for m in [_PLACE.search(text)] if m), ".")
    prefer = {"pattern": _task_word(messages), "thought": "", "summary": "Found it.", "path": place}
    if "final_answer" in tools:
        name = "final_answer"
    else:
        name = next((n for n in _ORDER[min(len(results), 2) :] + _ORDER if n in tools), next(iter(tools)))
    call = {
        "id": f"call-{len(results) + 1}",
        "type": "function",
        "function": {"name": name, "arguments": json.dumps(instance(tools[name], prefer))},
    }
    return {"role": "assistant", "content": None, "tool_calls": [call]}


def judge_reply(body: dict[str, Any], with_logprobs: bool) -> tuple[str, dict[str, Any] | None]:
    """A yes/no judgment (a request asking for ``top_logprobs``): P(yes) is the share of the
    change request's words (4+ letters) the code after ``Code:`` holds; "yes" when it is over
    half. With ``with_logprobs`` the first token's alternatives come as OpenAI's ``logprobs``."""
    prompt = str(body.get("messages", [{}])[-1].get("content", ""))
    request, _, code = prompt.partition("Code:")
    words = {w.lower() for w in re.findall(r"[A-Za-z]{4,}", request.split("\n", 1)[0])}
    found = {w for w in words if w in code.lower()}
    p = min(max(len(found) / len(words), 0.01), 0.99) if words else 0.5
    text = "yes" if p > 0.5 else "no"
    if not with_logprobs:
        return text, None
    alternatives = [{"token": "yes", "logprob": math.log(p), "bytes": None},
                    {"token": "no", "logprob": math.log(1 - p), "bytes": None}]  # fmt: skip
    first = alternatives[0] if text == "yes" else alternatives[1]
    return text, {"content": [{**first, "top_logprobs": alternatives}]}


def count_reply(path: str, body: dict[str, Any]) -> dict[str, Any]:
    """llama-server's counting routes (an adapter's ``count_url``): ``/apply-template`` joins the
    messages' texts, ``/tokenize`` gives a token per 4 characters; neither counts as a request."""
    if path.startswith("/apply-template"):
        return {"prompt": "\n".join(str(m.get("content") or "") for m in body.get("messages", []))}
    return {"tokens": list(range(len(str(body.get("content", ""))) // 4 + 1))}


class FakeEndpoint:
    """The server; ``start()`` serves in a daemon thread, ``stop()`` ends it (or the bounds do)."""

    def __init__(
        self,
        *,
        statuses: tuple[int, ...] = (200,),
        max_requests: int = 10_000,
        max_seconds: float = 120.0,
        delay_s: float = 0.0,
        logprobs: bool = True,
    ) -> None:
        """``delay_s``: seconds each answer takes (a slow model, for fault tests); ``logprobs``:
        return ``logprobs`` where a request asks for them (False: an endpoint that never does)."""
        self.statuses = itertools.cycle(statuses)
        self.logprobs = logprobs
        self.delay_s = delay_s
        self.max_requests = max_requests
        self.max_seconds = max_seconds
        self.requests = 0
        self.answered: dict[int, int] = {}
        self.in_flight = 0
        self.max_in_flight = 0
        """The most requests this server was answering at once."""
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self._thread: threading.Thread | None = None
        self._timer: threading.Timer | None = None
        self._stopping: threading.Thread | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def start(self) -> FakeEndpoint:
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        self._timer = threading.Timer(self.max_seconds, self.stop)
        self._timer.daemon = True
        self._timer.start()
        return self

    def stop(self) -> None:
        """Stop serving (safe from any thread, a request handler's included, and more than once)."""
        if self._timer is not None:
            self._timer.cancel()
        with self._lock:
            if self._stopping is not None:
                return
            self._stopping = threading.Thread(target=self._shutdown, daemon=True)
        self._stopping.start()
        if threading.current_thread() not in (self._thread, self._stopping) and "Handler" not in str(
            threading.current_thread().name
        ):
            self._stopping.join(timeout=5)

    def _shutdown(self) -> None:
        if self._thread is not None:
            self._server.shutdown()  # waits for serve_forever to return
        self._server.server_close()

    def __enter__(self) -> FakeEndpoint:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _next_status(self) -> int | None:
        """The status for the next request; None once the request bound is reached."""
        with self._lock:
            if self.requests >= self.max_requests:
                return None
            self.requests += 1
            status = next(self.statuses)
            self.answered[status] = self.answered.get(status, 0) + 1
        if self.requests == self.max_requests:
            threading.Thread(target=self.stop, daemon=True).start()
        return status

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            # One write per response (flushed after each request): headers and body in two small
            # writes meet Nagle's algorithm and the client's delayed ACK, ~40 ms a request.
            wbufsize = 1 << 16

            def log_message(self, format: str, *args: Any) -> None:  # quiet
                return

            def _send(self, status: int, payload: dict[str, Any]) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                self._send(200, {"object": "list", "data": [{"id": "fake", "object": "model"}]})

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length)
                if self.path.split("?")[0] in ("/apply-template", "/tokenize"):
                    self._send(200, count_reply(self.path, json.loads(raw or b"{}")))
                    return
                status = fake._next_status()
                if status is None:
                    self._send(503, {"error": {"message": "fake endpoint: request bound reached"}})
                    return
                if status != 200:
                    self._send(status, {"error": {"message": f"fake endpoint says {status}"}})
                    return
                body = json.loads(raw or b"{}")
                logprobs, message = None, None
                if body.get("top_logprobs"):  # a yes/no judgment of the rank policies
                    text, logprobs = judge_reply(body, fake.logprobs)
                elif body.get("tools"):  # the native protocol: a tool call
                    message = native_reply(body)
                    text = json.dumps(message.get("tool_calls") or message["content"])
                else:
                    text = reply_for(body)
                with fake._lock:
                    fake.in_flight += 1
                    fake.max_in_flight = max(fake.max_in_flight, fake.in_flight)
                if fake.delay_s:
                    time.sleep(fake.delay_s)
                with fake._lock:
                    fake.in_flight -= 1
                prompt = sum(len(str(m.get("content", ""))) for m in body.get("messages", [])) // 4
                self._send(
                    200,
                    {
                        "id": f"fake-{fake.requests}",
                        "object": "chat.completion",
                        "created": int(time.time()),
                        "model": body.get("model", "fake"),
                        "choices": [
                            {
                                "index": 0,
                                "message": message or {"role": "assistant", "content": text},
                                "finish_reason": "tool_calls"
                                if message and message.get("tool_calls")
                                else "stop",
                                "logprobs": logprobs,
                            }
                        ],
                        "usage": {
                            "prompt_tokens": prompt,
                            "completion_tokens": len(text) // 4 + 1,
                            "total_tokens": prompt + len(text) // 4 + 1,
                        },
                    },
                )

        return Handler


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--max-requests", type=int, default=10_000)
    parser.add_argument("--max-seconds", type=float, default=120.0)
    parser.add_argument("--statuses", default="200", help="comma-separated cycle of HTTP statuses")
    parser.add_argument("--delay", type=float, default=0.0, help="seconds per answer")
    args = parser.parse_args(argv)
    statuses = tuple(int(s) for s in args.statuses.split(","))
    fake = FakeEndpoint(
        statuses=statuses, max_requests=args.max_requests, max_seconds=args.max_seconds, delay_s=args.delay
    )
    fake.start()
    print(f"PORT {fake._server.server_address[1]}", flush=True)
    assert fake._thread is not None
    fake._thread.join()
    print(f"answered {fake.answered}", file=sys.stderr, flush=True)


if __name__ == "__main__":
    main()
