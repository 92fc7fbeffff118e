"""The no-model baseline: each rule on a request, and whole runs under the shipped profile."""

from __future__ import annotations

import json
from pathlib import Path

from subagent_lab.agents.launcher import SubagentLauncher, SubagentRequest
from subagent_lab.config.profiles import load_config
from subagent_lab.core.types import Message, ModelRequest, ToolCall
from subagent_lab.models.baseline import BaselineModel, build_answer, choose_action, parse_next, task_name

REPO = Path(__file__).resolve().parents[1]


def _request(*messages: Message, **kwargs: object) -> ModelRequest:
    return ModelRequest(messages=list(messages), **kwargs)  # type: ignore[arg-type]


USER = Message(role="user", content="Find where `check_password` is defined.\n\nWorkspace top level: app/")


def test_task_name_prefers_code_written_names_over_long_words() -> None:
    assert task_name("Find where `check_password` is implemented and documented") == "check_password"
    assert task_name("Where does Environment.get_template load a template?") == "Environment.get_template"
    assert task_name("Which class is the FileSystemLoader?") == "FileSystemLoader"
    assert task_name("Explain authentication") == "authentication"
    assert task_name("") == ""


def test_next_lines_parse_into_calls_and_finish() -> None:
    obs = 'app/auth.py\n  8: def check_password(user):\nNext: Read path="app/auth.py" line=8 to see it'
    assert parse_next(obs) == ("Read", {"path": "app/auth.py", "line": 8})
    assert parse_next("lines 1-9\nNext: finish citing app/auth.py:8") == ("finish", {})
    assert parse_next("no next line here") is None
    assert parse_next('Next: Glob pattern="*" path="app" to list it') == (
        "Glob",
        {"pattern": "*", "path": "app"},
    )


def test_offered_choices_come_first_then_the_next_line_then_a_first_search() -> None:
    forced = _request(
        USER, allowed_tools=["Grep"], arg_choices={"Grep": {"pattern": ["check_password", "x"]}}
    )
    assert choose_action(forced) == ("Grep", {"pattern": "check_password"})
    assert choose_action(_request(USER, allowed_tools=["Grep", "Read", "finish"])) == (
        "Grep",
        {"pattern": "check_password"},
    )
    grep = ToolCall(id="c1", name="Grep", arguments={"pattern": "check_password"})
    seen = [
        USER,
        Message(role="assistant", content="", tool_calls=[grep]),
        Message(role="tool", content='hits\nNext: Read path="app/auth.py" line=8', tool_call_id="c1"),
    ]
    assert choose_action(_request(*seen, allowed_tools=["Read", "finish"])) == (
        "Read",
        {"path": "app/auth.py", "line": 8},
    )
    # A suggested call already made is not made again; the baseline finishes instead.
    again = [
        *seen[:2],
        Message(role="tool", content='Next: Grep pattern="check_password"', tool_call_id="c1"),
    ]
    assert choose_action(_request(*again, allowed_tools=["Grep", "finish"])) == ("finish", {})


def test_the_answer_is_built_from_the_schema_and_the_prompt_only() -> None:
    schema = {
        "type": "object",
        "properties": {
            "status": {"type": "string", "enum": ["completed", "partial"]},
            "evidence": {
                "type": "array",
                "items": {"type": "string", "enum": ["a.py:3", "b.py:9"]},
                "maxItems": 1,
            },
            "summary": {"type": "string", "maxLength": 12},
            "findings": {"type": "array", "items": {"type": "string"}},
        },
    }
    final = Message(
        role="user", content="Answer now. Locations:\n- a.py:3  def check_password(user):\n- b.py:9  x"
    )
    answer = build_answer(schema, [USER, final])
    assert answer == {
        "status": "completed",
        "evidence": ["a.py:3"],
        "summary": "Find where `",
        "findings": ["def check_password(user):", "x"],
    }
    check = {"type": "object", "properties": {"found": {"type": "string", "enum": ["yes", "no"]}}}
    assert build_answer(check, [USER]) == {"found": "yes"}
    free = {"type": "object", "properties": {"evidence": {"type": "array", "items": {"pattern": "x"}}}}
    assert build_answer(free, [USER, final]) == {"evidence": ["a.py:3", "b.py:9"]}


def test_a_whole_run_under_the_shipped_profile_completes_with_seen_evidence(
    workspace: Path, tmp_path: Path
) -> None:
    config = load_config(REPO / "profiles.yaml", env={})
    model = BaselineModel()
    launcher = SubagentLauncher(
        config, workspace, model_factory=lambda choice, cfg: model, trace_dir=tmp_path / "runs"
    )
    result = launcher.launch(SubagentRequest(task="Find where `check_password` is defined."))
    assert result.terminal_reason == "completed", result.detail
    assert result.contract is not None
    evidence = result.contract["evidence"]
    assert evidence and all(item.startswith("app/auth.py:") for item in evidence)
    events = [json.loads(line) for line in Path(result.trace_path).read_text().splitlines()]
    called = [e for e in events if e["kind"] == "model_called"]
    assert called and all(e["model_id"] == "none" for e in called)
