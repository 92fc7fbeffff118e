"""The symbol tools and the repo map as scaffold factors: profile validation, the RepoMap policy
called directly, the precedence, the action grammar, and whole scripted launches (no model)."""

from __future__ import annotations

import csv
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from conftest import REPO, LauncherFactory
from pydantic import ValidationError

from subagent_lab.agents.launch_io import render_task
from subagent_lab.agents.launcher import SubagentRequest
from subagent_lab.bench.scoring import context_from_trace
from subagent_lab.config import build
from subagent_lab.config.legacy import legacy_hash
from subagent_lab.config.profiles import SYMBOL_TOOLS, LabConfig, RuntimeProfile, load_config
from subagent_lab.config.scaffolds import PLAIN, Scaffold
from subagent_lab.core.context import estimate_text
from subagent_lab.core.evidence import seen_check
from subagent_lab.core.policy import FINISH, ActionMenu, RunContext, TaskShape, policy_names
from subagent_lab.core.tool import Tool
from subagent_lab.core.trace import ContractChecked, RunStarted, read_trace
from subagent_lab.core.types import ModelRequest, Span, ToolCall
from subagent_lab.models.actions import action_schema
from subagent_lab.models.scripted import final, tool_call, tool_calls
from subagent_lab.scaffold.cite_from_seen import unit_items
from subagent_lab.scaffold.paths_from_seen import PathsFromSeen
from subagent_lab.scaffold.repo_map import MAP_HEAD, RepoMap
from subagent_lab.scaffold.specs import ORDER
from subagent_lab.scaffold.task_shaping import TaskShaping
from subagent_lab.tools.registry import build_tools
from subagent_lab.tools.symbols.repo_map import repo_map_observation
from subagent_lab.workspace.sandbox import Workspace

ANSWER = {
    "status": "completed",
    "summary": "check_password in app/auth.py compares the password's hash; login calls it.",
    "findings": ["login calls check_password", "views imports login"],
    "evidence": ["app/auth.py:8-9", "app/views.py:4-5"],
    "unresolved_questions": [],
}
"""Cites the unit Find showed and one only the repo map listed (``index`` is in no tool output)."""
TASK = "Where is the password checked?"


def _base(**update: Any) -> RuntimeProfile:
    budgets = {"max_steps": 5, "context_token_budget": 8000, "total_token_budget": 30000}
    return RuntimeProfile.model_validate({"name": "t", "system_prompt": "s", **budgets, **update})


def _symbols(lab: LabConfig) -> dict[str, Any]:
    return lab.scaffold("symbols").resolved()


@dataclass
class View:
    """A stand-in ``RunView``: ``PathsFromSeen`` reads its ``seen`` and ``tools``."""

    seen: Sequence[Span] = ()
    tools: Mapping[str, Tool] = field(default_factory=dict)
    task: str = TASK
    task_message: str = TASK
    contract: str | None = "ExploreResult"
    workspace_root: Path = Path(".")
    tool_context: Any = None
    steps: int = 1
    stale_turns: int = 0

    def executed(self, tool: str | None = None) -> int:
        return 0

    def add_prompt(self, purpose: str, text: str) -> None:
        raise AssertionError("PathsFromSeen adds no prompt")

    def ask(self, purpose: str, schema: dict[str, Any], max_tokens: int) -> str:
        raise AssertionError("PathsFromSeen asks nothing")


# --- the profile --------------------------------------------------------------------------------


def test_a_profile_may_list_the_symbol_tools_and_still_no_writer() -> None:
    profile = _base(tools=("Read", *SYMBOL_TOOLS))
    assert profile.tools == ("Read", "Find", "Refs", "Outline", "Search")
    for writer in ("Edit", "Bash", "Task"):
        with pytest.raises(ValidationError, match=r"may not hold"):
            _base(tools=("Read", writer))
    with pytest.raises(ValidationError, match=r"unknown tools \['Jump'\]"):
        _base(tools=("Read", "Jump"))
    with pytest.raises(ValidationError, match=r"simple' only"):  # the full interface has no Find
        _base(tools=("Read", "Find"), tool_interface="full")
    with pytest.raises(ValidationError, match=r"simple' only"):
        _base(symbol_tools=True, tool_interface="full")
    with pytest.raises(ValidationError, match=r"RepoMap\.tokens"):
        _base(repo_map_tokens=-1)


def test_symbol_tools_add_the_four_tools_once_after_the_profiles_own() -> None:
    assert build.tool_names(_base()) == ("Read", "Grep", "Glob")
    assert build.tool_names(_base(symbol_tools=True)) == ("Read", "Grep", "Glob", *SYMBOL_TOOLS)
    listed = _base(tools=("Outline", "Read"), symbol_tools=True)
    assert build.tool_names(listed) == ("Outline", "Read", "Find", "Refs", "Search")


# --- the repo map policy, called directly -------------------------------------------------------


def test_the_repo_map_policy_puts_a_budgeted_map_in_the_first_message_and_marks_it_shown(
    workspace: Path,
) -> None:
    ws = Workspace(workspace)
    context = RunContext(TASK, ws, workspace, ("Read",))
    shape = TaskShape(task=TASK, files=["app/auth.py"])
    RepoMap(20).shape_task(context, shape)
    [section] = shape.sections
    head, body = section.split("\n", 1)
    assert head == MAP_HEAD and 0 < estimate_text(body) <= 20
    assert "4-5 def login(user, password)" in body and "check_password" not in body  # over budget
    assert shape.shown == repo_map_observation(ws, 20).spans
    # Seen means printed (issue 36): the map prints login's signature line, not its body.
    assert seen_check(["app/auth.py:4"], shape.shown) == (1.0, [])
    assert seen_check(["app/auth.py:4-5"], shape.shown) == (0.0, ["app/auth.py:4-5"])
    assert seen_check(["app/auth.py:8-9"], shape.shown) == (0.0, ["app/auth.py:8-9"])  # not in the map
    message = render_task(TASK, None, None, shape.files, shape.sections)
    assert message == f"{TASK}\n\nFiles named in the task: app/auth.py\n\n{section}"

    roomy = TaskShape(task=TASK)
    RepoMap(600).shape_task(context, roomy)
    assert "8-9 def check_password(user, password)" in roomy.sections[0]
    assert seen_check(["app/views.py:4"], roomy.shown) == (1.0, [])  # a header printed, not 4-5
    nothing = TaskShape(task=TASK)
    RepoMap(1).shape_task(context, nothing)  # not even one file's name fits: no section at all
    assert nothing.sections == [] and nothing.shown == []
    assert render_task(TASK, None, None, [], nothing.sections) == TASK


def test_the_builder_places_the_repo_map_right_after_task_shaping(config: LabConfig) -> None:
    assert ORDER.index(RepoMap) == ORDER.index(TaskShaping) + 1
    profile = _base(**_symbols(config))
    names = policy_names(build.policies(profile))
    assert names[names.index("task_shaping") + 1] == "repo_map"
    [repo_map] = [p for p in build.policies(profile) if isinstance(p, RepoMap)]
    assert repo_map.params() == {"tokens": 600}
    assert "repo_map" not in policy_names(build.policies(profile.model_copy(update={"repo_map_tokens": 0})))


def test_the_tool_guide_describes_only_the_structure_tools_held_after_the_map(
    config: LabConfig, workspace: Path
) -> None:
    from subagent_lab.scaffold.tool_guide import GUIDE_HEAD, GUIDE_TAIL, ToolGuide

    ws = Workspace(workspace)
    shape = TaskShape(task=TASK)
    ToolGuide().shape_task(RunContext(TASK, ws, workspace, ("Read", "Grep", "Find", "Refs")), shape)
    [guide] = shape.sections
    lines = guide.splitlines()
    assert lines[0] == GUIDE_HEAD and lines[-1] == GUIDE_TAIL
    assert [line.split(":")[0] for line in lines[1:-1]] == ["- Find", "- Refs"]  # Outline, Search not held
    assert lines[1].startswith("- Find: Show where a name is defined") and lines[1].endswith(".")
    assert shape.shown == []  # a guide shows no code
    nothing = TaskShape(task=TASK)
    ToolGuide().shape_task(RunContext(TASK, ws, workspace, ("Read", "Grep", "Glob")), nothing)
    assert nothing.sections == []  # no structure tool held: no guide

    guided = _base(**config.scaffold("symbols-guided").resolved())
    names = policy_names(build.policies(guided))
    assert names[names.index("repo_map") + 1] == "tool_guide"
    assert "tool_guide" not in policy_names(build.policies(_base(**_symbols(config))))


def test_paths_from_seen_holds_outline_to_shown_paths_as_it_holds_read() -> None:
    tools = build_tools(("Read", "Grep", "Outline"))
    menu = ActionMenu(allowed=[*tools, FINISH])
    PathsFromSeen().narrow(View(tools=tools), menu)
    assert menu.allowed == ["Grep", FINISH]  # nothing shown: neither Read nor Outline
    shown = [Span("app/"), Span("app/auth.py", 4, 5)]
    menu = ActionMenu(allowed=[*tools, FINISH])
    PathsFromSeen().narrow(View(seen=shown, tools=tools), menu)
    assert menu.allowed == ["Read", "Grep", "Outline", FINISH]
    assert menu.choices["Read"] == {"path": ["app/auth.py"]}
    assert menu.choices["Outline"] == {"path": ["app/", "app/auth.py"]}
    view = View(seen=shown, tools=tools)
    outline = PathsFromSeen().check_call
    assert outline(view, ToolCall(id="1", name="Outline", arguments={"path": "./app/auth.py"})) is None
    refused = outline(view, ToolCall(id="2", name="Outline", arguments={"path": "app/views.py"}))
    assert refused is not None and refused.startswith("Error: Outline only") and "app/auth.py" in refused
    assert outline(view, ToolCall(id="3", name="Outline", arguments={"path": "."})) is not None
    without = ActionMenu(allowed=["Read", "Grep", FINISH])  # no Outline tool: no Outline entry
    PathsFromSeen().narrow(View(seen=shown, tools=build_tools(("Read", "Grep"))), without)
    assert "Outline" not in without.choices


# --- whole launches -----------------------------------------------------------------------------


def _option(request: ModelRequest, tool: str) -> dict[str, Any]:
    """The grammar's alternative for ``tool`` in this act-phase request."""
    schema = action_schema(request)
    options = schema.get("anyOf", [schema])
    [option] = [o for o in options if o["properties"]["tool"] == {"const": tool}]
    return option


def test_a_launch_under_the_symbols_preset_finds_outlines_and_cites_units_it_was_shown(
    make_launcher: LauncherFactory, config: LabConfig
) -> None:
    # Seen means printed (issue 36): Find and the map print the units' header lines, so those
    # are what the answer cites (their whole ranges were seen before).
    answer = {**ANSWER, "evidence": ["app/auth.py:8", "app/views.py:4"]}
    launcher, model = make_launcher(
        [
            tool_calls(("Find", {"name": "check_password"})),  # ``name`` is tool_call's own
            tool_call("Outline", path="app/auth.py"),
            tool_call(FINISH),
            final({"found": "yes"}),  # the absence check
            final(answer),
        ]
    )
    result = launcher.launch(SubagentRequest(task=TASK, overrides=_symbols(config)))
    assert result.status == "completed" and result.contract is not None, result.detail
    assert result.contract["evidence"] == answer["evidence"]
    assert result.seen_ratio == 1.0  # the Find-shown header and the map-only one both count as seen
    assert result.tool_usage["Find"]["executed"] == 1 and result.tool_usage["Outline"]["executed"] == 1
    first = model.requests[0]
    assert MAP_HEAD in str(first.messages[1].content) and "4-5 def index()" in str(first.messages[1].content)
    assert [t["function"]["name"] for t in first.tools] == ["Read", "Grep", "Glob", *SYMBOL_TOOLS, FINISH]
    for tool, argument in (("Find", "name"), ("Refs", "name"), ("Search", "query"), ("Outline", "path")):
        option = _option(first, tool)
        assert argument in option["required"] and option["properties"][argument]["type"] == "string"
    # The map showed both files: Outline may name them, and only them (constrain_paths).
    assert set(_option(first, "Outline")["properties"]["path"]["enum"]) == {"app/auth.py", "app/views.py"}
    assert "Find" not in first.arg_choices and "Search" not in first.arg_choices
    # The absence check restates the task, not the map appended to its message (cut at a length,
    # a restated map was junk the model judged instead of the task).
    check = str(model.requests[-2].messages[-1].content)
    assert "Does it contain what the task looks for" in check
    assert TASK in check and MAP_HEAD not in check and "def index()" not in check
    [start] = [e for e in read_trace(result.trace_path) if isinstance(e, RunStarted)]
    assert start.tools == ["Read", "Grep", "Glob", *SYMBOL_TOOLS]
    assert start.policies.index("repo_map") == start.policies.index("task_shaping") + 1
    ran = Scaffold.model_validate(start.profile_fields["scaffold"])
    assert ran.param("RepoMap", "tokens") == 600 and ran.has("SymbolTools")
    # The map's units are in the trace, so the scorer holds the answer to the rule the loop held it
    # to: the map-only header (views.py:4, never shown by a tool) is seen, its body and a line
    # outside it are not.
    assert ("app/views.py", 4, 4) in start.shown
    ctx = context_from_trace(result.trace_path)
    assert ctx.require_seen and any(s.covers("app/views.py", 4, 4) for s in ctx.seen or ())
    assert not any(s.covers("app/views.py", 4, 5) for s in ctx.seen or ())
    assert not any(s.covers("app/views.py", 7, 7) for s in ctx.seen or ())


def test_plain_and_aided_resolve_as_before_and_launch_without_map_or_symbol_tools(
    make_launcher: LauncherFactory, config: LabConfig
) -> None:
    lab = load_config(REPO / "profiles.yaml", env={})
    with (REPO / "benchmarks" / "results" / "baseline.csv").open() as fh:
        recorded = {row["scaffold"]: row["scaffold_hash"] for row in csv.DictReader(fh)}
    for name in ("plain", "aided"):
        scaffold = lab.scaffold(name).scaffold
        assert not scaffold.has("SymbolTools") and not scaffold.has("RepoMap")
        assert legacy_hash(scaffold) == recorded[name]  # rows recorded before specs: the legacy mapper
    assert lab.scaffold("plain").scaffold == PLAIN
    symbols, aided = lab.scaffold("symbols").scaffold, lab.scaffold("aided").scaffold
    assert set(symbols.labels()) - set(aided.labels()) == {"SymbolTools", "RepoMap", "RepoMap.tokens=600"}
    launcher, model = make_launcher(
        [
            tool_call("Grep", pattern="check_password", path="."),
            tool_call(FINISH),
            final({"found": "yes"}),
            final({**ANSWER, "evidence": ["app/auth.py:8", "app/views.py:4-5"]}),  # a Grep line, a unit
        ]
    )
    result = launcher.launch(SubagentRequest(task=TASK, overrides=lab.scaffold("aided").resolved()))
    first = model.requests[0]
    assert MAP_HEAD not in str(first.messages[1].content) and "repo_map" not in result.policies
    assert [t["function"]["name"] for t in first.tools] == ["Read", "Grep", "Glob", FINISH]
    assert result.seen_ratio == 0.5  # no map: index() was never shown
    [check] = [e for e in read_trace(result.trace_path) if isinstance(e, ContractChecked)]
    assert check.unseen == ["app/views.py:4-5"]


def test_symbols_units_lists_and_allows_the_units_the_structure_tools_showed_in_their_order(
    make_launcher: LauncherFactory, config: LabConfig
) -> None:
    """The word-ranked listing dropped the definitions Find returned (docs/benchmarks.md); with
    ``cite_units`` the answer cites the units shown, in the order shown, and a Read window (shown,
    but not a unit) is no choice. Seen means printed (issue 36): Find printed the units' header
    lines only, so each is cited by its header line (whole before); a unit a Read printed whole is
    cited whole."""
    answer = {**ANSWER, "evidence": ["app/auth.py:4", "app/auth.py:8"]}
    launcher, model = make_launcher(
        [
            tool_calls(("Find", {"name": "login"})),  # login (4-5) and, as its callee, check_password (8-9)
            tool_call("Read", path="app/views.py"),
            tool_call(FINISH),
            final({"found": "yes"}),
            final(answer),
        ]
    )
    overrides = config.scaffold("symbols-units").resolved()
    assert config.scaffold("symbols-units").scaffold.param("CiteFromSeen", "units") is True
    assert config.scaffold("symbols-guided").scaffold.param("CiteFromSeen", "units") is False
    result = launcher.launch(SubagentRequest(task=TASK, overrides=overrides))
    assert result.status == "completed" and result.contract is not None, result.detail
    assert result.contract["evidence"] == answer["evidence"]
    last = model.requests[-1]
    assert last.final_schema is not None
    assert last.final_schema["properties"]["evidence"]["items"]["enum"] == ["app/auth.py:4", "app/auth.py:8"]
    prompt = str(last.messages[-1].content)
    assert prompt.index("app/auth.py:4  def login(user, password):") < prompt.index("app/auth.py:8")
    assert "app/views.py:1" not in prompt.split("Code units the tools showed you")[1]


def test_units_are_listed_each_followed_by_the_shown_units_inside_it() -> None:
    """Find showed the class, then an Outline of its file listed every unit in line order: the
    class's own methods come right after it, before the file's other units, and a class is cited by
    its header line."""
    found = Span("loaders.py", 152, 243)
    outline = [Span("loaders.py", 25, 39), Span("loaders.py", 42, 149), Span("loaders.py", 75, 99)]
    outline += [found, Span("loaders.py", 179, 192), Span("loaders.py", 194, 226)]
    headers = {"loaders.py:152": "class FileSystemLoader(BaseLoader):", "loaders.py:42": "class BaseLoader:"}
    items = list(unit_items([found, *outline], headers, limit=5))
    assert items == [
        "loaders.py:152",
        "loaders.py:179-192",
        "loaders.py:194-226",
        "loaders.py:25-39",
        "loaders.py:42",
    ]
    assert list(unit_items([found, *outline], headers))[5] == "loaders.py:75-99"  # inside BaseLoader, next


def test_a_unit_is_cited_whole_only_when_all_its_lines_were_printed() -> None:
    """Seen means printed (issue 36): Find printed both units' header lines and a Read printed
    lines 1-6 (all of 4-5): the first is cited whole, the second by its header line."""
    units = [Span("a.py", 4, 5), Span("a.py", 8, 9)]
    printed = [Span("a.py", 4, 4), Span("a.py", 8, 8), Span("a.py", 1, 6)]
    assert list(unit_items(units, {}, printed=printed)) == ["a.py:4-5", "a.py:8"]
    assert list(unit_items(units, {})) == ["a.py:4-5", "a.py:8-9"]  # printed not given: not checked
