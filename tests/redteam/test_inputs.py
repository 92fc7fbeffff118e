"""Issue 24: inputs that crashed the harness instead of being refused.

A Task ``context`` nested hundreds of levels deep (the parent's trace could not serialise it),
tool arguments nested as deep from a real server, and a ``profiles.yaml`` holding a huge integer
or a NUL byte (a raw ``ValueError``). Each must be a clear, named refusal: a ToolError the model
sees as an observation, or a ``ConfigError`` naming the file and the field.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, cast

import pytest
from conftest import REPO

from redteam.support import FakeOpenAI, Reply, chat, native_call
from subagent_lab.agents.task_tool import MAX_CONTEXT_DEPTH, TaskContext, check_context, task
from subagent_lab.config.profiles import load_config
from subagent_lab.core.tool import ToolError
from subagent_lab.core.trace import ModelCalled, TraceWriter
from subagent_lab.core.types import ConfigError, Message, ModelRequest, Usage
from subagent_lab.models.json_reply import MAX_ARG_DEPTH
from subagent_lab.models.openai_chat import OpenAIChatModel


def _nested(levels: int) -> dict[str, Any]:
    value: dict[str, Any] = {"leaf": "x"}
    for _ in range(levels - 1):
        value = {"inner": value}
    return value


def _depth(value: Any) -> int:
    depth, level = 0, [value]
    while level:
        depth += 1
        level = [
            c
            for v in level
            if isinstance(v, (dict, list))
            for c in (v.values() if isinstance(v, dict) else v)
        ]
        level = [c for c in level if isinstance(c, (dict, list))]
    return depth


def test_a_deep_task_context_is_refused_with_a_clear_error() -> None:
    ctx = cast(TaskContext, object())  # refused before the launcher is touched
    with pytest.raises(ToolError, match=f"nested more than {MAX_CONTEXT_DEPTH} levels"):
        task(ctx, "find login", "Find where login is implemented.", context=_nested(500))
    check_context(_nested(MAX_CONTEXT_DEPTH))  # what a real context needs still passes


def test_a_huge_task_context_is_refused() -> None:
    with pytest.raises(ToolError, match="characters as JSON"):
        check_context({"notes": "x" * 100_000})


def test_deep_arguments_from_a_server_reach_the_trace_flattened(tmp_path: Path) -> None:
    deep = json.dumps({"description": "d", "prompt": "p", "context": _nested(800)})
    reply = Reply(body=chat(None, tool_calls=[native_call("Task", deep)], finish_reason="tool_calls"))
    with FakeOpenAI([reply]) as server:
        model = OpenAIChatModel(base_url=server.url, model="m", tool_protocol="native", max_retries=0)
        request = ModelRequest(
            messages=[Message(role="user", content="go")],
            tools=[{"type": "function", "function": {"name": "Task", "parameters": {"type": "object"}}}],
            timeout_s=10.0,
        )
        response = model.complete(request)
    arguments = response.tool_calls[0].arguments
    assert _depth(arguments) <= MAX_ARG_DEPTH + 1
    with pytest.raises(ToolError, match="nested more than"):
        check_context(arguments["context"])
    # The event the parent writes for this reply serialises (it crashed the run before).
    writer = TraceWriter(tmp_path / "t.jsonl", "r")
    writer.emit(
        ModelCalled(
            run_id="r", purpose="step", prompt_tokens_est=1, max_tokens=1, usage=Usage(), latency_s=0.0,
            finish_reason="stop",
            tool_calls=[c.model_dump() for c in response.tool_calls],
        )
    )  # fmt: skip
    assert "nested deeper than" in (tmp_path / "t.jsonl").read_text()


@pytest.mark.parametrize(
    ("edit", "field"),
    [
        (("total_token_budget: 32000", "total_token_budget: " + "9" * 5000), "total_token_budget"),
        (("total_token_budget: 32000", "total_token_budget: " + str(10**30)), "total_token_budget"),
        (("port: 8765", 'port: "87\\x0065"'), "server.port"),
        (("host: 127.0.0.1", 'host: "127.0.0.1\\0"'), "server.host"),
    ],
)
def test_profiles_yaml_numbers_and_nul_bytes_are_config_errors(
    tmp_path: Path, edit: tuple[str, str], field: str
) -> None:
    text = (REPO / "profiles.yaml").read_text()
    assert edit[0] in text
    path = tmp_path / "profiles.yaml"
    path.write_text(text.replace(edit[0], edit[1], 1))
    with pytest.raises(ConfigError) as failure:
        load_config(path)
    message = str(failure.value)
    assert str(path) in message and field.rsplit(".", 1)[-1] in message, message


def test_the_trace_writer_survives_any_depth(tmp_path: Path) -> None:
    """A model that is not the adapter (scripted, custom) can still hand the loop 600-level
    arguments: the event is written with the deep part cut and marked, never an exception."""
    from subagent_lab.core.trace import ToolStarted, read_trace

    writer = TraceWriter(tmp_path / "t.jsonl", "r")
    writer.emit(ToolStarted(run_id="r", call_id="c", tool="Task", arguments={"context": _nested(600)}))
    (event,) = read_trace(tmp_path / "t.jsonl")
    assert isinstance(event, ToolStarted) and "nested deeper than" in json.dumps(event.arguments)
