"""The OpenAI-compatible chat adapter: native tool calls or a schema-constrained JSON action protocol."""

from __future__ import annotations

import json
import math
import time
import uuid
from typing import Any

import openai
from pydantic import ValidationError

from subagent_lab.context import estimate_messages, estimate_text
from subagent_lab.models.base import ModelCallError
from subagent_lab.types import ModelRequest, ModelResponse, ToolCall, Usage

JSON_PROTOCOL = """
## How to act
Reply with exactly one JSON object per turn, nothing else.
To call a tool: {"tool": "<tool name>", "arguments": {<arguments>}}
  for example {"tool": "Grep", "arguments": {"pattern": "def load"}}
To give your final answer: {"final": <the final JSON object described above>}
Look at the code with the tools before answering; answer only from what the tools showed you.
Tools:
"""
_RETRY_STATUS = {408, 409, 429, 500, 502, 503, 504}
_UNSUPPORTED_KEYS = {"title", "default", "maxLength", "maxItems", "examples", "description"}


def _inline_refs(schema: Any, defs: dict[str, Any]) -> Any:
    """Inline ``$ref``s and drop keywords grammar converters handle poorly (they stay in the prompt).

    Keys of a ``properties`` map are property names, not keywords: a property called
    ``description`` must survive.
    """
    if isinstance(schema, dict):
        if "$ref" in schema:
            return _inline_refs(defs[schema["$ref"].split("/")[-1]], defs)
        out: dict[str, Any] = {}
        for key, value in schema.items():
            if key in _UNSUPPORTED_KEYS or key == "$defs":
                continue
            if key == "properties" and isinstance(value, dict):
                out[key] = {name: _inline_refs(sub, defs) for name, sub in value.items()}
            else:
                out[key] = _inline_refs(value, defs)
        return out
    if isinstance(schema, list):
        return [_inline_refs(v, defs) for v in schema]
    return schema


def decoding_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """A self-contained, simplified copy of ``schema`` for constrained decoding."""
    result: dict[str, Any] = _inline_refs(schema, schema.get("$defs", {}))
    return result


def action_schema(
    tools: list[dict[str, Any]], final_schema: dict[str, Any] | None, *, allow_final: bool = True
) -> dict[str, Any]:
    """The JSON action protocol: one of the tool calls, or (when allowed) the final answer."""
    options: list[dict[str, Any]] = []
    for tool in tools:
        fn = tool["function"]
        options.append(
            {
                "type": "object",
                "properties": {
                    "tool": {"const": fn["name"]},
                    "arguments": decoding_schema(fn["parameters"]),
                },
                "required": ["tool", "arguments"],
            }
        )
    if allow_final or not options:
        final = decoding_schema(final_schema) if final_schema else {"type": "object"}
        options.append({"type": "object", "properties": {"final": final}, "required": ["final"]})
    return options[0] if len(options) == 1 else {"anyOf": options}


def extract_json_object(text: str) -> dict[str, Any] | None:
    """The JSON object in ``text``: the whole text, else the first object inside it.

    Unconstrained models wrap their JSON in fences or prose; grammar-constrained decoding costs
    several times the generation speed on llama.cpp, so the protocol also works without it.
    """
    try:
        value = json.loads(text)
    except json.JSONDecodeError:
        value = None
    if isinstance(value, dict):
        return value
    decoder = json.JSONDecoder()
    start = text.find("{")
    while start != -1:
        try:
            value, _ = decoder.raw_decode(text, start)
        except json.JSONDecodeError:
            value = None
        if isinstance(value, dict):
            return value
        start = text.find("{", start + 1)
    return None


def _tool_lines(tools: list[dict[str, Any]]) -> str:
    lines = []
    for tool in tools:
        fn = tool["function"]
        params = fn["parameters"].get("properties", {})
        required = set(fn["parameters"].get("required", []))
        args = ", ".join(
            f"{name}{'' if name in required else '?'}: {spec.get('type', 'any')}"
            + (f" ({spec['description']})" if spec.get("description") else "")
            for name, spec in params.items()
        )
        lines.append(f"- {fn['name']}: {fn['description']} Arguments: {args}")
    return "\n".join(lines)


def _utf8(value: Any) -> Any:
    """``value`` with lone surrogates (a non-UTF-8 file name, a model's ``\\udce9`` escape echoed
    back in an observation) shown as ``\\udce9`` text: the request body must encode as UTF-8."""
    if isinstance(value, str):
        return value.encode("utf-8", "backslashreplace").decode("utf-8")
    if isinstance(value, dict):
        return {k: _utf8(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_utf8(v) for v in value]
    return value


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
        max_retries: int = 2,
        timeout_s: float = 180.0,
        error_hint: str = "",
        backoff_s: float = 1.0,
    ) -> None:
        self.base_url = base_url
        self.model = model
        self.tool_protocol = tool_protocol
        self.constrain_output = constrain_output
        self.max_retries = max_retries
        self.timeout_s = timeout_s
        self.error_hint = error_hint
        self.backoff_s = backoff_s
        self._client = openai.OpenAI(
            base_url=base_url, api_key=api_key or "not-needed", max_retries=0, timeout=timeout_s
        )

    # --- request building -------------------------------------------------------------

    def _messages(self, request: ModelRequest) -> list[dict[str, Any]]:
        native = self.tool_protocol == "native"
        out: list[dict[str, Any]] = []
        for msg in request.messages:
            if msg.role == "assistant" and msg.tool_calls:
                if native:
                    out.append(
                        {
                            "role": "assistant",
                            "content": msg.content or None,
                            "tool_calls": [
                                {
                                    "id": c.id,
                                    "type": "function",
                                    "function": {"name": c.name, "arguments": json.dumps(c.arguments)},
                                }
                                for c in msg.tool_calls
                            ],
                        }
                    )
                else:
                    call = msg.tool_calls[0]
                    out.append(
                        {
                            "role": "assistant",
                            "content": json.dumps({"tool": call.name, "arguments": call.arguments}),
                        }
                    )
            elif msg.role == "tool":
                if native:
                    out.append({"role": "tool", "tool_call_id": msg.tool_call_id, "content": msg.content})
                else:
                    out.append({"role": "user", "content": f"Result of {msg.name}:\n{msg.content}"})
            else:
                out.append({"role": msg.role, "content": msg.content})
        if not native and out and out[0]["role"] == "system":
            protocol = JSON_PROTOCOL + (_tool_lines(request.tools) if request.tools else "(none this turn)")
            out[0] = {"role": "system", "content": out[0]["content"] + "\n" + protocol}
        return [_utf8(m) for m in out]

    def _kwargs(self, request: ModelRequest) -> dict[str, Any]:
        kwargs: dict[str, Any] = {
            "model": self.model,
            "messages": self._messages(request),
            "max_tokens": request.max_tokens,
            "temperature": request.temperature,
            "timeout": min(request.timeout_s, self.timeout_s),
        }
        if request.seed is not None:
            kwargs["seed"] = request.seed
        if self.tool_protocol == "native":
            if request.tools:
                kwargs["tools"] = request.tools
        elif self.constrain_output:
            schema = action_schema(request.tools, request.final_schema, allow_final=request.allow_final)
            # llama-cpp-python turns json_object + schema into a grammar; OpenAI-style servers
            # ignore the extra key and still return JSON.
            kwargs["response_format"] = {"type": "json_object", "schema": schema}
        return kwargs

    # --- the one method -----------------------------------------------------------------

    def complete(self, request: ModelRequest) -> ModelResponse:
        kwargs = self._kwargs(request)
        started = time.monotonic()
        # The run's wall-clock limit bounds the whole call, retries and backoff included.
        deadline = started + request.timeout_s
        attempt = 0
        while True:
            attempt += 1
            kwargs["timeout"] = max(min(self.timeout_s, deadline - time.monotonic()), 0.001)
            try:
                raw = self._client.chat.completions.create(**kwargs)
                return self._parse(raw, request, attempts=attempt, latency=time.monotonic() - started)
            except openai.APIStatusError as exc:
                retryable = exc.status_code in _RETRY_STATUS
                message = f"HTTP {exc.status_code} from {self.base_url}: {exc.message}"
                delay = self._retry_after(exc)
            except (openai.APITimeoutError, openai.APIConnectionError) as exc:
                retryable = True
                kind = "timed out" if isinstance(exc, openai.APITimeoutError) else "connection failed"
                message = f"model endpoint {self.base_url} {kind}: {exc}"
                delay = None
            except openai.APIError as exc:  # malformed body, validation of the response
                retryable, message, delay = True, f"bad response from {self.base_url}: {exc}", None
            except (json.JSONDecodeError, ValidationError, AttributeError, TypeError, IndexError) as exc:
                # A 200 whose body is not JSON (a proxy's HTML page, a torn body) or not shaped
                # like a chat completion: the endpoint's fault, not the harness's.
                detail = f"{type(exc).__name__}: {exc}"[:300]
                retryable, message, delay = True, f"malformed response from {self.base_url}: {detail}", None
            pause = min(delay if delay is not None else self.backoff_s * 2 ** (attempt - 1), 30.0)
            out_of_time = time.monotonic() + pause >= deadline
            if not retryable or attempt > self.max_retries or out_of_time:
                hint = f" ({self.error_hint})" if self.error_hint else ""
                late = " (no time left in the run for a retry)" if out_of_time and retryable else ""
                raise ModelCallError(
                    message + late + hint,
                    retryable=retryable,
                    attempts=attempt,
                    latency_s=time.monotonic() - started,
                )
            time.sleep(pause)

    @staticmethod
    def _retry_after(exc: openai.APIStatusError) -> float | None:
        """Seconds the server asks us to wait; None when absent or not a usable number."""
        value = exc.response.headers.get("retry-after") if exc.response is not None else None
        try:
            seconds = float(value) if value is not None else None
        except ValueError:
            return None  # an HTTP date or garbage: fall back to exponential backoff
        return seconds if seconds is not None and math.isfinite(seconds) and seconds >= 0 else None

    def _parse(self, raw: Any, request: ModelRequest, *, attempts: int, latency: float) -> ModelResponse:
        choice = raw.choices[0] if getattr(raw, "choices", None) else None
        message = choice.message if choice is not None else None
        text = (message.content or "") if message is not None else ""
        usage = self._usage(raw, request, text)
        response = ModelResponse(
            text=text,
            usage=usage,
            finish_reason=(choice.finish_reason or "stop") if choice is not None else "error",
            model_id=getattr(raw, "model", "") or self.model,
            latency_s=latency,
            attempts=attempts,
            parse_ok=choice is not None,
        )
        if self.tool_protocol == "native":
            calls = []
            for call in (message.tool_calls if message is not None else None) or []:
                try:
                    args = json.loads(call.function.arguments or "{}")
                    raw_args = None if isinstance(args, dict) else call.function.arguments
                except json.JSONDecodeError:
                    args, raw_args = {}, call.function.arguments
                calls.append(
                    ToolCall(
                        id=call.id or f"call-{uuid.uuid4().hex[:8]}",
                        name=call.function.name,
                        arguments=args if isinstance(args, dict) else {},
                        raw_arguments=raw_args,
                    )
                )
            response.tool_calls = calls
            return response
        return self._parse_action(response)

    @staticmethod
    def _parse_action(response: ModelResponse) -> ModelResponse:
        action = extract_json_object(response.text)
        if action is None:
            response.parse_ok = False
            return response
        if isinstance(action.get("name"), str) and "tool" not in action and "arguments" in action:
            action = {"tool": action["name"], "arguments": action["arguments"]}  # Qwen's native habit
        if isinstance(action.get("tool"), str):
            args = action.get("arguments", {})
            response.tool_calls = [
                ToolCall(
                    id=f"call-{uuid.uuid4().hex[:8]}",
                    name=action["tool"],
                    arguments=args if isinstance(args, dict) else {},
                    raw_arguments=None if isinstance(args, dict) else json.dumps(args),
                )
            ]
            response.text = ""
        elif "final" in action:
            response.text = json.dumps(action["final"], ensure_ascii=False)
        else:
            # An unwrapped answer ({"status": ..., "summary": ...}): hand it to the contract check,
            # which decides whether it is valid, instead of calling it unparseable.
            response.text = json.dumps(action, ensure_ascii=False)
        return response

    @staticmethod
    def _usage(raw: Any, request: ModelRequest, text: str) -> Usage:
        usage = getattr(raw, "usage", None)
        # Negative counts would hand budget back to the run: treat them as missing.
        if usage is not None and usage.prompt_tokens is not None and usage.prompt_tokens >= 0:
            details = getattr(usage, "prompt_tokens_details", None)
            cached = getattr(details, "cached_tokens", None) or 0
            completion = usage.completion_tokens or 0
            return Usage(
                prompt_tokens=usage.prompt_tokens,
                completion_tokens=completion if completion >= 0 else estimate_text(text),
                cached_tokens=max(cached, 0),
                estimated=completion < 0,
            )
        # The provider gave no usage: estimate, and say so.
        return Usage(
            prompt_tokens=estimate_messages(request.messages, request.tools),
            completion_tokens=estimate_text(text),
            estimated=True,
        )
