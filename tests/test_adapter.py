"""The OpenAI-compatible adapter: request shapes and failure reporting (no model needed)."""

from __future__ import annotations

import importlib
import json
from pathlib import Path
from typing import Any

from subagent_lab.agents.launcher import SubagentLauncher, SubagentRequest
from subagent_lab.config.profiles import LabConfig, ModelConfig
from subagent_lab.core.contracts import contract_schema
from subagent_lab.core.policy import FINISH_SCHEMA
from subagent_lab.core.trace import read_trace
from subagent_lab.core.types import Message, ModelRequest, ModelResponse, ToolCall
from subagent_lab.models.actions import action_schema
from subagent_lab.models.bounded_http import openai_http_package
from subagent_lab.models.chat_reply import parse_action_reply
from subagent_lab.models.openai_chat import OpenAIChatModel
from subagent_lab.tools.registry import READONLY_TOOLS, simple_tools


def test_dead_server_is_a_model_error_naming_the_url(config: LabConfig, workspace: Path) -> None:
    """No hang and no exception: the URL is in the result's detail."""
    dead = ModelConfig(base_url="http://127.0.0.1:9/v1", model="x", max_retries=1, timeout_s=5)
    cfg = config.model_copy(update={"models": {"main": dead, "light": dead}})
    result = SubagentLauncher(cfg, workspace).launch(SubagentRequest(task="find login"))
    assert result.terminal_reason == "model_error" and "http://127.0.0.1:9/v1" in result.detail
    assert read_trace(result.trace_path)[-1].kind == "run_ended"


def test_json_protocol_schema_offers_the_allowed_flat_actions() -> None:
    tools = [t.schema() for t in simple_tools().values()] + [FINISH_SCHEMA]
    request = ModelRequest(
        messages=[],
        tools=tools,
        allowed_tools=["Grep", "Read", "finish"],
        arg_choices={"Read": {"path": ["a.py"]}},
        thought_max_chars=50,
        arg_max_chars=40,
    )
    schema = action_schema(request)
    options = {opt["properties"]["tool"]["const"]: opt for opt in schema["anyOf"]}
    assert sorted(options) == ["Grep", "Read", "finish"]  # Glob is not allowed this turn
    for opt in options.values():  # a brief thought first, then the tool and its own arguments, flat
        assert list(opt["properties"])[:2] == ["thought", "tool"] and opt["required"][:2] == [
            "thought",
            "tool",
        ]
        assert opt["properties"]["thought"]["maxLength"] == 50
    assert options["Grep"]["properties"]["pattern"]["maxLength"] == 40  # a runaway argument is cut
    assert options["Read"]["properties"]["path"] == {"type": "string", "enum": ["a.py"]}
    assert set(options["Grep"]["properties"]) == {
        "thought",
        "tool",
        "pattern",
        "path",
    }  # nothing else to fill


def test_json_protocol_messages_and_parsing() -> None:
    model = OpenAIChatModel(base_url="http://127.0.0.1:9/v1", model="m")
    request = ModelRequest(
        messages=[Message(role="system", content="S"), Message(role="user", content="T")],
        tools=[READONLY_TOOLS["Grep"].schema()],
    )
    kwargs = model.wire(request).body
    assert "Grep" in kwargs["messages"][0]["content"] and kwargs["response_format"]["type"] == "json_schema"
    flat = parse_action_reply(ModelResponse(text='{"thought": "look", "tool": "Grep", "pattern": "x"}'))
    assert flat.tool_calls[0].arguments == {"pattern": "x"} and flat.text == "look"
    final_kwargs = model.wire(
        request.model_copy(update={"phase": "final", "final_schema": {"type": "object"}})
    ).body
    assert final_kwargs["response_format"]["json_schema"]["schema"] == {"type": "object"}
    call = parse_action_reply(ModelResponse(text='{"tool": "Grep", "arguments": {"pattern": "x"}}'))
    assert call.tool_calls[0].name == "Grep" and call.tool_calls[0].arguments == {"pattern": "x"}
    done = parse_action_reply(ModelResponse(text='{"final": {"status": "completed"}}'))
    assert done.tool_calls == [] and done.text == '{"status": "completed"}'
    junk = parse_action_reply(ModelResponse(text="I think the answer is 42"))
    assert not junk.parse_ok and junk.text == "I think the answer is 42"
    fenced = parse_action_reply(
        ModelResponse(text='Sure:\n```json\n{"tool": "Read", "arguments": {"path": "a"}}\n```')
    )
    assert fenced.tool_calls[0].name == "Read"
    qwen = parse_action_reply(ModelResponse(text='{"name": "Glob", "arguments": {"pattern": "*.py"}}'))
    assert qwen.tool_calls[0].name == "Glob"
    bare = parse_action_reply(ModelResponse(text='{"status": "completed", "summary": "s"}'))
    assert bare.parse_ok and bare.tool_calls == [] and json.loads(bare.text)["summary"] == "s"


def test_decoding_schema_keeps_properties_named_like_keywords() -> None:
    from subagent_lab.agents.task_tool import TASK_TOOL
    from subagent_lab.models.actions import decoding_schema

    params = decoding_schema(TASK_TOOL.schema()["function"]["parameters"])
    assert {"description", "prompt", "subagent_type"} <= set(params["properties"])
    assert set(params["required"]) <= set(params["properties"])
    assert "description" not in params["properties"]["prompt"]  # the keyword itself is still dropped


def _requests() -> list[ModelRequest]:
    """Requests of every shape the adapter sends: act and final, tool calls and results, unicode."""
    messages = [
        Message(role="system", content="S"),
        Message(role="user", content="Where is the \u00e9l\u00e8ve's loader? \u2014 cite path:line"),
        Message(role="assistant", content="look", tool_calls=[ToolCall(id="c1", name="Grep",
                                                                      arguments={"pattern": "x"})]),
        Message(role="tool", content="a.py:1: x\n", tool_call_id="c1", name="Grep"),
    ]  # fmt: skip
    act = ModelRequest(
        messages=messages,
        tools=[*(t.schema() for t in READONLY_TOOLS.values()), FINISH_SCHEMA],
        allowed_tools=["Read", "finish"],
        arg_choices={"Read": {"path": ["a.py"]}},
        seed=7,
    )
    final = act.model_copy(
        update={"phase": "final", "final_schema": contract_schema("ExploreResult"), "seed": None}
    )
    bare = final.model_copy(update={"final_schema": None, "temperature": 0.7})
    return [act, final, bare]


def test_the_adapter_posts_the_request_the_sdk_would() -> None:
    """``_post`` skips the SDK's parameter transform: every request it sends is the one
    ``chat.completions.create`` sends, byte for byte (method, URL, headers, body)."""
    http = importlib.import_module(openai_http_package())
    reply = {
        "id": "r", "object": "chat.completion", "created": 1, "model": "m",
        "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "{}"}}],
        "usage": {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4},
    }  # fmt: skip
    sent: list[Any] = []

    def answer(request: Any) -> Any:
        sent.append(request)
        return http.Response(200, json=reply)

    compared = 0
    for protocol, constrain, strict in [("json", True, True), ("json", False, True), ("native", True, False)]:
        model = OpenAIChatModel(
            base_url="http://127.0.0.1:9/v1", model="m", api_key="k", tool_protocol=protocol,
            constrain_output=constrain, strict_tools=strict,
        )  # fmt: skip
        model._client._client = http.Client(transport=http.MockTransport(answer))
        for request in _requests():
            wire = model.wire(request)
            by_sdk = model._client.chat.completions.create(**wire.body, timeout=12.5)
            by_post = model._post(wire, 12.5)
            sdk, ours = sent[-2:]
            assert (ours.method, str(ours.url), ours.content) == (sdk.method, str(sdk.url), sdk.content)
            assert list(ours.headers.raw) == list(sdk.headers.raw)
            assert by_post.model_dump() == by_sdk.model_dump()
            compared += 1
    assert compared == 9 and len({r.content for r in sent}) > 3  # the shapes differ


def test_a_request_is_rendered_once_for_counting_and_sending(monkeypatch: Any) -> None:
    """Counting and sending share one rendering of each message, and a conversation that grows by
    appending renders only its new messages; the wire body is what a fresh adapter builds."""
    from subagent_lab.models import openai_chat

    rendered: list[str] = []
    real = openai_chat.render_message

    def spy(msg: Message, native: bool) -> dict[str, Any]:
        rendered.append(msg.role)
        return real(msg, native)

    monkeypatch.setattr(openai_chat, "render_message", spy)
    for protocol in ("json", "native"):
        rendered.clear()
        model = OpenAIChatModel(base_url="http://127.0.0.1:9/v1", model="m", tool_protocol=protocol)
        first = [Message(role="system", content="S"), Message(role="user", content="find login")]
        request = ModelRequest(messages=first, tools=[READONLY_TOOLS["Grep"].schema()])
        sent = model.wire(request).body
        assert rendered == ["system", "user"]
        call = ToolCall(id="c1", name="Grep", arguments={"pattern": "login"})
        result = Message(role="tool", content="a.py:1: def login", tool_call_id="c1", name="Grep")
        grown = [*first, Message(role="assistant", content="look", tool_calls=[call]), result]
        later = request.model_copy(
            update={"messages": grown, "phase": "final", "final_schema": {"type": "object"}}
        )
        again = model.wire(later).body
        assert rendered == ["system", "user", "assistant", "tool"]
        fresh = OpenAIChatModel(base_url="http://127.0.0.1:9/v1", model="m", tool_protocol=protocol)
        assert (sent, again) == (fresh.wire(request).body, fresh.wire(later).body)
