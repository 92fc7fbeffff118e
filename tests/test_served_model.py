"""The model that ran, asserted: an endpoint that reports serving another model than the one asked
for ends the run ``model_mismatch``, unless the profile allows a fallback (then ``fallback``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from conftest import LOGIN_ANSWER
from redteam.support import FakeOpenAI, Reply, act, answer, chat

from subagent_lab.agents.launcher import SubagentLauncher, SubagentRequest, SubagentResult
from subagent_lab.config.profiles import LabConfig, ModelConfig
from subagent_lab.core.model import Model, same_model
from subagent_lab.core.trace import ModelCalled, RunEnded, read_trace
from subagent_lab.core.types import ModelChoice
from subagent_lab.models.openai_chat import OpenAIChatModel


@pytest.mark.parametrize(
    ("asked", "served", "same"),
    [
        ("qwen2.5-coder-0.5b", "qwen2.5-coder-0.5b", True),
        ("gpt-4o", "gpt-4o-2024-08-06", True),  # a dated snapshot of the model asked for
        ("openai/gpt-4o", "GPT-4o", True),  # a provider prefix and case
        ("gpt-4o", "gpt-4o-mini", False),  # another model whose name starts the same
        ("qwen2.5-coder-0.5b", "qwen2.5-coder-1.5b", False),
        ("claude-sonnet-4-5", "claude-haiku-4-5", False),
    ],
)
def test_same_model(asked: str, served: str, same: bool) -> None:
    assert same_model(asked, served) is same


def _served_by(model_id: str, content: str) -> Reply:
    body = chat(content)
    body["model"] = model_id
    return Reply(body=body)


def _launch(
    config: LabConfig, workspace: Path, tmp_path: Path, replies: list[Reply], **overrides: Any
) -> tuple[SubagentResult, FakeOpenAI]:
    with FakeOpenAI(replies) as server:

        def make(choice: ModelChoice, cfg: ModelConfig) -> Model:
            # The real adapter, asking for the profile's model by its configured id.
            return OpenAIChatModel(base_url=server.url, model=cfg.model, max_retries=0, timeout_s=10)

        launcher = SubagentLauncher(config, workspace, model_factory=make, trace_dir=tmp_path / "runs")
        result = launcher.launch(SubagentRequest(task="Where is login implemented?", overrides=overrides))
    return result, server


def test_an_endpoint_serving_another_model_ends_the_run(
    config: LabConfig, workspace: Path, tmp_path: Path
) -> None:
    asked = config.models["light"].model  # type: ignore[union-attr]
    other = "qwen2.5-coder-1.5b"
    assert not same_model(asked, other)
    result, server = _launch(
        config, workspace, tmp_path, [_served_by(other, act("Grep", pattern="def login"))]
    )
    assert server.requests[0].body["model"] == asked
    assert result.terminal_reason == "model_mismatch" and result.status == "failed"
    assert asked in result.detail and other in result.detail
    assert result.served_model_ids == [other] and result.model_calls == 1
    # It stopped rather than fell back, and the model that answered is the one reported.
    assert result.fallback is False and result.model_id == other
    assert result.usage.total_tokens > 0  # the call that revealed it was made and is charged
    assert result.tool_usage == {}  # nothing the other model chose was run
    events = read_trace(result.trace_path)
    assert [e.model_id for e in events if isinstance(e, ModelCalled)] == [other]
    assert isinstance(events[-1], RunEnded) and events[-1].terminal_reason == "model_mismatch"


def test_a_profile_that_allows_a_fallback_runs_on_and_says_so(
    config: LabConfig, workspace: Path, tmp_path: Path
) -> None:
    other = "qwen2.5-coder-1.5b"
    replies = [_served_by(other, act("Grep", pattern="def login")), _served_by(other, answer(LOGIN_ANSWER))]
    result, _ = _launch(config, workspace, tmp_path, replies, allow_model_fallback=True)
    assert result.terminal_reason == "completed", result.detail
    assert result.fallback and result.served_model_ids == [other] and result.model_id == other


def test_a_dated_snapshot_of_the_model_is_no_fallback(
    config: LabConfig, workspace: Path, tmp_path: Path
) -> None:
    snapshot = f"{config.models['light'].model}-2026-01-01"  # type: ignore[union-attr]
    replies = [
        _served_by(snapshot, act("Grep", pattern="def login")),
        _served_by(snapshot, answer(LOGIN_ANSWER)),
    ]
    result, _ = _launch(config, workspace, tmp_path, replies)
    assert result.terminal_reason == "completed", result.detail
    assert not result.fallback and result.served_model_ids == [snapshot]
    assert result.model_id == config.models["light"].model  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("served", "reason", "choice_fell_back", "expected"),
    [
        ([], "completed", False, ("asked-1b", False)),  # nothing reported: the configured id
        (["asked-1b-2026-01-01"], "completed", False, ("asked-1b", False)),  # a snapshot: the same model
        (["other-7b"], "completed", False, ("other-7b", True)),  # allowed, went on: a fallback
        (["other-7b"], "model_mismatch", False, ("other-7b", False)),  # stopped: no fallback
        (["other-7b"], "model_mismatch", True, ("other-7b", True)),  # light fell back to main before
    ],
)
def test_served_identity(
    served: list[str], reason: str, choice_fell_back: bool, expected: tuple[str, bool]
) -> None:
    from subagent_lab.agents.result import served_identity

    assert served_identity("asked-1b", choice_fell_back, served, reason) == expected
