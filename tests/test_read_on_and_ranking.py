"""The explore scaffold's breadth aids: a repeated Read reads on, Grep resolves dotted names."""

from __future__ import annotations

from pathlib import Path

from conftest import LauncherFactory

from subagent_lab.agents.launcher import SubagentRequest
from subagent_lab.core.trace import ToolFinished, read_trace
from subagent_lab.models.scripted import final, tool_call
from subagent_lab.scaffold.ranking import citable_scores, rank_citable
from subagent_lab.tools.registry import build_tools
from subagent_lab.workspace.sandbox import Workspace

ANSWER = {"status": "completed", "summary": "Shown.", "evidence": []}
FOUND_CHECK = {"status": "completed", "summary": "In app/auth.py.", "evidence": ["app/auth.py:8"]}
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


def test_grep_for_the_workspace_own_name_lists_its_files_instead(tmp_path: Path) -> None:
    root = tmp_path / "tqdm"
    (root / "contrib").mkdir(parents=True)
    (root / "std.py").write_text("import tqdm\ndef trange():\n    return tqdm(range(3))\n")
    (root / "contrib" / "slack.py").write_text("import tqdm\n")
    grep = build_tools(["Grep"])["Grep"]
    out = grep.invoke(Workspace(root), {"pattern": "TQDM"})
    # Not an error (the 0.5B model repeated the refused call until the loop guard ended the run):
    # an observation whose file names count as shown, so Read can open them.
    assert out.status == "ok" and '"TQDM" is the name of the workspace itself' in out.text
    assert out.text.splitlines()[1:3] == ["contrib/slack.py", "std.py"]
    assert ("std.py", 0, 0) in out.spans and "import tqdm" not in out.text
    next_line = "Next: Grep for a more specific name from the task, or Read the file the task is about"
    assert out.text.endswith(next_line)
    assert "1: import tqdm" in grep.invoke(Workspace(root), {"pattern": "import"}).text


def test_a_definition_of_a_name_the_task_spells_ranks_first() -> None:
    texts = {
        "e.py:10": 'self.writeline("parent = environment.get_template(", node)',
        "e.py:20": "def get_template(self, name, parent=None):",
        "e.py:30": "def close(self):",
        "e.py:40": "class Template:",
    }
    task = "Trace what happens when Environment.get_template(name) is called."
    ranked = rank_citable(list(texts), texts, task)
    # The call holds more task words, but the definition of the spelled name wins; a definition
    # holding a task word beats the call, and a line holding none comes last.
    assert ranked[0] == "e.py:20"
    scores = citable_scores(list(texts), texts, task)
    assert scores["e.py:20"] > scores["e.py:10"] and scores["e.py:30"] == 0


def test_a_task_about_classes_ranks_class_lines_over_functions() -> None:
    texts = {"m.py:1": "def split_template_path(template):", "m.py:2": "class BaseLoader:"}
    ranked = rank_citable(list(texts), texts, "List the template loader classes.")
    assert ranked == ["m.py:2", "m.py:1"]
    # The same lines for a task about a function: the def line first.
    assert rank_citable(list(texts), texts, "Which function splits a template path?")[0] == "m.py:1"


def test_the_margin_keeps_only_lines_close_to_the_best() -> None:
    texts = {
        "a.py:1": "def format_sizeof(num):",  # 2 words + definition + spelled name
        "a.py:2": "x = format_sizeof(rate)",  # module-level assignment holding the words
        "a.py:3": "    y = format_sizeof(n)",  # an indented use: only the words
        "a.py:4": "class Other:",
    }
    task = "Find where format_sizeof is defined."
    assert rank_citable(list(texts), texts, task, margin=2) == ["a.py:1"]
    assert rank_citable(list(texts), texts, task, margin=20) == ["a.py:1", "a.py:2", "a.py:3"]
    assert rank_citable(["a.py:4"], texts, task, margin=2) == ["a.py:4"]  # never empty


def test_with_a_margin_the_answer_may_cite_only_the_listed_lines(
    make_launcher: LauncherFactory, workspace: Path
) -> None:
    turns = [tool_call("Grep", pattern="password"), tool_call("finish")]
    launcher, model = make_launcher([*turns, final(FOUND_CHECK)])
    overrides = {"evidence_from_seen": True, "cite_anchors": True, "max_evidence": 4, "cite_margin": 0}
    result = launcher.launch(SubagentRequest(task="Where is check_password defined?", overrides=overrides))
    assert result.terminal_reason == "completed"
    evidence = model.requests[-1].final_schema["properties"]["evidence"]
    # Grep showed four lines holding "password"; only the definition of the spelled name is listed.
    assert evidence["items"]["enum"] == ["app/auth.py:8"] and evidence["maxItems"] == 1
    listing = str(model.requests[-1].messages[-1].content)
    assert "- app/auth.py:8  def check_password(user, password):" in listing
    assert "app/auth.py:4" not in listing


def test_the_absence_check_is_greedy_in_a_sampled_run(make_launcher: LauncherFactory) -> None:
    turns = [tool_call("Grep", pattern="def login"), tool_call("finish"), final('{"found": "yes"}')]
    launcher, model = make_launcher([*turns, final(FOUND_CHECK)])
    overrides = {"evidence_from_seen": True, "absence_check": True}
    request = SubagentRequest(task="Where is login?", overrides=overrides, temperature=0.3, seed=1)
    assert launcher.launch(request).terminal_reason == "completed"
    step, _, check, answer = model.requests
    # The verdict is one token: sampled, it follows the seed a sweep repeat gives every task.
    assert check.final_schema["properties"]["found"]["enum"] == ["yes", "no"]
    assert (step.temperature, check.temperature, answer.temperature) == (0.3, 0.0, 0.3)
