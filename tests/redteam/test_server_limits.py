"""A model server that stalls, over-spends, crashes or floods a run, over real HTTP (issue 24).

Each scenario goes through the real adapter inside ``launch()`` against ``FakeOpenAI`` on
127.0.0.1: a reply trickled one byte at a time (an overall deadline, not a per-read one, must
end it), usage figures of ``10**400`` and ``0/0`` (a budget that trusts the server would crash or
be over-spent), integers past Python's 4,300-digit limit in the body and in tool arguments, and
a reply over the byte cap. Every run must end with a terminal reason other than ``crashed``.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from redteam.support import GOOD, FakeOpenAI, Reply, act, answer, chat, native_call, ok, openai_factory
from subagent_lab.agents.launcher import SubagentLauncher, SubagentRequest, SubagentResult
from subagent_lab.config.profiles import LabConfig
from subagent_lab.core.trace import ModelCalled, RunEnded, ToolFinished, read_trace

GREP = ok(act("Grep", pattern="def login"))


def _launch(
    server: FakeOpenAI, config: LabConfig, workspace: Path, tmp_path: Path, *, timeout_s: float = 10.0,
    overrides: dict[str, object] | None = None, protocol: str = "json", **adapter: object,
) -> SubagentResult:  # fmt: skip
    factory = openai_factory(server.url, protocol=protocol, max_retries=1, timeout_s=timeout_s, **adapter)
    launcher = SubagentLauncher(config, workspace, model_factory=factory, trace_dir=tmp_path / "runs")
    request = SubagentRequest(
        task="Where is login implemented?", overrides={"min_tool_calls": 0, **(overrides or {})}
    )
    result = launcher.launch(request)
    events = read_trace(result.trace_path)
    assert isinstance(events[-1], RunEnded) and events[-1].terminal_reason == result.terminal_reason
    assert result.terminal_reason != "crashed", result.detail
    return result


# --- stalls ----------------------------------------------------------------------------------------


def test_a_trickling_reply_cannot_outlive_the_call_deadline(
    config: LabConfig, workspace: Path, tmp_path: Path
) -> None:
    # One byte every 50 ms answers every read long before httpx's per-read timeout: only an
    # overall deadline ends the attempt. The reply would take ~25 s to arrive in full.
    slow = Reply(body=chat(act("Grep", pattern="def login")), action="trickle", delay=0.05)
    with FakeOpenAI([slow, slow], default=slow) as server:
        started = time.monotonic()
        result = _launch(server, config, workspace, tmp_path, timeout_s=1.0)
        elapsed = time.monotonic() - started
    assert result.terminal_reason == "model_error", result.detail
    assert "timed out" in result.detail
    # Two attempts of 1 s each (max_retries=1) plus backoff and set-up, not 2 x 25 s.
    assert elapsed < 6, elapsed


def test_a_trickling_reply_cannot_outlive_the_run(config: LabConfig, workspace: Path, tmp_path: Path) -> None:
    # The per-call limit is generous (30 s); the run's own timeout_s (3 s) must end it.
    slow = Reply(body=chat(act("Grep", pattern="def login")), action="trickle", delay=0.05)
    with FakeOpenAI([GREP], default=slow) as server:
        started = time.monotonic()
        result = _launch(server, config, workspace, tmp_path, timeout_s=30.0, overrides={"timeout_s": 3})
        elapsed = time.monotonic() - started
    assert result.terminal_reason in ("timeout", "model_error"), result.detail
    assert elapsed < 3 + 4, elapsed
    assert result.tool_usage.get("Grep", {}).get("executed") == 1  # the good step before it counts


# --- crashes ---------------------------------------------------------------------------------------


def test_usage_of_ten_to_the_400_is_no_count(config: LabConfig, workspace: Path, tmp_path: Path) -> None:
    huge = Reply(body=chat(answer(GOOD), prompt_tokens=10**400, completion_tokens=10**400))
    with FakeOpenAI([GREP, huge]) as server:
        result = _launch(server, config, workspace, tmp_path)
    assert result.terminal_reason == "completed", result.detail
    # Treated as missing: estimated, a plausible figure that converts to float.
    assert result.usage.estimated and result.usage.total_tokens < 10**6
    assert float(result.usage.total_tokens) < 1e7 and result.cost_usd < 1e6


def test_an_integer_past_the_conversion_limit_in_the_body(
    config: LabConfig, workspace: Path, tmp_path: Path
) -> None:
    # 5,000 digits: json.loads itself raises ValueError (Python's int conversion limit).
    body = json.dumps(chat(answer(GOOD))).replace('"prompt_tokens": 100', '"prompt_tokens": ' + "9" * 5000)
    with FakeOpenAI([GREP, Reply(body=body.encode()), ok(answer(GOOD))]) as server:
        result = _launch(server, config, workspace, tmp_path)
    assert result.terminal_reason == "completed", result.detail  # retried as a malformed reply


@pytest.mark.parametrize("protocol", ["json", "native"])
@pytest.mark.parametrize("number", ["9" * 5000, str(10**400), "1e999", "NaN", "-Infinity"])
def test_numbers_no_tool_can_use_are_error_observations(
    protocol: str, number: str, config: LabConfig, workspace: Path, tmp_path: Path
) -> None:
    arguments = '{"path": "app/auth.py", "start": ' + number + "}"
    if protocol == "json":
        call = ok('{"tool": "Read", "arguments": ' + arguments + "}")
    else:
        call = Reply(body=chat(None, tool_calls=[native_call("Read", arguments)], finish_reason="tool_calls"))
    done = ok(answer(GOOD)) if protocol == "json" else ok(json.dumps(GOOD))
    with FakeOpenAI([call, GREP, done], default=done) as server:
        # A 5,000-digit number is longer than an action's usual output cap allows: raise the cap,
        # so the reply reaches the parser instead of being refused for ignoring max_tokens.
        result = _launch(
            server, config, workspace, tmp_path, protocol=protocol, overrides={"action_max_tokens": 2000}
        )
    assert result.terminal_reason == "completed", result.detail
    finished = [e for e in read_trace(result.trace_path) if isinstance(e, ToolFinished) and e.tool == "Read"]
    assert finished and finished[0].status == "error"


# --- over-spend ------------------------------------------------------------------------------------


def test_a_server_reporting_zero_tokens_cannot_overspend(
    config: LabConfig, workspace: Path, tmp_path: Path
) -> None:
    # Every reply is a fresh Grep reporting 0 prompt and 0 completion tokens: trusting the
    # server, the run would go to max_steps far past its budget.
    budget = 6000

    def zero(body: dict[str, object], headers: dict[str, str]) -> Reply:
        pattern = f"def login{len(json.dumps(body)) % 97}"  # a new search each step: no loop stop
        return Reply(body=chat(act("Grep", pattern=pattern), prompt_tokens=0, completion_tokens=0))

    with FakeOpenAI([], default=zero) as server:
        result = _launch(
            server, config, workspace, tmp_path,
            overrides={"total_token_budget": budget, "context_token_budget": budget, "max_steps": 60},
        )  # fmt: skip
    assert result.terminal_reason in ("token_budget", "context_budget"), result.detail
    assert 0 < result.usage.total_tokens <= budget
    calls = [e for e in read_trace(result.trace_path) if isinstance(e, ModelCalled)]
    assert all(c.usage.prompt_tokens >= c.prompt_tokens_est for c in calls)  # the count was charged
    assert len(calls) < 60


# --- huge replies ----------------------------------------------------------------------------------


def test_a_reply_over_the_byte_cap_is_cut_off(config: LabConfig, workspace: Path, tmp_path: Path) -> None:
    flood = Reply(body=chat("x" * 3_000_000))
    with FakeOpenAI([GREP, flood], default=flood) as server:
        result = _launch(server, config, workspace, tmp_path, max_reply_bytes=1_000_000)
    assert result.terminal_reason == "model_error", result.detail
    assert "1,000,000-byte cap" in result.detail
    assert len(server.requests) == 2  # not retried: the next attempt would be the same flood
    longest = max(len(line) for line in Path(result.trace_path).read_text().splitlines())
    assert longest < 100_000
