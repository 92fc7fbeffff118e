"""Issue 52, item 18: a Task context nested 300 levels deep from a Python-level model.

HTTP adapters cut tool arguments at 64 levels, but a model object in the process (scripted,
custom) hands the loop its arguments as they are. The Task tool refuses the context, yet the
assistant message holding it stays in the conversation, and on ``3cb5cb3`` the parent's next call
crashed in ``request_digest`` (pydantic's "Maximum serialization depth exceeded"). The digest is
now computed without recursion for such data, and is the same digest as before for the rest.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from subagent_lab.agents.parent import MainAgent
from subagent_lab.config.profiles import LabConfig, ModelConfig
from subagent_lab.core.types import (
    Message,
    ModelRequest,
    ModelResponse,
    ToolCall,
    canonical_json,
    request_digest,
)
from subagent_lab.models.scripted import ScriptedModel, final
from subagent_lab.tools.registry import simple_tools


def _nested(levels: int, leaf: str = "x") -> dict[str, Any]:
    value: dict[str, Any] = {"leaf": leaf}
    for _ in range(levels - 1):
        value = {"inner": value}
    return value


def _request(context: dict[str, Any]) -> ModelRequest:
    call = ToolCall(id="c1", name="Task", arguments={"description": "d", "prompt": "p", "context": context})
    return ModelRequest(
        messages=[Message(role="user", content="go"), Message(role="assistant", tool_calls=[call])],
        tools=[t.schema() for t in simple_tools().values()],
    )


def test_a_300_level_context_has_a_digest_not_a_crash() -> None:
    first, second = request_digest(_request(_nested(300))), request_digest(_request(_nested(300, "y")))
    assert len(first) == 64 and first != second  # a digest of everything, the deep leaf included
    assert request_digest(_request(_nested(300))) == first
    assert len(request_digest(_request(_nested(5000)))) == 64


def test_the_iterative_form_writes_what_json_dumps_writes() -> None:
    """Ordinary requests keep their digests (caches and recorded keys stay valid): the fallback
    writes the same text as the serialiser's path."""
    request = _request({"hint": "app/auth.py", "lines": [4, 5.5, None, True], "\u00e9": {"b": 1, "a": []}})
    request = request.model_copy(
        update={"final_schema": {"type": "object"}, "arg_choices": {"Read": {"path": ["a"]}}}
    )
    fields = {name: getattr(request, name) for name in type(request).model_fields}
    body = request.model_dump(mode="json")
    for name in ("timeout_s", "text_tools"):
        fields.pop(name), body.pop(name)
    assert canonical_json(fields) == json.dumps(body, sort_keys=True, ensure_ascii=False)


def test_the_parent_survives_a_300_level_task_context(
    config: LabConfig, workspace: Path, tmp_path: Path
) -> None:
    deep = ToolCall(
        id="t1", name="Task", arguments={"description": "d", "prompt": "Find login.", "context": _nested(300)}
    )
    model = ScriptedModel([ModelResponse(tool_calls=[deep]), final("login is in app/auth.py.")])
    gateway = ModelConfig(base_url="http://127.0.0.1:9/v1", model="m")
    cfg = config.model_copy(update={"models": {**config.models, "main": gateway}})
    agent = MainAgent(cfg, workspace, model_factory=lambda c, m: model, scratch_dir=tmp_path)
    result = agent.run("Where is login?")
    assert result.terminal_reason == "completed", result.detail
    assert "nested more than" in Path(result.trace_path).read_text()  # the Task call was refused, visibly
