"""One call's request as the wire has it, built once (``build_wire``) and carried through counting,
sending and reading.

A ``WireRequest`` holds the keyword arguments of ``chat.completions.create`` (the messages
rendered, the action's grammar or the answer's schema decoded, the sampling) and the decoded
answer schema the reply is read against. Counting posts its messages (and a native request's
tools) to the server's template; sending posts its body with the call's admitted output cap;
reading takes the answer schema from it instead of decoding the contract again.
"""

from __future__ import annotations

import operator
from typing import Any

from pydantic import BaseModel, ConfigDict

from subagent_lab.core.types import Message, ModelRequest
from subagent_lab.models.actions import PROTOCOL, action_schema, decoding_schema, tool_lines
from subagent_lab.models.json_reply import utf8_safe
from subagent_lab.models.strict_schema import ANSWER_TOOL, answer_tool


class WireRequest(BaseModel):
    """A request as one endpoint is sent it: built once per call (``build_wire``)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    request: ModelRequest
    rendered: tuple[Message, ...]
    """The request's messages as they were when rendered (a list changed in place since, as
    compaction changes its candidates, asks for another body)."""
    body: dict[str, Any]
    """``chat.completions.create``'s keywords, ``timeout`` aside, in the order the SDK writes them
    (so the body posted is the same bytes: ``tests/test_adapter.py`` compares the two requests);
    ``max_tokens`` is the request's as built (the adapter posts the one the call was admitted with)."""
    answer_schema: dict[str, Any] | None = None
    """The final answer's schema as decoded, for the reply reader (None: no answer is read this
    call: a JSON-protocol action turn, or a request without a final schema)."""
    native: bool = False
    """The endpoint's own tool calls carry the actions (else the JSON action protocol)."""
    grammar: bool = True
    """The endpoint decodes under the request's schemas (``constrain_output``)."""

    def fits(self, request: ModelRequest) -> bool:
        """Whether ``request`` asks for this body: the request it was built for, or a shallow copy
        of it (an endpoint pool's, with a shorter timeout), its messages unchanged."""
        mine = self.request
        return (
            len(request.messages) == len(self.rendered)  # and not changed in place since
            and all(map(operator.is_, request.messages, self.rendered))
            and request.tools is mine.tools
            and request.final_schema is mine.final_schema
            and request.arg_choices is mine.arg_choices
            and request.allowed_tools == mine.allowed_tools
            and (request.phase, request.temperature, request.seed, request.top_logprobs)
            == (mine.phase, mine.temperature, mine.seed, mine.top_logprobs)
            and (request.thought_max_chars, request.arg_max_chars)
            == (mine.thought_max_chars, mine.arg_max_chars)
        )


def build_wire(
    request: ModelRequest,
    messages: list[dict[str, Any]],
    *,
    model: str,
    native: bool,
    grammar: bool,
    strict: bool,
) -> WireRequest:
    """The wire form of ``request`` for ``model``, its ``messages`` already rendered (in order).

    On the JSON protocol the system message gains the protocol text and the full tool list every
    turn, whatever the grammar allows: a stable prompt prefix. A final answer's schema is decoded
    once; natively it is the arguments of a ``final_answer`` tool call the request forces (strict
    where ``strict``), else the grammar's ``response_format`` (with ``grammar``), as is an action
    turn's schema on the JSON protocol.
    """
    if not native and messages and messages[0]["role"] == "system" and request.tools:
        content = messages[0]["content"] + "\n" + PROTOCOL + tool_lines(request.tools)
        messages = [utf8_safe({"role": "system", "content": content}), *messages[1:]]
    answer = None
    if request.final_schema and (request.phase == "final" or native):
        answer = decoding_schema(request.final_schema)
    body: dict[str, Any] = {"model": model, "messages": messages}
    if request.top_logprobs:  # a judged candidate: the first token's alternatives (core.judge)
        body["logprobs"] = True
    body["max_tokens"] = request.max_tokens
    schema: dict[str, Any] | None = None
    tools: dict[str, Any] = {}
    if request.phase == "final":
        if answer is not None and native:
            # The endpoint's own tool-call machinery (strict where it has it) holds the answer to
            # the schema.
            tools["tool_choice"] = {"type": "function", "function": {"name": ANSWER_TOOL}}
            tools["tools"] = [answer_tool(answer, strict=strict)]
        else:
            schema = answer
    elif native:
        tools["tools"] = request.tools
    else:
        schema = action_schema(request)
    if schema is not None and grammar:
        body["response_format"] = {"type": "json_schema", "json_schema": {"name": "reply", "schema": schema}}
    if request.seed is not None:
        body["seed"] = request.seed
    body["temperature"] = request.temperature
    body.update(tools)
    if request.top_logprobs:
        body["top_logprobs"] = request.top_logprobs
    # Every field is built here as its type says: validating it again would only copy the body.
    return WireRequest.model_construct(
        request=request,
        rendered=tuple(request.messages),
        body=body,
        answer_schema=answer,
        native=native,
        grammar=grammar,
    )
