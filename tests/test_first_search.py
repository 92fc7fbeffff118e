"""The light model's variant: the first Grep may only use the task's best names (``first_search``),
and the run answers after its Reads (``finish_after_reads``)."""

from __future__ import annotations

from pathlib import Path

from conftest import LauncherFactory

from subagent_lab.agents.launcher import SubagentRequest
from subagent_lab.models.scripted import final, tool_call
from subagent_lab.tools.search_words import task_search_words
from subagent_lab.workspace.sandbox import Workspace

ANSWER = {"status": "completed", "summary": "check_password in app/auth.py.", "evidence": []}


def _package(tmp_path: Path) -> Workspace:
    root = tmp_path / "yaml"
    root.mkdir()
    errors = "class YAMLError(Exception):\n    pass\n\nclass MarkedYAMLError(YAMLError):\n    pass\n"
    (root / "error.py").write_text(errors)
    for name in ("reader", "scanner", "parser"):
        (root / f"{name}.py").write_text(f"import yaml\nfrom .error import YAMLError\n# the {name} base\n")
    (root / "monitor.py").write_text("import yaml\ndef start_monitor():\n    pass\n")
    return Workspace(root)


def test_a_name_written_as_code_and_defined_ranks_before_plain_words(tmp_path: Path) -> None:
    ws = _package(tmp_path)
    words = task_search_words(ws, "Find where PyYAML defines its base exception class YAMLError.", 3)
    # YAMLError: written as code and defined; "base": a plain word, in comments only; "exception"
    # is in one file. PyYAML is the package's own name (in every file) and is never offered.
    assert words[0] == "YAMLError"
    assert "PyYAML" not in words and "defines" not in words and "class" not in words
    assert set(words) == {"YAMLError", "base", "exception"}


def test_names_no_file_holds_are_left_out_and_a_named_file_counts(tmp_path: Path) -> None:
    ws = _package(tmp_path)
    words = task_search_words(ws, "Trace how the background monitor thread refreshes a bar.", 5)
    assert words == ["monitor"]  # the only one of the task's names that the workspace holds
    assert task_search_words(ws, "Where is the TOML writer?", 3) == []
    assert task_search_words(ws, "Find where PyYAML defines YAMLError.", 0) == []


def test_the_first_action_is_a_grep_for_one_of_the_task_names(
    make_launcher: LauncherFactory, workspace: Path
) -> None:
    turns = [tool_call("Grep", pattern="check_password"), tool_call("finish")]
    launcher, model = make_launcher([*turns, final(ANSWER)])
    task = "Where is `check_password` defined, and which function hashes the password?"
    result = launcher.launch(SubagentRequest(task=task, overrides={"first_search": 2}))
    assert result.terminal_reason == "completed"
    first, second = model.requests[0], model.requests[1]
    # Only Grep, and only the task's two best names (the spelled, defined one first).
    assert first.allowed_tools == ["Grep"]
    assert first.arg_choices["Grep"]["pattern"] == ["check_password", "password"]
    # From the second action on the model chooses freely again.
    assert "pattern" not in second.arg_choices.get("Grep", {})
    assert second.allowed_tools is not None and "finish" in second.allowed_tools


def test_without_first_search_the_first_action_is_free(
    make_launcher: LauncherFactory, workspace: Path
) -> None:
    launcher, model = make_launcher([tool_call("Grep", pattern="login"), tool_call("finish"), final(ANSWER)])
    launcher.launch(SubagentRequest(task="Where is `check_password` defined?", overrides={"first_search": 0}))
    assert "pattern" not in model.requests[0].arg_choices.get("Grep", {})
    assert model.requests[0].allowed_tools != ["Grep"]


def test_after_its_reads_the_run_answers_without_another_action_call(
    make_launcher: LauncherFactory, workspace: Path
) -> None:
    turns = [tool_call("Grep", pattern="check_password"), tool_call("Read", path="app/auth.py", line=8)]
    launcher, model = make_launcher([*turns, final(ANSWER)])
    overrides = {"finish_after_reads": 1, "tool_interface": "simple"}
    result = launcher.launch(SubagentRequest(task="Where is check_password?", overrides=overrides))
    assert result.terminal_reason == "completed" and result.status == "completed"
    # Two actions, then the final answer: no third action call was made after the Read.
    assert [r.phase for r in model.requests] == ["act", "act", "final"]
    assert result.tool_usage["Read"] == {"executed": 1}


def test_without_finish_after_reads_the_model_acts_again_after_a_read(
    make_launcher: LauncherFactory, workspace: Path
) -> None:
    turns = [tool_call("Read", path="app/auth.py", line=8), tool_call("Grep", pattern="login")]
    turns.append(tool_call("finish"))
    launcher, model = make_launcher([*turns, final(ANSWER)])
    overrides = {"finish_after_reads": 0, "tool_interface": "simple"}
    result = launcher.launch(SubagentRequest(task="Where is check_password?", overrides=overrides))
    assert result.tool_usage["Grep"] == {"executed": 1} and len(model.requests) == 4
