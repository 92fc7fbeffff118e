"""The explore scaffold's breadth aids: a repeated Read reads on, Grep resolves dotted names."""

from __future__ import annotations

from pathlib import Path

from conftest import LauncherFactory

from subagent_lab.agents.launcher import SubagentRequest
from subagent_lab.core.trace import ToolFinished, read_trace
from subagent_lab.models.scripted import final, tool_call
from subagent_lab.tools.registry import build_tools
from subagent_lab.workspace.sandbox import Workspace

ANSWER = {"status": "completed", "summary": "Shown.", "evidence": []}
SIMPLE = {"tool_interface": "simple", "read_window": 8, "constrain_paths": False}


def _long_module(root: Path, lines: int = 40) -> None:
    (root / "app" / "long.py").write_text("".join(f"value_{i} = {i}\n" for i in range(1, lines + 1)))


def _results(result_path: Path) -> list[ToolFinished]:
    return [e for e in read_trace(result_path) if isinstance(e, ToolFinished)]


def test_a_repeated_read_shows_the_next_window_until_read_on_is_spent(
    make_launcher: LauncherFactory, workspace: Path
) -> None:
    _long_module(workspace)
    reads = [tool_call("Read", _id=f"r{i}", path="app/long.py", line=5) for i in range(3)]
    launcher, _ = make_launcher([*reads, tool_call("finish"), final(ANSWER)])
    request = SubagentRequest(task="What is in long.py?", overrides={**SIMPLE, "read_on": 1})
    result = launcher.launch(request)
    first, second, third = _results(result.trace_path)
    assert "lines 1-8 of 40" in first.text
    # The repeat reads on: the window right after the first one, said so, and run (not a record).
    assert second.text.startswith("[Read on: app/long.py lines 1-8 were shown at step 1;")
    assert "lines 9-16 of 40" in second.text and not second.from_record
    assert ["app/long.py", 9, 16] in second.spans and "value_9 = 9" in second.text
    # read_on=1 is spent: the next repeat is answered from the record.
    assert third.from_record and third.text.startswith("[Already shown at step")
    assert result.tool_usage["Read"] == {"executed": 2, "repeated": 1}


def test_a_repeated_read_at_the_end_of_the_file_is_answered_from_the_record(
    make_launcher: LauncherFactory, workspace: Path
) -> None:
    _long_module(workspace, lines=6)
    reads = [tool_call("Read", _id=f"r{i}", path="app/long.py", line=1) for i in range(2)]
    launcher, _ = make_launcher([*reads, tool_call("finish"), final(ANSWER)])
    request = SubagentRequest(task="What is in long.py?", overrides={**SIMPLE, "read_on": 3})
    result = launcher.launch(request)
    _, again = _results(result.trace_path)
    assert again.from_record and again.text.startswith("[Already shown at step 1")


def test_without_read_on_a_repeated_read_is_answered_from_the_record(
    make_launcher: LauncherFactory, workspace: Path
) -> None:
    _long_module(workspace)
    reads = [tool_call("Read", _id=f"r{i}", path="app/long.py", line=5) for i in range(2)]
    launcher, _ = make_launcher([*reads, tool_call("finish"), final(ANSWER)])
    result = launcher.launch(SubagentRequest(task="What is in long.py?", overrides=SIMPLE))
    assert _results(result.trace_path)[1].from_record


def test_grep_for_a_dotted_name_also_finds_the_member_and_proposes_its_definition(workspace: Path) -> None:
    grep = build_tools(["Grep"])["Grep"]
    out = grep.invoke(Workspace(workspace), {"pattern": "auth.check_password"})
    assert out.status == "ok"
    assert '"auth.check_password" is a dotted name, so Grep also searched for "check_password".' in out.text
    assert "8: def check_password(user, password):" in out.text
    assert out.text.endswith('Next: Read path="app/auth.py" line=8 to see the code around the definition')


def test_grep_always_shows_the_lines_that_define_the_name(workspace: Path) -> None:
    uses = "".join(f"x = write({i})\n" for i in range(30))
    (workspace / "app" / "out.py").write_text(uses + "def write(text):\n    return text\n")
    grep = build_tools(["Grep"])["Grep"]
    out = grep.invoke(Workspace(workspace), {"pattern": "write"})
    lines = out.text.splitlines()
    # Fifteen lines are shown; the definition (line 31) is among them although 30 uses come first.
    assert lines[0] == '31 matches for "write" in 1 file; the first 15:'
    assert "  31: def write(text):" in lines and "  1: x = write(0)" in lines
    assert "  15: x = write(14)" not in lines  # the definition took the last place
