"""The explore scaffold's citation aids: Read outlines, citable lines, the absence check, task files."""

from __future__ import annotations

from pathlib import Path

from conftest import LauncherFactory

from subagent_lab.agents.launcher import SubagentRequest
from subagent_lab.core.trace import ModelCalled, PromptAdded, read_trace
from subagent_lab.core.types import Span
from subagent_lab.models.scripted import final, tool_call
from subagent_lab.scaffold.cite_from_seen import citable
from subagent_lab.scaffold.ranking import line_texts, listed_location, rank_citable
from subagent_lab.scaffold.task_shaping import task_files
from subagent_lab.tools.registry import build_tools
from subagent_lab.tools.simple import ObservationLimits
from subagent_lab.workspace.sandbox import Workspace

ABSENT = {"status": "completed", "summary": "There is no such code.", "findings": [], "evidence": []}
FOUND = {"status": "completed", "summary": "login is in app/auth.py.", "evidence": ["app/auth.py:4"]}


def _big_module(root: Path) -> None:
    body = ["import os", ""]
    for i in range(12):
        body += [f"class Loader{i}:", f"    def load_{i}(self):", "        return 1", ""]
    (root / "app" / "loaders.py").write_text("\n".join(body) + "\n")


def test_read_lists_definitions_outside_the_window_each_citable(workspace: Path) -> None:
    _big_module(workspace)
    read = build_tools(["Read"], limits=ObservationLimits(read_window=8, read_outline=5))["Read"]
    out = read.invoke(Workspace(workspace), {"path": "app/loaders.py", "line": 20})
    assert out.status == "ok"
    window = out.spans[0]
    assert window == Span("app/loaders.py", 10, 17)
    single = [s for s in out.spans[1:] if s.start == s.end]
    shown_defs = [s.start for s in single if window.start <= s.start <= window.end]
    outline = [s.start for s in single if not window.start <= s.start <= window.end]
    assert shown_defs == [11, 12, 15, 16]  # the definitions inside the window
    # Five outline entries: classes (outermost) first, nearest the asked line first, listed in order.
    assert outline == [7, 19, 23, 27, 31]
    assert "Other definitions in app/loaders.py:" in out.text and "19\tclass Loader4:" in out.text
    assert out.text.splitlines()[-1].startswith("Next: finish citing")
    plain = build_tools(["Read"], limits=ObservationLimits(read_window=8))["Read"]
    assert "Other definitions" not in plain.invoke(Workspace(workspace), {"path": "app/loaders.py"}).text


def test_citable_lines_are_newest_first_and_fall_back_to_every_seen_line() -> None:
    grep = [Span("a.py", 0, 0), Span("a.py", 3, 3), Span("b.py", 9, 9)]
    read = [Span("b.py", 1, 20), Span("b.py", 9, 9), Span("b.py", 12, 12)]
    assert citable([grep, read]) == ["b.py:9", "b.py:12", "a.py:3"]
    assert citable([grep, read], limit=2) == ["b.py:9", "b.py:12"]
    assert citable([[Span("c.py", 1, 3)]]) == ["c.py:1", "c.py:2", "c.py:3"]


def test_cite_anchors_limits_the_evidence_to_citable_lines(make_launcher: LauncherFactory) -> None:
    turns = [tool_call("Grep", pattern="def login"), tool_call("Read", path="app/auth.py")]
    launcher, model = make_launcher([*turns, tool_call("finish"), final(FOUND)])
    overrides = {"evidence_from_seen": True, "cite_anchors": True, "max_evidence": 3}
    result = launcher.launch(SubagentRequest(task="Where is login?", overrides=overrides))
    assert result.terminal_reason == "completed"
    evidence = model.requests[-1].final_schema["properties"]["evidence"]
    # One citable line: one slot (max_evidence=3 would only let the model repeat it).
    assert evidence["items"]["enum"] == ["app/auth.py:4"] and evidence["maxItems"] == 1
    # The prompt lists each citable line with its text, so the model can tell which answers the task.
    assert "- app/auth.py:4  def login(user, password):" in str(model.requests[-1].messages[-1].content)


def test_citable_lines_holding_the_task_words_are_listed_first(tmp_path: Path) -> None:
    (tmp_path / "m.py").write_text(
        '"""Built-in template filters."""\nimport jinja2\ndef do_truncate(s):\n'
        '    """Return a truncated copy."""\nclass FileSystemLoader(BaseLoader):\n'
    )
    items = ["m.py:2", "m.py:4", "m.py:1", "m.py:3", "m.py:5", "m.py:9"]
    texts = line_texts(items, tmp_path)
    assert texts["m.py:3"] == "def do_truncate(s):" and "m.py:9" not in texts
    ranked = rank_citable(items, texts, "Find the function that implements the `truncate` template filter.")
    # The definition holding "truncate" beats the docstring holding "template" and "filters" (plural
    # counts); lines with no task word keep their order at the end.
    assert ranked == ["m.py:3", "m.py:1", "m.py:2", "m.py:4", "m.py:5", "m.py:9"]
    loaders = rank_citable(items, texts, "List the template loaders in m.py")
    assert loaders[:2] == ["m.py:5", "m.py:1"]
    assert listed_location("m.py:5", texts) == "m.py:5  class FileSystemLoader(BaseLoader):"
    assert listed_location("m.py:9", texts) == "m.py:9"


def _check_run(make_launcher: LauncherFactory, answer: str, payload: dict[str, object]):  # type: ignore[no-untyped-def]
    turns = [tool_call("Grep", pattern="def login"), tool_call("finish"), final(answer), final(payload)]
    launcher, model = make_launcher(turns)
    result = launcher.launch(SubagentRequest(
        task="Where is the HTTP loader?", overrides={"evidence_from_seen": True, "absence_check": True}
    ))  # fmt: skip
    return result, model


def test_the_absence_check_says_no_and_the_answer_cites_nothing(make_launcher: LauncherFactory) -> None:
    result, model = _check_run(make_launcher, '{"found": "no"}', ABSENT)
    assert (result.terminal_reason, result.contract["evidence"]) == ("completed", [])  # type: ignore[index]
    check, answer = model.requests[-2], model.requests[-1]
    assert check.final_schema["properties"]["found"]["enum"] == ["yes", "no"] and check.max_tokens == 12
    assert answer.final_schema["properties"]["evidence"]["maxItems"] == 0
    assert "cite no evidence" in str(answer.messages[-1].content)
    events = read_trace(result.trace_path)
    assert [e.purpose for e in events if isinstance(e, ModelCalled)] == ["step", "step", "check", "final"]
    assert "check" in [e.purpose for e in events if isinstance(e, PromptAdded)]


def test_the_absence_check_says_yes_and_the_answer_cites_what_was_seen(
    make_launcher: LauncherFactory,
) -> None:
    result, model = _check_run(make_launcher, '{"found": "yes"}', FOUND)
    assert result.contract["evidence"] == ["app/auth.py:4"]  # type: ignore[index]
    assert model.requests[-1].final_schema["properties"]["evidence"]["items"]["enum"] == ["app/auth.py:4"]


def test_files_a_task_names_are_found_once_and_count_as_shown(
    workspace: Path, make_launcher: LauncherFactory
) -> None:
    (workspace / "lib").mkdir()
    (workspace / "lib" / "views.py").write_text("x = 1\n")
    (workspace / ".env").write_text("KEY=1\n")
    ws = Workspace(workspace)
    assert task_files(ws, "Read auth.py and app/views.py; not missing.py, .env or views.py twice") == [
        "app/auth.py", "app/views.py",
    ]  # fmt: skip
    assert task_files(ws, "What does views.py do?") == []  # two files have that name: none is meant
    launcher, model = make_launcher([tool_call("Read", path="app/auth.py", line=4), final(FOUND)])
    launcher.launch(SubagentRequest(
        task="What does auth.py do?", overrides={"task_paths": True, "constrain_paths": True}
    ))  # fmt: skip
    first = model.requests[0]
    assert str(first.messages[1].content).endswith("Files named in the task: app/auth.py")
    assert first.arg_choices["Read"]["path"] == ["app/auth.py"]


def test_grep_given_a_location_says_how_to_cite_or_read_it(workspace: Path) -> None:
    grep = build_tools(["Grep"])["Grep"]
    out = grep.invoke(Workspace(workspace), {"pattern": "app/auth.py:4"})
    assert out.status == "error"
    assert out.text.endswith('Next: finish to cite it, or Read path="app/auth.py" line=4 to see it')


def test_a_phrase_in_a_named_file_is_searched_word_by_word_there_first(workspace: Path) -> None:
    grep = build_tools(["Grep"])["Grep"]
    out = grep.invoke(Workspace(workspace), {"pattern": "password login", "path": "app/auth.py"})
    assert out.status == "ok" and "app/auth.py" in out.text and "app/views.py" not in out.text
    assert 'showing matches for "password" instead' in out.text
