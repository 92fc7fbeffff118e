"""The OpenAI-compatible chat adapter: native tool calls or the grammar-constrained JSON action protocol.

The adapter can also count a request's prompt exactly on a llama.cpp server (``count_url``): it
renders the same body through the server's chat template (``/apply-template``) and tokenizes the
result with the model's own vocabulary (``/tokenize``), which is what the server then reports as
``prompt_tokens``.

Nothing a server sends can stall, crash or bloat a run: every attempt has an overall deadline
(the per-call ``timeout_s`` and the run's remaining time, whichever ends first) that a server
trickling its bytes cannot extend, and a byte cap (``max_reply_bytes``), both enforced on the
connection (``bounded_http``); a reply whose text is far longer than its ``max_tokens`` allows
ends the call as a model error, and usage figures that are not plausible counts (negative, huge,
not integers) are treated as missing (both in ``chat_reply``); numbers in tool arguments that no
tool could use (beyond 2**53, NaN, infinities: which would otherwise raise ``OverflowError`` in a
tool) and nesting deeper than ``json_reply.MAX_ARG_DEPTH`` arrive as marker strings, so the tool's
own argument check turns them into an error observation.
"""

from __future__ import annotations

import datetime
import email.utils
import json
import math
import threading
import time
from typing import Any

import httpx
import openai
from openai.types.chat import ChatCompletion
from pydantic import ValidationError

from subagent_lab.core.model import ModelCallError
from subagent_lab.core.redact import mask_url
from subagent_lab.core.tokens import TokenCount, estimate_count
from subagent_lab.core.types import Message, ModelRequest, ModelResponse
from subagent_lab.models.actions import render_action
from subagent_lab.models.bounded_http import (
    DEFAULT_MAX_REPLY_BYTES,
    CallLimits,
    bounded_client,
    openai_http_package,
)
from subagent_lab.models.chat_reply import ReplyTooLong, parse_reply
from subagent_lab.models.json_reply import utf8_safe
from subagent_lab.models.wire import WireRequest, build_wire

_RETRY_STATUS = {408, 409, 429, 500, 502, 503, 504}
COUNT_TIMEOUT_S = 30.0
MAX_RETRY_AFTER_S = 86_400.0
"""A longer ``Retry-After`` is taken as this (a day): beyond any run's deadline either way."""


RENDER_MEMO = 4096
"""Rendered messages an adapter keeps (``OpenAIChatModel._render``); past it the memo starts again."""


def render_message(msg: Message, native: bool) -> dict[str, Any]:
    """One message in the endpoint's chat format: tool calls and results natively, or (JSON action
    protocol) an assistant's call as its action object and a tool result as a user message."""
    if msg.role == "assistant" and msg.tool_calls:
        if native:
            calls = [
                {
                    "id": c.id,
                    "type": "function",
                    "function": {"name": c.name, "arguments": json.dumps(c.arguments)},
                }
                for c in msg.tool_calls
            ]
            return {"role": "assistant", "content": msg.content or None, "tool_calls": calls}
        call = msg.tool_calls[0]
        return {"role": "assistant", "content": render_action(call.name, call.arguments, msg.content)}
    if msg.role == "tool":
        if native:
            return {"role": "tool", "tool_call_id": msg.tool_call_id, "content": msg.content}
        return {"role": "user", "content": f"Result of {msg.name}:\n{msg.content}"}
    return {"role": msg.role, "content": msg.content}


def retry_after_seconds(value: str | None) -> float | None:
    """A ``Retry-After`` header's wait in seconds: delta-seconds or an HTTP date (a past date is 0).

    None when absent or unusable (negative, NaN, garbage): the caller backs off on its own.
    """
    if value is None or len(value) > 64:
        return None
    try:
        seconds = float(value)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError, IndexError, OverflowError):
            return None
        if when.tzinfo is None:
            when = when.replace(tzinfo=datetime.timezone.utc)
        seconds = max((when - datetime.datetime.now(datetime.timezone.utc)).total_seconds(), 0.0)
    if not math.isfinite(seconds) or seconds < 0:
        return None
    return min(seconds, MAX_RETRY_AFTER_S)


def first_token_logprobs(raw: Any) -> dict[str, float] | None:
    """The first generated token's alternatives in a chat completion (``choices[0].logprobs
    .content[0].top_logprobs``), token text -> log-probability (the likelier of a repeated text);
    None when the endpoint sent none or sent something else (not finite numbers, not text)."""
    try:
        content = raw.choices[0].logprobs.content
        first = content[0] if content else None
        alternatives = list(first.top_logprobs or []) if first is not None else []
        if first is not None and not alternatives:  # no alternatives: the token itself
            alternatives = [first]
        out: dict[str, float] = {}
        for alt in alternatives:
            token, value = alt.token, float(alt.logprob)
            if isinstance(token, str) and math.isfinite(value) and value <= 0:
                out[token] = max(value, out.get(token, -math.inf))
        return out or None
    except (AttributeError, IndexError, TypeError, ValueError):
        return None


class OpenAIChatModel:
    """Talks to one OpenAI-compatible endpoint through the ``openai`` client.

    Retries (bounded, exponential backoff, ``Retry-After`` honoured) are done here rather than
    inside the client so that every attempt is counted and visible in the trace.
    """

    def __init__(
        self,
        *,
        base_url: str,
        model: str,
        api_key: str | None = None,
        tool_protocol: str = "json",
        constrain_output: bool = True,
        strict_tools: bool = True,
        max_retries: int = 2,
        timeout_s: float = 180.0,
        error_hint: str = "",
        backoff_s: float = 1.0,
        count_url: str | None = None,
        max_reply_bytes: int = DEFAULT_MAX_REPLY_BYTES,
    ) -> None:
        """``count_url``: a llama.cpp server root (``http://host:port``) that counts prompts exactly;
        ``max_reply_bytes``: the largest reply one attempt may read; ``strict_tools``: send the
        native protocol's ``final_answer`` tool with ``strict: true`` (OpenAI structured outputs)."""
        self.base_url = base_url
        self.shown_url = mask_url(base_url)
        """The endpoint as messages show it (a ``user:password@`` part masked)."""
        self.count_url = count_url.rstrip("/") if count_url else None
        self.model = model
        self.tool_protocol = tool_protocol
        self.constrain_output = constrain_output
        self.strict_tools = strict_tools
        self.max_retries = max_retries
        self.timeout_s = timeout_s
        self.error_hint = error_hint
        self.backoff_s = backoff_s
        self._limits = CallLimits(max_reply_bytes)
        self._rendered: dict[int, tuple[Message, dict[str, Any]]] = {}
        self._held = threading.local()
        """The wire request this thread built last (``wire``): a call counts, then sends, one request."""
        self._client = openai.OpenAI(
            base_url=base_url,
            api_key=api_key or "not-needed",
            max_retries=0,
            timeout=timeout_s,
            http_client=bounded_client(self._limits, timeout=timeout_s, package=openai_http_package()),
        )

    # --- the request on the wire ---------------------------------------------------------

    def wire(self, request: ModelRequest) -> WireRequest:
        """``request`` as this endpoint is sent it (``build_wire``), built once per call: a call
        counts its prompt, then sends, and the build made to count (held by this thread) is the one
        sent while ``request`` asks for the same body (``WireRequest.fits``). Each ``Message``
        object is rendered once per adapter (``_render``): a run's conversation grows by appending,
        so a build renders only what is new since the last one."""
        held: WireRequest | None = getattr(self._held, "wire", None)
        if held is not None and held.fits(request):
            return held if held.request is request else held.model_copy(update={"request": request})
        native = self.tool_protocol == "native"
        held = build_wire(
            request,
            [self._render(msg, native) for msg in request.messages],
            model=self.model,
            native=native,
            grammar=self.constrain_output,
            strict=self.strict_tools,
        )
        self._held.wire = held
        return held

    def _render(self, msg: Message, native: bool) -> dict[str, Any]:
        """``msg`` on the wire, from the memo when this very object was rendered before. The memo
        holds the message itself, so its ``id`` cannot be reused while the entry lives; messages
        are never changed in place (compaction makes new ones)."""
        held = self._rendered.get(id(msg))
        if held is not None and held[0] is msg:
            return held[1]
        wire = utf8_safe(render_message(msg, native))
        if len(self._rendered) >= RENDER_MEMO:  # a long-lived adapter serves many runs
            self._rendered.clear()
        self._rendered[id(msg)] = (msg, wire)
        return wire

    def count_prompt(self, request: ModelRequest) -> TokenCount:
        """The request's prompt tokens: exact from the server's template and tokenizer, else estimated.
        The template reads the wire's messages and a native request's tools (not the grammar)."""
        if self.count_url is None:
            return estimate_count(request)
        body = self.wire(request).body
        limits = CallLimits(DEFAULT_MAX_REPLY_BYTES)
        limits.start(time.monotonic() + min(COUNT_TIMEOUT_S, max(request.timeout_s, 0.001)))
        try:
            with bounded_client(limits, timeout=COUNT_TIMEOUT_S) as client:
                query = {"model": self.model}
                template = {key: body[key] for key in ("messages", "tools") if key in body}
                prompt = client.post(f"{self.count_url}/apply-template", params=query, json=template)
                prompt.raise_for_status()
                tokens = client.post(
                    f"{self.count_url}/tokenize",
                    params=query,
                    json={"content": prompt.json()["prompt"], "add_special": True, "parse_special": True},
                )
                tokens.raise_for_status()
                return TokenCount(tokens=len(tokens.json()["tokens"]), exact=True)
        except (httpx.HTTPError, ValueError, KeyError, TypeError, RecursionError):
            return estimate_count(request)  # the call itself will report the server's state

    # --- the one method -----------------------------------------------------------------

    def complete(self, request: ModelRequest) -> ModelResponse:
        wire = self.wire(request)
        self._held.wire = None  # sent: the next call asks for another body
        started = time.monotonic()
        # The run's wall-clock limit bounds the whole call, retries and backoff included.
        deadline = started + request.timeout_s
        attempt = spent = 0
        while True:
            attempt += 1
            # The attempt's overall deadline: enforced on the connection, so a server trickling
            # its reply cannot extend it (httpx's own timeout is per read).
            attempt_deadline = min(deadline, time.monotonic() + self.timeout_s)
            timeout = max(attempt_deadline - time.monotonic(), 0.001)
            self._limits.start(attempt_deadline)
            url = self.shown_url
            try:
                raw = self._post(wire, timeout)
                response = parse_reply(
                    raw, wire, model=self.model, attempts=attempt, latency=time.monotonic() - started
                )
                response.spent_attempts = spent
                if request.top_logprobs:
                    response.top_logprobs = first_token_logprobs(raw)
                return response
            except openai.APIStatusError as exc:
                retryable = exc.status_code in _RETRY_STATUS
                message = f"HTTP {exc.status_code} from {url}: {str(exc.message)[:500]}"
                delay = self._retry_after(exc)
            except (openai.APITimeoutError, openai.APIConnectionError) as exc:
                if self._limits.over:
                    cap = f"{self._limits.max_bytes:,}"
                    raise self._failure(
                        f"the reply from {url} passed the {cap}-byte cap and was cut off",
                        attempt,
                        started,
                        spent + 1,
                    ) from None
                retryable = True
                timed_out = isinstance(exc, openai.APITimeoutError) or self._limits.expired
                kind = "timed out (overall deadline of the call)" if timed_out else "connection failed"
                message = f"model endpoint {url} {kind}: {str(exc)[:300]}"
                delay = None
                spent += timed_out  # the server may have computed it
            except openai.APIError as exc:  # malformed body, validation of the response
                retryable, message, delay = True, f"bad response from {url}: {str(exc)[:300]}", None
                spent += 1
            except ReplyTooLong as exc:
                raise self._failure(f"the reply from {url} {exc}", attempt, started, spent + 1) from None
            except (
                ValueError, ValidationError, AttributeError, TypeError, IndexError, RecursionError,
                OverflowError,
            ) as exc:  # fmt: skip
                # A 200 whose body is not JSON (a proxy's HTML page, a torn body, a number past
                # Python's 4,300-digit conversion limit) or not shaped like a chat completion:
                # the endpoint's fault, not the harness's.
                detail = f"{type(exc).__name__}: {exc}"[:300]
                retryable, message, delay = True, f"malformed response from {url}: {detail}", None
                spent += 1
            pause = min(delay if delay is not None else self.backoff_s * 2 ** (attempt - 1), 30.0)
            out_of_time = time.monotonic() + pause >= deadline
            # A retry after an attempt that cost tokens only while the run's budget affords another.
            unaffordable = spent > request.max_spent_attempts
            if not retryable or attempt > self.max_retries or out_of_time or unaffordable:
                hint = f" ({self.error_hint})" if self.error_hint else ""
                late = " (no time left in the run for a retry)" if out_of_time and retryable else ""
                failure = ModelCallError(
                    message + late + hint,
                    retryable=retryable,
                    attempts=attempt,
                    latency_s=time.monotonic() - started,
                    spent_attempts=spent,
                )
                failure.retry_after_s = delay  # type: ignore[attr-defined]  # an endpoint pool honours it
                raise failure
            time.sleep(pause)

    def _post(self, wire: WireRequest, timeout: float) -> ChatCompletion:
        """``chat.completions.create(**wire.body, timeout=timeout)`` with the call's admitted output
        cap, without the SDK's walk of the body against its typed parameters (a pure copy for the
        plain JSON built here, and most of a call's CPU): the same request through the client's
        own ``post``."""
        body = {**wire.body, "max_tokens": wire.request.max_tokens}
        options: Any = {"timeout": timeout, "security": {"bearer_auth": True}}
        return self._client.post(
            "/chat/completions",
            body=body,
            options=options,
            cast_to=ChatCompletion,
        )

    def _failure(self, message: str, attempts: int, started: float, spent: int) -> ModelCallError:
        """A call ended for good by what the server sent (too large a reply): not retried."""
        hint = f" ({self.error_hint})" if self.error_hint else ""
        return ModelCallError(
            message + hint,
            retryable=False,
            attempts=attempts,
            latency_s=time.monotonic() - started,
            spent_attempts=spent,
        )

    @staticmethod
    def _retry_after(exc: openai.APIStatusError) -> float | None:
        """Seconds the server asks us to wait; None when absent or not a usable number."""
        value = exc.response.headers.get("retry-after") if exc.response is not None else None
        return retry_after_seconds(value)
