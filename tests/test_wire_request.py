"""One model call builds its request once: counting, sending and reading share one wire form.

Real launches through the OpenAI-compatible adapter against the scripted fake endpoint
(``benchmarks/fake_endpoint.py``, in this process), prompts counted as on llama-server
(``count_url``), with spies on the pieces of a request's wire form wherever a module holds them.
"""

from __future__ import annotations

import sys
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from conftest import REPO

from subagent_lab.agents.launcher import SubagentLauncher, SubagentRequest
from subagent_lab.config.profiles import LabConfig
from subagent_lab.core.types import Message, ModelRequest
from subagent_lab.models import actions, strict_schema
from subagent_lab.models.openai_chat import OpenAIChatModel

sys.path.insert(0, str(REPO / "benchmarks"))
from fake_endpoint import FakeEndpoint


def _spy(monkeypatch: Any, calls: Counter[str], name: str, real: Callable[..., Any]) -> None:
    """Count the outermost calls of ``real`` (not its calls to itself) through every models
    module that holds it, under whatever name it is imported there."""
    depth = [0]

    def spy(*args: Any, **kwargs: Any) -> Any:
        if depth[0] == 0:
            calls[name] += 1
        depth[0] += 1
        try:
            return real(*args, **kwargs)
        finally:
            depth[0] -= 1

    for module in [m for key, m in sys.modules.items() if key.startswith("subagent_lab.models")]:
        for attr, value in list(vars(module).items()):
            if value is real:
                monkeypatch.setattr(module, attr, spy)


def _launch(
    config: LabConfig, workspace: Path, tmp_path: Path, protocol: str, monkeypatch: Any
) -> tuple[Counter[str], int]:
    """What one launch built, and how many chat completions it posted."""
    calls: Counter[str] = Counter()
    _spy(monkeypatch, calls, "system prompt", actions.tool_lines)
    _spy(monkeypatch, calls, "answer tool", strict_schema.answer_tool)
    _spy(monkeypatch, calls, "decoded", actions.decoding_schema)
    from subagent_lab.models import chat_reply

    def reader_decodes(*args: Any) -> Any:
        calls["decoded by the reader"] += 1
        return actions.decoding_schema(*args)

    if hasattr(chat_reply, "decoding_schema"):  # the reader decoding the answer schema again
        monkeypatch.setattr(chat_reply, "decoding_schema", reader_decodes)
    with FakeEndpoint(max_requests=60, max_seconds=60) as fake:
        model = OpenAIChatModel(
            base_url=fake.url, model="fake", tool_protocol=protocol, count_url=fake.url.removesuffix("/v1")
        )
        launcher = SubagentLauncher(
            config, workspace, model_factory=lambda c, m: model, trace_dir=tmp_path / "runs"
        )
        result = launcher.launch(SubagentRequest(task="Where is `login` defined?"))
    assert result.terminal_reason == "completed", result.detail
    return calls, fake.answered[200]


def test_a_json_call_renders_its_system_prompt_once_for_counting_and_sending(
    config: LabConfig, workspace: Path, tmp_path: Path, monkeypatch: Any
) -> None:
    """Counting on the server and sending read the same wire form: the system prompt with the
    protocol and tool list is put together once per call (counting used to build its own)."""
    calls, posted = _launch(config, workspace, tmp_path, "json", monkeypatch)
    assert posted >= 3  # a search, a finish, the answer
    assert calls["system prompt"] == posted
    assert calls["decoded"] >= 1 and calls["decoded by the reader"] == 0


def test_a_native_answer_is_decoded_once_and_read_against_that(
    config: LabConfig, workspace: Path, tmp_path: Path, monkeypatch: Any
) -> None:
    """The final answer's tool is made once (for counting and sending alike), and the reply is
    read against the schema the request was built with: one decode per call, none by the reader."""
    calls, posted = _launch(config, workspace, tmp_path, "native", monkeypatch)
    assert calls["answer tool"] == 1  # the one final call
    assert calls["decoded"] == posted and calls["decoded by the reader"] == 0


def test_each_call_builds_one_wire_request(
    config: LabConfig, workspace: Path, tmp_path: Path, monkeypatch: Any
) -> None:
    """One ``build_wire`` per chat completion posted, whatever the protocol."""
    from subagent_lab.models import openai_chat, wire

    built = [0]

    def counted(*args: Any, **kwargs: Any) -> Any:
        built[0] += 1
        return wire.build_wire(*args, **kwargs)

    monkeypatch.setattr(openai_chat, "build_wire", counted)
    for protocol in ("json", "native"):
        built[0] = 0
        _, posted = _launch(config, workspace, tmp_path / protocol, protocol, monkeypatch)
        assert built[0] == posted, protocol


def test_a_copy_of_the_counted_request_is_sent_from_the_same_build_and_a_changed_one_is_not() -> None:
    """A shallow copy (an endpoint pool's, with a shorter timeout) fits the build; a request whose
    message list changed in place since (compaction's candidates) does not."""
    model = OpenAIChatModel(base_url="http://127.0.0.1:9/v1", model="m")
    messages = [Message(role="system", content="S"), Message(role="user", content="find login")]
    request = ModelRequest(messages=messages, phase="final", final_schema={"type": "object"})
    first = model.wire(request)
    copy = model.wire(request.model_copy(update={"timeout_s": 3.0}))
    assert copy.body is first.body and copy.request.timeout_s == 3.0
    request.messages[1] = Message(role="user", content="find logout")
    changed = model.wire(request)
    assert changed is not first and "logout" in changed.body["messages"][1]["content"]


@pytest.mark.parametrize("exact", [False, True])
def test_the_call_walk_is_at_most_20_stays(exact: bool, monkeypatch: Any) -> None:
    """``benchmarks/walk_call.py``'s walk of a child's final-answer call (JSON protocol, grammar)."""
    from walk_call import walk

    monkeypatch.chdir(REPO)
    stays, wire = walk("json", exact)
    names = [name for _, name, _ in stays]
    assert len(stays) <= 20, names
    assert names.count("build_wire") == 1 and wire < len(stays)
