"""On a native-tool endpoint the final answer is a forced ``final_answer`` tool call whose parameters
are the answer's schema in the strict form OpenAI's structured outputs require; tested against a
fake endpoint on 127.0.0.1 that refuses a tool schema breaking those rules, as OpenAI does."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from redteam.support import FakeOpenAI, Reply, chat, native_call

from subagent_lab.agents.launcher import SubagentLauncher, SubagentRequest
from subagent_lab.config.profiles import LabConfig, ModelConfig
from subagent_lab.core.contracts import contract_schema
from subagent_lab.core.model import Model
from subagent_lab.core.types import ModelChoice
from subagent_lab.models.openai_chat import OpenAIChatModel
from subagent_lab.models.strict_schema import strict_schema

STRICT_KEYWORDS = {
    "type", "properties", "required", "additionalProperties", "items", "enum", "const", "anyOf", "$ref",
    "$defs", "description", "pattern", "format", "minimum", "maximum", "exclusiveMinimum",
    "exclusiveMaximum", "multipleOf", "minItems", "maxItems",
}  # fmt: skip
"""What OpenAI's strict structured outputs accept (platform.openai.com/docs/guides/structured-outputs,
"Supported schemas"), written out here apart from the code under test."""


def strict_violations(schema: Any, where: str = "parameters") -> list[str]:
    """The ways ``schema`` breaks OpenAI's strict-mode rules, as its error messages say them."""
    if not isinstance(schema, dict):
        return []
    problems = [f"{where}: '{k}' is not permitted" for k in schema if k not in STRICT_KEYWORDS]
    kinds = schema.get("type")
    if kinds == "object" or (isinstance(kinds, list) and "object" in kinds) or "properties" in schema:
        if schema.get("additionalProperties") is not False:
            problems.append(f"{where}: 'additionalProperties' is required to be supplied and to be false")
        missing = set(schema.get("properties") or {}) - set(schema.get("required") or [])
        if missing:
            problems.append(
                f"{where}: 'required' must include every key in properties, missing {sorted(missing)}"
            )
    for key, sub in (schema.get("properties") or {}).items():
        problems += strict_violations(sub, f"{where}.{key}")
    if "items" in schema:
        problems += strict_violations(schema["items"], f"{where}.items")
    for i, sub in enumerate(schema.get("anyOf") or []):
        problems += strict_violations(sub, f"{where}.anyOf[{i}]")
    for name, sub in (schema.get("$defs") or {}).items():
        problems += strict_violations(sub, f"{where}.$defs.{name}")
    return problems


ANSWER: dict[str, Any] = {
    "status": "completed",
    "summary": "login is defined in app/auth.py and calls check_password.",
    "findings": ["login calls check_password"],
    "evidence": ["app/auth.py:4"],
    "unresolved_questions": None,  # strict form: an optional property with nothing to say
}


class StrictEndpoint:
    """Answers like OpenAI: a 400 for a strict tool whose schema breaks the rules, else the next reply."""

    def __init__(self, replies: list[dict[str, Any]]) -> None:
        self.replies = replies
        self.refused: list[str] = []

    def __call__(self, body: dict[str, Any], headers: dict[str, str]) -> Reply:
        for tool in body.get("tools") or []:
            function = tool.get("function", {})
            params = function.get("parameters", {})
            problems = strict_violations(params) if function.get("strict") else []
            if function.get("strict") and params.get("type") != "object":
                problems.append("parameters: the root must be an object")
            if problems:
                message = f"Invalid schema for function '{function.get('name')}': {'; '.join(problems)}"
                self.refused.append(message)
                return Reply(400, {"error": {"message": message, "type": "invalid_request_error"}})
        return Reply(body=self.replies.pop(0))


def test_the_contract_schema_as_it_is_breaks_strict_rules_and_the_strict_form_does_not() -> None:
    schema = contract_schema("ExploreResult")
    assert strict_violations(schema)  # minLength, title, optional properties not in required
    assert strict_violations(strict_schema(schema)) == []


def _launch(
    config: LabConfig, workspace: Path, tmp_path: Path, endpoint: StrictEndpoint, *, grammar: bool = True
) -> Any:
    with FakeOpenAI(default=endpoint) as server:

        def make(choice: ModelChoice, cfg: ModelConfig) -> Model:
            return OpenAIChatModel(
                base_url=server.url, model=cfg.model, tool_protocol="native", max_retries=0, timeout_s=10,
                constrain_output=grammar,
            )  # fmt: skip

        launcher = SubagentLauncher(config, workspace, model_factory=make, trace_dir=tmp_path / "runs")
        return launcher.launch(SubagentRequest(task="Where is login implemented?")), server


def test_a_native_endpoint_gets_the_answer_through_a_strict_finish_tool(
    config: LabConfig, workspace: Path, tmp_path: Path
) -> None:
    model = config.models["light"].model  # type: ignore[union-attr]
    answer = ANSWER
    calls = [native_call("Grep", {"pattern": "def login"}), native_call("finish", {}, "call-2"),
             native_call("final_answer", answer, "call-3")]  # fmt: skip
    replies = [
        {**chat(None, tool_calls=[call], finish_reason="tool_calls"), "model": model} for call in calls
    ]
    endpoint = StrictEndpoint(replies)
    result, server = _launch(config, workspace, tmp_path, endpoint)
    assert endpoint.refused == []
    assert result.terminal_reason == "completed", result.detail
    assert result.contract is not None and result.contract["evidence"] == ["app/auth.py:4"]
    assert result.contract.get("unresolved_questions", []) == []  # the null was taken back out
    final = server.requests[-1].body
    (tool,) = final["tools"]
    assert tool["function"]["name"] == "final_answer" and tool["function"]["strict"] is True
    assert final["tool_choice"] == {"type": "function", "function": {"name": "final_answer"}}
    assert "response_format" not in final
    assert set(tool["function"]["parameters"]["required"]) == set(answer)


def test_without_the_strict_form_the_endpoint_refuses_the_answer_tool(
    config: LabConfig, workspace: Path, tmp_path: Path, monkeypatch: Any
) -> None:
    from subagent_lab.models import strict_schema as module

    monkeypatch.setattr(module, "strict_schema", lambda schema: schema)  # the schema as pydantic writes it
    replies = [
        chat(None, tool_calls=[native_call("Grep", {"pattern": "def login"})], finish_reason="tool_calls"),
        chat(None, tool_calls=[native_call("finish", {}, "call-2")], finish_reason="tool_calls"),
    ]
    for reply in replies:
        reply["model"] = config.models["light"].model  # type: ignore[union-attr]
    endpoint = StrictEndpoint(replies)
    result, _ = _launch(config, workspace, tmp_path, endpoint)
    assert endpoint.refused and "Invalid schema for function 'final_answer'" in endpoint.refused[0]
    assert result.terminal_reason == "model_error" and "HTTP 400" in result.detail
    assert json.dumps(result.contract) == "null"


def test_an_answer_decoded_without_a_grammar_is_cut_where_the_grammar_would_cut_it(
    config: LabConfig, workspace: Path, tmp_path: Path
) -> None:
    """Small models on a native endpoint copy a listing line whole as an evidence item and list more
    findings than the answer holds; at T=0 a repair repeats them. The grammar's own cuts are made
    (the location the item begins with, the first items), noted, and the reply as sent is kept."""
    model = config.models["light"].model  # type: ignore[union-attr]
    answer = {
        "status": "completed",
        "summary": "login is defined in app/auth.py.",
        "findings": [f"finding {i}" for i in range(7)],
        "evidence": ["app/auth.py:4  def login(user, password):"],
        "unresolved_questions": None,
    }
    calls = [native_call("Grep", {"pattern": "def login"}), native_call("finish", {}, "call-2"),
             native_call("final_answer", answer, "call-3")]  # fmt: skip
    replies = [
        {**chat(None, tool_calls=[call], finish_reason="tool_calls"), "model": model} for call in calls
    ]
    result, _ = _launch(config, workspace, tmp_path, StrictEndpoint(replies), grammar=False)
    assert result.terminal_reason == "completed", result.detail
    assert result.repairs_used == 0
    assert result.contract is not None and result.contract["evidence"] == ["app/auth.py:4"]
    assert len(result.contract["findings"]) < 7
    events = [json.loads(line) for trace in (tmp_path / "runs").rglob("*.jsonl") for line in trace.open()]
    (final_call,) = [e for e in events if e["kind"] == "model_called" and e["purpose"] == "final"]
    assert any("kept 'app/auth.py:4'" in note for note in final_call["adapted"])
    assert any("kept the first" in note for note in final_call["adapted"])
    assert "def login(user, password)" in final_call["raw_text"]


@pytest.mark.parametrize("after", ["finish", "a search"])
def test_an_answer_in_fenced_text_is_read_without_a_repair(
    after: str, config: LabConfig, workspace: Path, tmp_path: Path
) -> None:
    """llama-server reads a named ``tool_choice`` as "auto": after ``finish`` the answer comes back
    as fenced text with no tool call; main also answers a working turn that way instead of calling
    ``finish``. Either way its one object is the answer (the contract still checks it), not a repair."""
    model = config.models["light"].model  # type: ignore[union-attr]
    fenced = "```json\n" + json.dumps(ANSWER, indent=2) + "\n```"
    calls = [native_call("Grep", {"pattern": "def login"})]
    calls += [native_call("finish", {}, "call-2")] if after == "finish" else []
    replies = [{**chat(None, tool_calls=[c], finish_reason="tool_calls"), "model": model} for c in calls]
    replies.append({**chat(fenced), "model": model})
    result, _ = _launch(config, workspace, tmp_path, StrictEndpoint(replies))
    assert result.terminal_reason == "completed", result.detail
    assert result.repairs_used == 0
    assert result.contract is not None and result.contract["evidence"] == ["app/auth.py:4"]
    assert result.contract.get("unresolved_questions", []) == []


def test_a_turn_of_prose_or_an_action_in_text_is_read_as_that_action(
    config: LabConfig, workspace: Path, tmp_path: Path
) -> None:
    """A working turn with no tool call: an action written as JSON text runs as that call, and a
    word such as "Finish." ends the working phase as ``finish`` does, so the answer is asked for
    with the final prompt instead of a repair of prose."""
    model = config.models["light"].model  # type: ignore[union-attr]
    answer = {"status": "completed", "summary": "login is in app/auth.py.", "evidence": ["app/auth.py:4"]}
    replies = [
        {**chat('{"name": "Grep", "arguments": {"pattern": "def login"}}'), "model": model},
        {**chat("Finish."), "model": model},
        {**chat(None, tool_calls=[native_call("final_answer", answer, "c-3")], finish_reason="tool_calls"),
         "model": model},
    ]  # fmt: skip
    result, server = _launch(config, workspace, tmp_path, StrictEndpoint(replies))
    assert result.terminal_reason == "completed", result.detail
    assert result.repairs_used == 0
    assert result.contract is not None and result.contract["evidence"] == ["app/auth.py:4"]
    events = [json.loads(line) for trace in (tmp_path / "runs").rglob("*.jsonl") for line in trace.open()]
    assert [e["tool"] for e in events if e["kind"] == "tool_started"] == ["Grep"]
    assert server.requests[-1].body["tool_choice"]["function"]["name"] == "final_answer"


def test_an_object_inside_a_cut_off_answer_is_not_taken_for_the_answer() -> None:
    from types import SimpleNamespace

    from subagent_lab.core.types import Message, ModelRequest
    from subagent_lab.models.chat_reply import parse_reply
    from subagent_lab.models.wire import build_wire

    text = '```\n{\n "status": "completed",\n "findings": [\n  {"path": "a.py", "line": 4, "f": "login"}'
    message = SimpleNamespace(content=text, tool_calls=None)
    choice = SimpleNamespace(message=message, finish_reason="stop")
    raw = SimpleNamespace(choices=[choice], usage=None, model="m")
    request = ModelRequest(
        messages=[Message(role="user", content="task")], phase="act", max_tokens=160,
        final_schema=contract_schema("ExploreResult"),
    )  # fmt: skip
    wire = build_wire(request, [], model="m", native=True, grammar=False, strict=True)
    response = parse_reply(raw, wire, model="m", attempts=1, latency=0.0)
    assert response.text == text and response.tool_calls == []  # judged as it came: the contract says why


def test_an_endpoint_that_decodes_under_the_grammar_is_taken_at_its_word(
    config: LabConfig, workspace: Path, tmp_path: Path
) -> None:
    """``constrain_output: true`` says the endpoint holds the answer to its schema: nothing is cut,
    so a breach shows as the contract check's error rather than being mended in silence."""
    model = config.models["light"].model  # type: ignore[union-attr]
    answer = {"status": "completed", "summary": "login.", "evidence": ["app/auth.py:4  def login(user):"]}
    calls = [native_call("Grep", {"pattern": "def login"}), native_call("finish", {}, "call-2")]
    calls += [native_call("final_answer", answer, f"call-{i}") for i in (3, 4, 5)]
    replies = [{**chat(None, tool_calls=[c], finish_reason="tool_calls"), "model": model} for c in calls]
    result, _ = _launch(config, workspace, tmp_path, StrictEndpoint(replies))
    assert result.terminal_reason == "invalid_output"
    assert "evidence items must look like" in result.detail


def test_the_fake_endpoint_answers_the_native_protocol_which_the_environment_selects(
    workspace: Path, tmp_path: Path
) -> None:
    """Offline, the native-tools path end to end: ``LLM_TOOL_PROTOCOL``/``LIGHT_LLM_TOOL_PROTOCOL``
    set ``tool_protocol``, and ``benchmarks/fake_endpoint.py`` answers a request offering ``tools``
    with ``tool_calls`` (a search, a read, ``finish``, then a ``final_answer`` call)."""
    import sys

    from conftest import REPO

    from subagent_lab.config.profiles import load_config
    from subagent_lab.core.trace import ModelCalled, read_trace
    from subagent_lab.core.types import ConfigError

    sys.path.insert(0, str(REPO / "benchmarks"))
    from fake_endpoint import FakeEndpoint

    with pytest.raises(ConfigError, match=r"models\.main\.tool_protocol"):
        load_config(REPO / "profiles.yaml", env={"LLM_TOOL_PROTOCOL": "tools"})
    with FakeEndpoint(max_requests=60, max_seconds=60) as fake:
        given = (("BASE_URL", fake.url), ("MODEL_ID", "fake"), ("TOOL_PROTOCOL", "native"))
        env = {f"{prefix}{key}": value for prefix in ("LLM_", "LIGHT_LLM_") for key, value in given}
        config = load_config(REPO / "profiles.yaml", env=env)
        assert {config.models[c].tool_protocol for c in ("main", "light")} == {"native"}  # type: ignore[union-attr]
        config = config.model_copy(update={"trace_dir": str(tmp_path / "runs")})
        launcher = SubagentLauncher(config, workspace, trace_dir=tmp_path / "runs")
        written_by_model = config.scaffold("retrieval-start").resolved()  # not `rank`: no judge calls
        result = launcher.launch(
            SubagentRequest(task="Where is `login` defined?", overrides=written_by_model)
        )
    assert result.terminal_reason == "completed", result.detail
    calls = [e for e in read_trace(result.trace_path) if isinstance(e, ModelCalled)]
    assert calls and all(e.finish_reason == "tool_calls" for e in calls)  # every reply a tool call
    names = [c["name"] for e in calls for c in e.tool_calls]
    assert names[0] in ("Grep", "Read", "finish") and "finish" in names, names
    assert calls[-1].purpose == "final" and result.contract is not None
    assert fake.answered == {200: len(calls)}
