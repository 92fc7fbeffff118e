"""Reading an OpenAI-compatible chat completion into a ``ModelResponse``: text, usage, tool calls.

What a server sends is checked here: a reply far longer than its ``max_tokens`` allows raises
``ReplyTooLong``; usage figures that are not plausible counts (negative, huge, not integers) are
treated as missing and estimated instead; tool arguments are read by ``json_reply.loads_bounded``.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

from subagent_lab.core.context import estimate_messages, estimate_text
from subagent_lab.core.policy import FINISH
from subagent_lab.core.types import ModelRequest, ModelResponse, ToolCall, Usage
from subagent_lab.models.actions import parse_action
from subagent_lab.models.grammar_cut import cut_answer
from subagent_lab.models.json_reply import extract_json_object, loads_bounded, sole_json_object
from subagent_lab.models.strict_schema import ANSWER_TOOL, drop_nulls
from subagent_lab.models.wire import WireRequest

MAX_USAGE_FIGURE = 10**9
"""A usage count above this is no count (a run's whole budget is far smaller): treated as missing."""
MAX_CHARS_PER_TOKEN = 16
"""A reply longer than ``max_tokens`` times this many characters came from a server that ignored
``max_tokens`` (real tokenizers average 3-5 characters): the call fails as a model error."""


class ReplyTooLong(Exception):
    """The reply's text is far longer than the call's ``max_tokens`` allows."""


def parse_reply(raw: Any, wire: WireRequest, *, model: str, attempts: int, latency: float) -> ModelResponse:
    """The response a chat completion ``raw`` holds for ``wire``, sent to ``model``.

    ``wire.native``: the tool protocol is the endpoint's own tool calls (else the JSON action
    protocol). ``wire.grammar``: the endpoint decoded under the request's schemas, so its answers
    are taken as they come; without one they get the grammar's cuts (``grammar_cut``). The answer
    is read against ``wire.answer_schema``, decoded once when the request was built.
    """
    request, native, grammar, schema = wire.request, wire.native, wire.grammar, wire.answer_schema
    choice = raw.choices[0] if getattr(raw, "choices", None) else None
    message = choice.message if choice is not None else None
    text = (message.content or "") if message is not None else ""
    if not isinstance(text, str):
        raise TypeError(f"message content is {type(text).__name__}, not text")
    if len(text) > max(request.max_tokens, 1) * MAX_CHARS_PER_TOKEN + 1024:
        raise ReplyTooLong(
            f"holds {len(text):,} characters for max_tokens={request.max_tokens} "
            "(the server ignored max_tokens)"
        )
    usage = reply_usage(raw, request, text)
    response = ModelResponse(
        text=text,
        usage=usage,
        finish_reason=(choice.finish_reason or "stop") if choice is not None else "error",
        model_id=getattr(raw, "model", "") or model,
        requested_model=model,
        latency_s=latency,
        attempts=attempts,
        parse_ok=choice is not None,
    )
    if native and request.phase == "act":
        calls = []
        for call in (message.tool_calls if message is not None else None) or []:
            try:
                args = loads_bounded(call.function.arguments or "{}")
                raw_args = None if isinstance(args, dict) else call.function.arguments
            except ValueError:
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
        if not calls and response.finish_reason != "length":  # a cut reply is retried as it is
            text_turn(response, request, schema, grammar)
        return response
    if request.phase == "final" and native and schema is not None:
        value = answer_value(message, schema)
        if value is None:
            # An endpoint that ignores the forced tool choice (llama-server reads a named function
            # as "auto") answers in text; the one object in it is the call's arguments, fenced or
            # not. The contract check still judges every field of it.
            found = extract_json_object(response.text)
            value = None if found is None else drop_nulls(found, schema)
        if value is not None:
            _answer(response, value, schema, cut=not grammar)
        return response
    if request.phase == "final":
        value = extract_json_object(response.text)
        if value is not None and set(value) == {"final"} and isinstance(value["final"], dict):
            response.text = json.dumps(value["final"], ensure_ascii=False)  # the earlier wrapper
        elif value is not None and schema is not None and not grammar:
            cut, notes = cut_answer(value, schema)
            if notes:  # an answer decoded without its grammar: the grammar's cuts, noted
                response.raw_text, response.adapted = response.text, notes
                response.text = json.dumps(cut, ensure_ascii=False)
        return response
    return parse_action_reply(response, request)


def text_turn(
    response: ModelResponse, request: ModelRequest, schema: dict[str, Any] | None, grammar: bool
) -> None:
    """A native working turn that called no tool, read for what it is (``response`` updated);
    ``schema``: the request's answer schema, decoded.

    Main on llama-server writes its answer as the turn's text (fenced), an action as a JSON object,
    or a word such as "Finish.". The loop judges a turn's text as the answer, so an answer-shaped
    object is read as the final phase reads it (``_answer``). A reply that is an action object and
    nothing else becomes that tool call, as on the JSON protocol, but only for a tool without side
    effects (``request.text_tools``) or ``finish``: an Edit, Bash or Task written as text is sent
    back as no valid action (``parse_ok`` false), never run. An action object inside prose is
    quoted, not sent (a README's example the model read and declined): it never becomes a call,
    and the text goes to the contract check as the turn's answer. Text with no object at all is
    the turn ending without an action, read as ``finish`` (where the menu offers it), so the
    answer is asked for with the final prompt rather than a repair of prose.
    """
    found = extract_json_object(response.text)
    sole = sole_json_object(response.text) if found is not None else None
    action = parse_action(sole) if sole is not None else None
    if action is not None:
        name, args, thought = action
        if name != FINISH and name not in (request.text_tools or ()):
            response.parse_ok = False  # side effects only through the endpoint's own tool calls
            response.adapted = [f"{name} written as text, not called as a tool: not run"]
            return
        response.tool_calls = [ToolCall(id=f"call-{uuid.uuid4().hex[:8]}", name=name, arguments=args)]
        response.raw_text, response.text = response.text, thought
    elif found is not None and schema is not None and _answer_shaped(found, schema):
        _answer(response, drop_nulls(found, schema), schema, cut=not grammar)
    elif found is None and response.text.strip() and FINISH in (request.allowed_tools or [FINISH]):
        response.tool_calls = [ToolCall(id=f"call-{uuid.uuid4().hex[:8]}", name=FINISH, arguments={})]


def _answer_shaped(value: dict[str, Any], schema: dict[str, Any]) -> bool:
    """Whether ``value`` is an answer's object: only the schema's properties, a required one among
    them (an object nested in a cut-off answer, ``{"path": ..., "line": ...}``, is not)."""
    props = set(schema.get("properties") or {})
    return bool(value) and set(value) <= props and bool(set(value) & set(schema.get("required") or props))


def answer_value(message: Any, schema: dict[str, Any]) -> Any:
    """The answer a ``final_answer`` tool call carries, its nulls dropped (None without one; its
    arguments as text when they are not JSON: the contract check says what is wrong with them)."""
    for call in (message.tool_calls if message is not None else None) or []:
        if call.function.name != ANSWER_TOOL:
            continue
        try:
            return drop_nulls(loads_bounded(call.function.arguments or "{}"), schema)
        except ValueError:
            return str(call.function.arguments)
    return None


def _answer(response: ModelResponse, value: Any, schema: dict[str, Any], *, cut: bool) -> None:
    """``response.text`` set to the answer ``value`` as JSON, with ``cut``: cut where its grammar
    would have cut it (``grammar_cut``); the text as sent is kept when it changed."""
    if isinstance(value, str):
        response.raw_text, response.text = response.text, value
        return
    fitted, notes = cut_answer(value, schema) if cut else (value, [])
    answer = json.dumps(fitted, ensure_ascii=False)
    sent = response.text if response.text.strip() else json.dumps(value, ensure_ascii=False)
    if sent != answer:  # text around the object, or the grammar's cuts: keep what came
        response.raw_text = sent
    response.text, response.adapted = answer, notes


def parse_action_reply(response: ModelResponse, request: ModelRequest | None = None) -> ModelResponse:
    """``response`` with the JSON action protocol's tool call (or answer) read from its text.

    A reply that is the action object (fenced or not) is the action. One found inside prose (a
    server without grammar support) is taken only for a tool without side effects
    (``request.text_tools``) or ``finish``: an object the model quoted must not edit or run
    anything; such a reply is no valid action (retried), never run. Without a ``request`` (a
    direct call, as tests make) no tool is held back.
    """
    value = extract_json_object(response.text)
    if value is None:
        response.parse_ok = False
        return response
    if set(value) == {"final"}:  # the earlier protocol's wrapper around a final answer
        value = value["final"] if isinstance(value["final"], dict) else value
    action = parse_action(value)
    if action is None and "tool" in value:
        response.parse_ok = False  # an action with an unusable tool name: retried, not an answer
        return response
    if action is None:
        # An unwrapped answer ({"status": ..., "summary": ...}) from a server without grammar
        # support: hand it to the contract check, which decides whether it is valid.
        response.text = json.dumps(value, ensure_ascii=False)
        return response
    name, args, thought = action
    acting = request is not None and name != FINISH and name not in (request.text_tools or ())
    if acting and sole_json_object(response.text) is None:  # quoted in prose, not sent
        response.parse_ok = False
        response.adapted = [f"{name} found inside prose, not sent as the reply: not run"]
        return response
    response.tool_calls = [ToolCall(id=f"call-{uuid.uuid4().hex[:8]}", name=name, arguments=args)]
    response.text = thought
    return response


def reply_usage(raw: Any, request: ModelRequest, text: str) -> Usage:
    """The call's usage as the server reported it, or estimated (and marked so) where it did not."""
    usage = getattr(raw, "usage", None)
    prompt = usage_figure(getattr(usage, "prompt_tokens", None))
    # Negative, huge or non-integer counts would hand budget back to the run or overflow a
    # float later (``10**400``): treat them as missing.
    if prompt is not None:
        details = getattr(usage, "prompt_tokens_details", None)
        cached = usage_figure(getattr(details, "cached_tokens", None)) or 0
        timings = getattr(raw, "timings", None)
        evaluated = usage_figure(timings.get("prompt_n")) if isinstance(timings, dict) else None
        if not cached and evaluated is not None:
            # llama-server reports the prompt tokens it evaluated; the rest came from its cache.
            cached = prompt - evaluated
        completion = usage_figure(getattr(usage, "completion_tokens", None))
        return Usage(
            prompt_tokens=prompt,
            completion_tokens=completion if completion is not None else estimate_text(text),
            cached_tokens=min(max(cached, 0), prompt),
            estimated=completion is None,
        )
    # The provider gave no usable usage: estimate, and say so.
    return Usage(
        prompt_tokens=estimate_messages(request.messages, request.tools),
        completion_tokens=estimate_text(text),
        estimated=True,
    )


def usage_figure(value: Any) -> int | None:
    """``value`` as a usage count: a non-negative integer up to ``MAX_USAGE_FIGURE``, else None."""
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_USAGE_FIGURE:
        return None
    return value
