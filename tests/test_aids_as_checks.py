"""On an endpoint without a grammar (``constrain_output: false``) the aids only a grammar enforces
run as checks: an action off the turn's menu and an answer outside its schema get a repair message,
and the result records which aids ran as grammar and which as checks."""

from __future__ import annotations

from pathlib import Path

from conftest import LOGIN_ANSWER

from subagent_lab.agents.launcher import SubagentLauncher, SubagentRequest
from subagent_lab.config.profiles import LabConfig
from subagent_lab.core.policy import ActionMenu
from subagent_lab.core.schema_check import off_menu, schema_breaches
from subagent_lab.core.trace import PromptAdded, read_trace
from subagent_lab.core.types import ToolCall
from subagent_lab.models.scripted import ScriptedModel, final, tool_call


def _no_grammar(config: LabConfig) -> LabConfig:
    light = config.models["light"]
    assert light is not None
    return config.model_copy(
        update={"models": {**config.models, "light": light.model_copy(update={"constrain_output": False})}}
    )


def test_the_checks_word_each_breach() -> None:
    schema = {
        "type": "object",
        "properties": {"evidence": {"type": "array", "items": {"enum": ["a.py:4"]}, "minItems": 1}},
        "required": ["evidence"],
    }
    assert schema_breaches({"evidence": ["a.py:4"]}, schema) == []
    (breach,) = schema_breaches({"evidence": ["b.py:9"]}, schema)
    assert "answer.evidence[0]: 'b.py:9' is not one you may give" in breach and "'a.py:4'" in breach
    assert schema_breaches({"evidence": []}, schema) == [
        "answer.evidence: give at least 1 items; choose from ['a.py:4']"
    ]
    menu = ActionMenu(allowed=["Grep", "finish"], choices={"Grep": {"path": ["."]}})
    assert off_menu(menu, [ToolCall(id="1", name="Grep", arguments={"pattern": "x", "path": "."})]) == []
    assert off_menu(menu, [ToolCall(id="2", name="Read", arguments={"path": "a.py"})])[0].startswith(
        "Read is not"
    )


def test_a_profile_with_grammar_aids_runs_with_checks_instead_of_being_refused(
    config: LabConfig, workspace: Path, tmp_path: Path
) -> None:
    lab = _no_grammar(config)
    model = ScriptedModel(
        [
            tool_call("Read", path="app/secret.py"),  # no file shown yet: Read is not on the menu
            tool_call("Grep", pattern="def login", path="."),
            final({**LOGIN_ANSWER, "evidence": ["app/views.py:1"]}),  # a line no tool showed
            final({**LOGIN_ANSWER, "evidence": ["app/auth.py:4"]}),
        ]
    )
    launcher = SubagentLauncher(lab, workspace, model_factory=lambda c, m: model, trace_dir=tmp_path / "runs")
    request = SubagentRequest(task="Where is login implemented?", overrides={"constrain_paths": True})
    result = launcher.launch(request)
    assert result.terminal_reason == "completed", result.detail
    assert result.contract is not None and result.contract["evidence"] == ["app/auth.py:4"]
    assert result.aids_grammar == []
    assert {"PathsFromSeen", "CiteFromSeen.constrain"} <= set(result.aids_checked)
    assert result.tool_usage == {"Grep": {"executed": 1}}  # the off-menu Read was never run
    repairs = [e.content for e in read_trace(result.trace_path) if isinstance(e, PromptAdded)]
    assert any("Read is not offered this turn" in r for r in repairs)
    assert any("'app/views.py:1' is not one you may give" in r for r in repairs)
    assert result.repairs_used == 1


def test_with_a_grammar_nothing_is_checked_twice(config: LabConfig, workspace: Path, tmp_path: Path) -> None:
    model = ScriptedModel([tool_call("Grep", pattern="def login", path="."), final(LOGIN_ANSWER)])
    launcher = SubagentLauncher(config, workspace, model_factory=lambda c, m: model, trace_dir=tmp_path / "r")
    result = launcher.launch(SubagentRequest(task="Where is login implemented?"))
    assert result.terminal_reason == "completed" and result.repairs_used == 0
    assert result.aids_checked == [] and "CiteFromSeen.constrain" in result.aids_grammar
