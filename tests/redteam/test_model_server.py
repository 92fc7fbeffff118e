"""A hostile or broken model server, over real HTTP, through the real adapter inside ``launch()``.

Every scenario checks the same invariants on top of its own: ``launch`` returns (never raises),
the trace ends with ``run_ended`` carrying the result's terminal reason, every HTTP request the
server saw is an attempt in the trace (``model_called.attempts`` + ``model_call_failed.attempts``),
and the usage in the result is the usage of the calls that succeeded, before and after a fault.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from redteam.support import (
    GOOD,
    FakeOpenAI,
    Reply,
    act,
    answer,
    chat,
    finished_calls,
    native_call,
    ok,
    openai_factory,
    timed,
)
from subagent_lab.agents.launcher import SubagentLauncher, SubagentRequest, SubagentResult
from subagent_lab.analysis.metrics import child_metrics
from subagent_lab.config.profiles import LabConfig
from subagent_lab.core.trace import ModelCalled, ModelCallFailed, PromptAdded, RunEnded, read_trace
from subagent_lab.core.types import Usage

ERR = {"error": {"message": "simulated failure", "type": "server_error"}}
PER_CALL = 120  # prompt 100 + completion 20, what ``chat`` reports


@dataclass
class Scenario:
    replies: list[Reply]
    reason: str
    requests: int | None = None
    """Exact HTTP requests the server must see (None: not checked)."""
    protocol: str = "json"
    overrides: dict[str, Any] = field(default_factory=dict)
    default: Reply | None = None
    usage: int | None = None
    """Exact total tokens expected (None: not checked)."""


def _run(
    scenario: Scenario, config: LabConfig, workspace: Path, tmp_path: Path
) -> tuple[SubagentResult, FakeOpenAI]:
    with FakeOpenAI(scenario.replies, default=scenario.default) as server:
        factory = openai_factory(server.url, protocol=scenario.protocol, max_retries=2, timeout_s=10.0)
        launcher = SubagentLauncher(config, workspace, model_factory=factory, trace_dir=tmp_path / "runs")
        request = SubagentRequest(
            task="Where is login implemented?", overrides={"min_tool_calls": 0, **scenario.overrides}
        )
        result = launcher.launch(request)  # must return, whatever the server does
    _invariants(result, server, exact_requests=scenario.reason != "model_error" or "die" not in str(scenario))
    return result, server


def _invariants(result: SubagentResult, server: FakeOpenAI, *, exact_requests: bool = True) -> None:
    events = read_trace(result.trace_path)
    end = events[-1]
    assert isinstance(end, RunEnded) and end.terminal_reason == result.terminal_reason
    assert result.terminal_reason != "crashed", result.detail
    calls = [e for e in events if isinstance(e, ModelCalled)]
    failed = [e for e in events if isinstance(e, ModelCallFailed)]
    attempts = sum(e.attempts for e in calls) + sum(e.attempts for e in failed)
    if exact_requests:
        assert attempts == len(server.requests), (attempts, len(server.requests))
    else:
        assert attempts >= len(server.requests)
    # max_retries=2: at most 3 attempts per call
    assert all(c.attempts <= 3 for c in calls) and all(f.attempts <= 3 for f in failed)
    total = Usage()
    for c in calls:
        total += c.usage
    for f in failed:  # every token counted: a failed call's attempts are charged too (estimated)
        assert f.usage.estimated or f.usage.total_tokens == 0
        total += f.usage
    assert result.usage == total
    metrics = child_metrics(events)
    assert metrics.token_usage == result.usage and metrics.tool_usage == result.tool_usage
    assert metrics.terminal_reason == result.terminal_reason
    assert len(result.usage_by_call) == result.model_calls == len(calls)


GREP = ok(act("Grep", pattern="def login"))
DONE = ok(answer(GOOD))
FINISH = ok(act("finish"))
CUT = '{"thought": "search the code", "tool": "Gr'
INVENTED = {
    **GOOD,
    "evidence": [
        "app/auth.py:400",
        "app/ghost.py:1",
        "../../etc/passwd:1",
        "/etc/passwd:1",
        "app/auth.py:0",
        "app/\u0000auth.py:1",
        "loop:1",
        "app/auth.py:4-5",
    ],
}
SURROGATE_CALL = (
    b'{"choices":[{"index":0,"finish_reason":"tool_calls","message":{"role":"assistant","content":null,'
    b'"tool_calls":[{"id":"c1","type":"function","function":{"name":"Read",'
    b'"arguments":"{\\"path\\": \\"caf\\\\udce9.py\\"}"}}]}}],'
    b'"usage":{"prompt_tokens":100,"completion_tokens":20}}'
)

SCENARIOS: dict[str, Scenario] = {
    "429-retry-after": Scenario(
        [Reply(429, ERR, {"Retry-After": "0.3"}), GREP, DONE], "completed", 3, usage=240
    ),
    "429-garbage-retry-after": Scenario(
        [
            Reply(429, ERR, {"Retry-After": "-5"}),
            Reply(429, ERR, {"Retry-After": "nan"}),
            GREP,
            Reply(429, ERR, {"Retry-After": "Wed, 21 Oct 2015 07:28:00 GMT"}),
            DONE,
        ],
        "completed",
        5,
        usage=240,
    ),
    "429-retry-after-past-deadline": Scenario(
        [Reply(429, ERR, {"Retry-After": "3600"})], "model_error", 1, overrides={"timeout_s": 3}, usage=0
    ),
    "500-forever-after-progress": Scenario([GREP], "model_error", 4, default=Reply(500, ERR), usage=120),
    "503-then-ok": Scenario([Reply(503, ERR), Reply(503, ERR), GREP, DONE], "completed", 4, usage=240),
    "400-not-retried": Scenario([GREP, Reply(400, ERR)], "model_error", 2, usage=120),
    "401-not-retried": Scenario([Reply(401, ERR)], "model_error", 1, usage=0),
    "connection-reset-then-ok": Scenario(
        [Reply(action="reset"), GREP, Reply(action="reset"), DONE], "completed", 4
    ),
    "connection-reset-forever": Scenario([], "model_error", 3, default=Reply(action="reset"), usage=0),
    "never-finishes": Scenario(
        [GREP], "timeout", 2, overrides={"timeout_s": 2}, default=Reply(action="hang")
    ),
    "truncated-body": Scenario(
        [Reply(body=chat(act("Grep", pattern="x")), action="truncate"), GREP, DONE], "completed", 3, usage=240
    ),
    "torn-json-200": Scenario([], "model_error", 3, default=Reply(body=b'{"id": "x", "choices": [{"mess')),
    "html-200": Scenario([Reply(body=b"<html>502 Bad Gateway</html>"), GREP, DONE], "completed", 3),
    "malformed-shapes": Scenario(
        [
            Reply(body={"choices": "abc"}),
            Reply(body={**chat("x"), "usage": {"prompt_tokens": "lots"}}),
            GREP,
            DONE,
        ],
        "completed",
        4,
    ),
    # A cut-off final answer is an invalid contract: repaired, then invalid_output.
    "finish-reason-length": Scenario(
        [GREP, FINISH],
        "invalid_output",
        5,
        default=ok('{"status": "completed", "summ', finish_reason="length"),
        usage=5 * PER_CALL,
    ),
    # A cut-off action gets one retry, then the turn is stale; it never becomes the answer.
    # 1 Grep + 3 stale turns x 2 attempts + a grace call and its 2 repairs.
    "action-cut-off": Scenario(
        [GREP], "loop_detected", 10, default=ok(CUT, finish_reason="length"), usage=10 * PER_CALL
    ),
    "empty-content": Scenario(
        [GREP, FINISH, ok(""), Reply(body=chat(None)), ok("  ")], "invalid_output", 5, usage=5 * PER_CALL
    ),
    # Empty actions are retried (the second empty one makes a stale turn); the run goes on.
    "empty-action": Scenario(
        [
            GREP,
            ok(""),
            Reply(body=chat(None)),
            ok(act("Read", path="app/auth.py")),
            FINISH,
            ok(json.dumps(GOOD)),
        ],
        "completed",
        6,
        usage=6 * PER_CALL,
    ),
    # 1 Grep + 3 repeats answered from the record (3 stale turns) + a grace call and its 2 repairs.
    "same-call-forever": Scenario([], "loop_detected", 7, default=GREP, usage=7 * PER_CALL),
    # The profiles' default: after one stale turn the loop finishes by itself (no call spent on the
    # forced action); the final call and its 2 repairs get the repeat text, no contract.
    "same-call-forced-finish": Scenario(
        [], "invalid_output", 5, default=GREP, overrides={"finish_after_stale": 1}, usage=5 * PER_CALL
    ),
    # Both protocols extract the one object from fences or prose (models run unconstrained too);
    # the contract check itself stays strict: every field is judged.
    "fenced-contract": Scenario([GREP, ok("```json\n" + json.dumps(GOOD) + "\n```")], "completed", 2),
    "invented-evidence-accepted": Scenario([GREP, ok(answer(INVENTED))], "completed", 2),
    "invented-evidence-required": Scenario(
        [GREP],
        "invalid_output",
        4,
        default=ok(answer(INVENTED)),
        overrides={"require_grounded_evidence": True},
    ),
    "server-dies-mid-run": Scenario(
        [GREP, Reply(body=chat(act("Read", path="app/auth.py")), action="die")],
        "model_error",
        None,
        usage=240,
    ),
    "usage-missing-or-negative": Scenario(
        [
            Reply(body=chat(act("Grep", pattern="def login"), usage=False)),
            Reply(body={**chat(answer(GOOD)), "usage": {"prompt_tokens": -(10**6), "completion_tokens": -5}}),
        ],
        "completed",
        2,
    ),
    "native-invalid-json-args": Scenario(
        [
            Reply(
                body=chat(
                    None,
                    tool_calls=[native_call("Grep", '{"pattern": "log'), native_call("Grep", "[1, 2]", "c2")],
                    finish_reason="tool_calls",
                )
            ),
            ok(json.dumps(GOOD)),
        ],
        "completed",
        2,
        protocol="native",
    ),
    "native-unknown-and-forbidden-tools": Scenario(
        [
            Reply(
                body=chat(
                    None,
                    tool_calls=[
                        native_call("Bash", {"command": "rm -rf /"}),
                        native_call("NoSuchTool", {}, "c2"),
                        native_call("Task", {"prompt": "escape"}, "c3"),
                    ],
                )
            ),
            ok(json.dumps(GOOD)),
        ],
        "completed",
        2,
        protocol="native",
    ),
    "native-wrong-argument-types": Scenario(
        [
            Reply(
                body=chat(
                    None,
                    tool_calls=[
                        native_call("Read", {"path": 123, "start": "abc"}),
                        native_call("Grep", {"pattern": ["x"], "max_results": "many"}, "c2"),
                        native_call("Glob", {"pattern": None}, "c3"),
                        native_call("Read", {"path": "app/auth.py", "evil": True}, "c4"),
                    ],
                )
            ),
            ok(json.dumps(GOOD)),
        ],
        "completed",
        2,
        protocol="native",
    ),
    "json-wrong-argument-types": Scenario(
        [
            ok(act("Read", path=["app/auth.py"])),
            ok(json.dumps({"tool": "Grep", "arguments": "def login"})),
            ok(json.dumps({"tool": 42})),
            GREP,
            DONE,
        ],
        "completed",
        5,
    ),
    "native-surrogate-arguments": Scenario(
        [Reply(body=SURROGATE_CALL), ok(json.dumps(GOOD))], "completed", 2, protocol="native"
    ),
    # A reply far longer than its max_tokens allows (the server ignored it) ends the call, not
    # retried, with a clear reason: it never enters the conversation or the trace whole.
    "huge-content": Scenario([GREP], "model_error", 2, default=ok("x" * 3_000_000)),
    "huge-final-answer": Scenario([GREP, FINISH], "model_error", 3, default=ok("x" * 3_000_000)),
    "huge-thought": Scenario(
        [GREP, ok(json.dumps({"thought": "x" * 3_000_000, "tool": "Read", "path": "app/auth.py"}))],
        "model_error",
        2,
    ),
    # A native working turn that answers in text instead of a tool call: its one answer object is
    # read, as the native final phase reads an answer from text (a server ignoring tool_choice).
    "native-fenced-contract": Scenario(
        [ok("Here you go:\n```json\n" + json.dumps(GOOD) + "\n```")],
        "completed",
        1,
        protocol="native",
    ),
}


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_hostile_server(name: str, config: LabConfig, workspace: Path, tmp_path: Path) -> None:
    scenario = SCENARIOS[name]
    (workspace / "loop").symlink_to("loop")
    with timed() as clock:
        result, server = _run(scenario, config, workspace, tmp_path)
    assert result.terminal_reason == scenario.reason, (result.terminal_reason, result.detail)
    if scenario.requests is not None:
        assert len(server.requests) == scenario.requests
    if scenario.usage is not None:
        assert result.usage.total_tokens == scenario.usage
    assert clock.elapsed < 20
    events = read_trace(result.trace_path)
    failed = [e for e in events if isinstance(e, ModelCallFailed)]
    calls = [e for e in events if isinstance(e, ModelCalled)]
    finished = finished_calls(result.trace_path)
    if result.terminal_reason == "model_error":
        assert failed and failed[-1].error in result.detail
    if name == "429-retry-after":
        assert calls[0].attempts == 2 and clock.elapsed >= 0.3  # Retry-After was honoured
    elif name == "429-retry-after-past-deadline":
        assert "no time left" in result.detail and clock.elapsed < 3
    elif name == "500-forever-after-progress":
        assert (
            failed[0].attempts == 3 and failed[0].retryable and result.tool_usage == {"Grep": {"executed": 1}}
        )
    elif name in ("400-not-retried", "401-not-retried"):
        assert failed[0].attempts == 1 and not failed[0].retryable
    elif name == "never-finishes":
        assert clock.elapsed < 4.5  # the run's 2 s limit bounds the hanging call and its retries
    elif name in ("torn-json-200", "html-200", "malformed-shapes"):
        assert all("malformed response" in e.error for e in failed)
    elif name == "finish-reason-length":
        assert [c.finish_reason for c in calls[2:]] == ["length"] * 3 and result.repairs_used == 2
        assert [c.purpose for c in calls] == ["step", "step", "final", "repair", "repair"]
    elif name == "action-cut-off":
        retries = [e for e in events if isinstance(e, PromptAdded) and e.purpose == "retry"]
        assert len(retries) == 3 and "cut off" in retries[0].content
        assert result.contract is None and result.status == "failed" and result.grace_used
        assert [c.purpose for c in calls] == ["step"] * 7 + ["grace", "repair", "repair"]
        # the cut action never entered the conversation: its retry (and every later act call) lacks it
        assert all(CUT not in json.dumps(r.body) for r in server.requests[:8])
    elif name == "empty-action":
        assert result.tool_usage == {"Grep": {"executed": 1}, "Read": {"executed": 1}}
        assert result.contract == GOOD and result.repairs_used == 0
    elif name == "same-call-forever":
        assert result.tool_usage == {"Grep": {"executed": 1, "repeated": 3}} and result.grace_used
        # after a repeat the grammar no longer offers the repeated tool
        offered = [json.dumps(r.body.get("response_format", {})) for r in server.requests[2:4]]
        assert offered and all('"const": "Grep"' not in o and '"const": "Read"' in o for o in offered)
    elif name == "same-call-forced-finish":
        assert result.tool_usage == {"Grep": {"executed": 1, "repeated": 1}}
        assert [c.purpose for c in calls] == ["step", "step", "final", "repair", "repair"]
    elif name in ("huge-content", "huge-thought", "huge-final-answer"):
        assert "ignored max_tokens" in result.detail and failed[-1].attempts == 1
        assert all(len(json.dumps(r.body)) < 1_000_000 for r in server.requests[1:])
        assert max(len(line) for line in Path(result.trace_path).read_text().splitlines()) < 200_000
    elif name == "fenced-contract":
        assert result.repairs_used == 0 and result.contract == GOOD
    elif name == "invented-evidence-accepted":
        assert result.grounded_ratio == pytest.approx(1 / 8)
    elif name == "invented-evidence-required":
        assert result.repairs_used == 2 and result.contract is None
        assert "evidence not found" in json.dumps(
            [e.model_dump() for e in events if e.kind == "contract_checked"]
        )
    elif name == "server-dies-mid-run":
        assert result.tool_usage == {"Grep": {"executed": 1}, "Read": {"executed": 1}}
        assert failed[0].attempts == 3 and "connection failed" in failed[0].error
    elif name == "usage-missing-or-negative":
        assert (
            result.usage.estimated and result.usage.prompt_tokens > 0 and result.usage.completion_tokens >= 0
        )
    elif name == "native-invalid-json-args":
        assert {e.status for e in finished.values()} == {"error"}
        assert "arguments must be a JSON object" in finished["call-1"].text
    elif name == "native-unknown-and-forbidden-tools":
        assert {k: e.status for k, e in finished.items()} == {
            "call-1": "denied",
            "c2": "denied",
            "c3": "denied",
        }
    elif name in ("native-wrong-argument-types", "json-wrong-argument-types"):
        bad = [e for e in finished.values() if e.status == "error"]
        assert len(bad) == (4 if name.startswith("native") else 2)
        assert all("invalid arguments" in e.text or "JSON object" in e.text for e in bad)
    elif name == "native-surrogate-arguments":
        assert finished["c1"].status == "error" and "does not exist" in finished["c1"].text
    elif name == "native-fenced-contract":
        assert result.repairs_used == 0 and result.contract == GOOD
