"""Each scaffold policy's hooks, called directly on a stand-in run view (no launch, no model)."""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from subagent_lab.config import build
from subagent_lab.config.agent_profile import AgentProfile
from subagent_lab.config.profiles import LabConfig, ModelConfig
from subagent_lab.core.contracts import contract_schema
from subagent_lab.core.policy import (
    FINISH,
    ActionMenu,
    AnswerCheck,
    CallResult,
    Policy,
    RunContext,
    TaskShape,
    policy_names,
    policy_params,
)
from subagent_lab.core.tool import Tool
from subagent_lab.core.types import LimitReached, Span, ToolCall, ToolOutcome
from subagent_lab.scaffold.absence_check import ABSENT_PROMPT, CHECK_SCHEMA, AbsenceCheck
from subagent_lab.scaffold.cite_from_seen import CiteFromSeen
from subagent_lab.scaffold.finish_when import FinishWhen
from subagent_lab.scaffold.first_search import FirstSearch
from subagent_lab.scaffold.grace import Grace
from subagent_lab.scaffold.paths_from_seen import PathsFromSeen
from subagent_lab.scaffold.read_after_hits import ReadAfterHits
from subagent_lab.scaffold.read_on import ReadOn
from subagent_lab.scaffold.require_evidence import RequireEvidence
from subagent_lab.scaffold.require_tool_first import NUDGE_PROMPT, RequireToolFirst
from subagent_lab.scaffold.skip_repeated import SkipRepeated
from subagent_lab.scaffold.specs import ORDER
from subagent_lab.scaffold.task_shaping import TaskShaping
from subagent_lab.tools.registry import build_tools
from subagent_lab.workspace.sandbox import Workspace

TOOLS = ("Read", "Grep", "Glob")


@dataclass
class View:
    """A stand-in ``RunView``: plain fields, and a log of what the policy asked for."""

    task: str = "Where is login defined?"
    task_message: str = "Where is login defined?\n\nWorkspace top level: app/"
    contract: str | None = "ExploreResult"
    workspace_root: Path = Path(".")
    tools: Mapping[str, Tool] = field(default_factory=dict)
    tool_context: Any = None
    steps: int = 1
    stale_turns: int = 0
    seen: Sequence[Span] = ()
    counts: dict[str, int] = field(default_factory=dict)
    prompts: list[tuple[str, str]] = field(default_factory=list)
    answer: str = '{"found": "yes"}'
    asked: list[tuple[str, dict[str, Any], int]] = field(default_factory=list)

    def executed(self, tool: str | None = None) -> int:
        return self.counts.get(tool, 0) if tool else sum(self.counts.values())

    def add_prompt(self, purpose: str, text: str) -> None:
        self.prompts.append((purpose, text))

    def ask(self, purpose: str, schema: dict[str, Any], max_tokens: int) -> str:
        self.asked.append((purpose, schema, max_tokens))
        return self.answer


def _menu() -> ActionMenu:
    return ActionMenu(allowed=[*TOOLS, FINISH])


def _result(name: str, spans: tuple[Span, ...] = (), *, repeated: bool = False, **args: Any) -> CallResult:
    outcome = ToolOutcome(status="ok", text="...", spans=list(spans))
    return CallResult(ToolCall(id="c", name=name, arguments=args), outcome, repeated)


# --- the action menu ---------------------------------------------------------------------------


def test_require_tool_first_keeps_finish_off_the_menu_and_nudges_until_a_call_ran() -> None:
    policy, view, menu = RequireToolFirst(1), View(), _menu()
    policy.narrow(view, menu)
    assert menu.allowed == list(TOOLS) and policy.check_finish(view) == NUDGE_PROMPT
    view.counts["Grep"] = 1
    menu = _menu()
    policy.narrow(view, menu)
    assert FINISH in menu.allowed and policy.check_finish(view) is None


def test_paths_from_seen_offers_read_only_for_shown_files() -> None:
    policy, view, menu = PathsFromSeen(), View(), _menu()
    policy.narrow(view, menu)
    assert "Read" not in menu.allowed and menu.choices["Grep"] == {"path": ["."]}
    view.seen = [Span("app/"), Span("app/auth.py", 4, 4)]
    menu = _menu()
    policy.narrow(view, menu)
    assert "Read" in menu.allowed and menu.choices["Read"] == {"path": ["app/auth.py"]}
    assert menu.choices["Glob"] == {"path": [".", "app/", "app/auth.py"]}
    assert policy.check_call(view, ToolCall(id="1", name="Read", arguments={"path": "./app/auth.py"})) is None
    refusal = policy.check_call(view, ToolCall(id="2", name="Read", arguments={"path": "app/x.py"}))
    assert refusal is not None and refusal.startswith("Error: Read only files") and "app/auth.py" in refusal
    assert policy.check_call(view, ToolCall(id="3", name="Grep", arguments={"path": "."})) is None


def test_skip_repeated_sits_a_repeating_tool_out_unless_nothing_else_is_left() -> None:
    policy, view = SkipRepeated(), View()
    policy.observe(view, [_result("Grep", repeated=True, pattern="x"), _result("Read", path="a.py")])
    menu = _menu()
    policy.narrow(view, menu)
    assert menu.allowed == ["Read", "Glob", FINISH]
    menu = ActionMenu(allowed=["Grep"])
    policy.narrow(view, menu)
    assert menu.allowed == ["Grep"]  # nothing else left: the repeat stays possible
    note = policy.repeat_note(view, 3)
    assert note is not None and "step 3" in note


def test_finish_when_leaves_only_finish_after_stale_turns_or_reads() -> None:
    view = View(stale_turns=1)
    for policy, expected in ((FinishWhen(stale=1), [FINISH]), (FinishWhen(stale=2), [*TOOLS, FINISH])):
        menu = _menu()
        policy.narrow(view, menu)
        assert menu.allowed == expected
    view = View(counts={"Read": 1})
    menu = _menu()
    FinishWhen(reads=1).narrow(view, menu)
    assert menu.allowed == [FINISH]
    menu = ActionMenu(allowed=list(TOOLS))  # finish not offered (a rule before said so): no change
    FinishWhen(reads=1).narrow(view, menu)
    assert menu.allowed == list(TOOLS)


def test_read_after_hits_offers_read_and_finish_after_a_search_that_hit() -> None:
    policy, view = ReadAfterHits(), View()
    policy.observe(view, [_result("Grep", (Span("a.py", 3, 3),), pattern="x")])
    menu = _menu()
    policy.narrow(view, menu)
    assert menu.allowed == ["Read", FINISH]
    policy.observe(view, [_result("Grep", (Span("a.py"),), pattern="y")])  # a file list, no lines
    menu = _menu()
    policy.narrow(view, menu)
    assert menu.allowed == [*TOOLS, FINISH]


def test_first_search_is_a_grep_for_the_task_names_at_step_zero_only(workspace: Path) -> None:
    ws = Workspace(workspace)
    policy = FirstSearch(2).for_run(RunContext("Where is check_password defined?", ws, workspace, TOOLS))
    view = View(tools=build_tools(list(TOOLS), "simple"), steps=0)
    menu = _menu()
    menu.choices["Grep"] = {"path": ["."]}
    policy.narrow(view, menu)
    assert menu.allowed == ["Grep"] and menu.choices["Grep"]["path"] == ["."]
    assert menu.choices["Grep"]["pattern"][0] == "check_password"
    view.steps = 1
    menu = _menu()
    policy.narrow(view, menu)
    assert menu.allowed == [*TOOLS, FINISH]


def test_the_menu_precedence_is_the_order_the_builder_writes() -> None:
    """A repeated Grep and a hit: skip-repeated first, then read-after-hits narrows what is left."""
    view = View(counts={"Grep": 1}, seen=[Span("a.py", 2, 2)])
    policies: list[Policy] = [RequireToolFirst(1), PathsFromSeen(), SkipRepeated(), ReadAfterHits()]
    results = [_result("Grep", (Span("a.py", 2, 2),), pattern="x")]
    for policy in policies:
        policy.observe(view, results)
    policies[2].observe(view, [_result("Grep", repeated=True, pattern="x")])
    menu = _menu()
    for policy in policies:
        policy.narrow(view, menu)
    assert menu.allowed == ["Read", FINISH]
    names = [cls.name for cls in ORDER]
    assert names.index("skip_repeated") > names.index("paths_from_seen") > names.index("require_tool_first")
    assert names.index("first_search") > names.index("read_after_hits") > names.index("finish_when")
    assert names.index("absence_check") > names.index("cite_from_seen")


# --- repeats, the final answer, grace ------------------------------------------------------------


def test_read_on_shows_the_next_window_of_a_repeated_read_until_spent(tmp_path: Path) -> None:
    (tmp_path / "m.py").write_text("".join(f"x{i} = {i}\n" for i in range(1, 121)))
    tools = build_tools(["Read"], "simple")
    view = View(tools=tools, tool_context=Workspace(tmp_path), workspace_root=tmp_path)
    call = ToolCall(id="r", name="Read", arguments={"path": "m.py", "line": 5})
    first = tools["Read"].invoke(view.tool_context, call.arguments)
    policy = ReadOn(1).for_run(RunContext("t", view.tool_context, tmp_path, ("Read",)))
    policy.observe(view, [CallResult(call, first, False)])
    view.seen = list(first.spans)
    again = policy.on_repeat(view, call, 1)
    assert again is not None and again.text.startswith("[Read on: m.py lines")
    assert again.spans[0].start > first.spans[0].end - 15
    assert policy.on_repeat(view, call, 1) is None  # spent
    assert policy.on_repeat(view, ToolCall(id="g", name="Grep", arguments={"pattern": "x"}), 1) is None


def test_cite_from_seen_lists_ranked_citable_lines_and_allows_only_those(tmp_path: Path) -> None:
    (tmp_path / "auth.py").write_text("import os\n\ndef login(user):\n    return user\n")
    view = View(workspace_root=tmp_path, task_message="Where is login defined?")
    policy = CiteFromSeen(constrain=True, anchors=True, margin=0, max_evidence=4)
    policy.observe(view, [_result("Grep", (Span("auth.py", 1, 1), Span("auth.py", 3, 3)), pattern="x")])
    prompt = policy.final_prompt(view, "Answer.", "Answer.")
    assert prompt.startswith("Answer. Locations the tools showed you, most relevant first")
    assert "- auth.py:3  def login(user):" in prompt and "auth.py:1" not in prompt  # the margin
    schema = policy.answer_schema(view, contract_schema("ExploreResult"))
    assert schema["properties"]["evidence"]["items"]["enum"] == ["auth.py:3"]
    plain = CiteFromSeen(constrain=False)
    view.seen = [Span("auth.py", 3, 4)]
    assert (
        plain.final_prompt(view, "A.", "A.")
        == "A. Locations the tools showed you (cite those that answer the task): auth.py:3-4"
    )
    assert plain.answer_schema(view, {"x": 1}) == {"x": 1}


def test_absence_check_asks_restating_the_task_and_on_no_empties_the_evidence() -> None:
    view = View(counts={"Grep": 1}, answer='{"found": "no"}')
    policy = AbsenceCheck(empty_evidence=True)
    policy.before_final(view)
    [(purpose, text)] = view.prompts
    assert purpose == "check" and view.task_message in text
    assert view.asked == [("check", CHECK_SCHEMA, 12)]
    assert policy.final_prompt(view, "Lead.", "Lead. listing") == "Lead." + ABSENT_PROMPT
    narrowed = CiteFromSeen(min_evidence=2).answer_schema(view, contract_schema("ExploreResult"))
    emptied = policy.answer_schema(view, narrowed)["properties"]["evidence"]
    assert emptied["maxItems"] == 0 and "minItems" not in emptied
    quiet = View(counts={})  # nothing searched: nothing to judge, no question
    AbsenceCheck().before_final(quiet)
    assert quiet.asked == [] and AbsenceCheck().final_prompt(quiet, "L", "L x") == "L x"


def test_require_evidence_turns_unseen_or_ungrounded_items_into_errors() -> None:
    check = AnswerCheck({"evidence": ["a.py:1"]}, ungrounded=["a.py:1 (no such file)"], unseen=["a.py:1"])
    assert len(RequireEvidence(grounded=True, seen=True).check_answer(View(), check)) == 2
    assert RequireEvidence(seen=True).check_answer(View(), check)[0].startswith("evidence no tool showed you")
    assert RequireEvidence().check_answer(View(), check) == []


def test_grace_only_after_a_limit_and_only_for_a_run_that_looked() -> None:
    stop = LimitReached("max_steps", "reached")
    assert Grace().grace(View(counts={"Read": 1}), stop)
    assert not Grace().grace(View(), stop)


def test_task_shaping_adds_the_layout_and_the_named_files(workspace: Path) -> None:
    ctx = RunContext("Explain auth.py", Workspace(workspace), workspace, TOOLS)
    shape = TaskShape(task=ctx.task, layout="Workspace top level: app/")
    TaskShaping(layout=True, paths=True).shape_task(ctx, shape)
    assert (shape.overview, shape.files) == ("Workspace top level: app/", ["app/auth.py"])
    shape = TaskShape(task=ctx.task, layout="Workspace top level: app/")
    TaskShaping().shape_task(ctx, shape)
    assert (shape.overview, shape.files) == (None, [])


# --- the builder ---------------------------------------------------------------------------------


def test_for_run_gives_fresh_state_with_the_same_parameters() -> None:
    used = SkipRepeated()
    used.observe(View(), [_result("Grep", repeated=True)])
    fresh = used.for_run(RunContext("t", None, Path("."), TOOLS))
    assert isinstance(fresh, SkipRepeated) and fresh is not used
    menu = _menu()
    fresh.narrow(View(), menu)
    assert "Grep" in menu.allowed
    read_on = ReadOn(2)
    assert read_on.for_run(RunContext("t", None, Path("."), TOOLS)).params() == {"n": 2}
    assert isinstance(read_on._lock, type(threading.Lock()))


def test_the_builder_maps_the_flat_fields_to_ordered_policies(config: LabConfig) -> None:
    explore = config.profile("explore").model_copy(
        update={**config.scaffold("aided").resolved(),
                "min_tool_calls": 1, "constrain_paths": True, "finish_after_stale": 1,
                "read_after_hits": True, "first_search": 2, "cite_anchors": True, "cite_margin": 2,
                "absence_check": True, "require_seen": True, "task_paths": True}
    )  # fmt: skip
    spec, policies = build.build(explore, ModelConfig(model="m"))
    assert policy_names(policies) == [
        "require_tool_first", "paths_from_seen", "skip_repeated", "finish_when", "read_after_hits",
        "first_search", "task_shaping", "cite_from_seen", "absence_check", "require_evidence", "grace",
    ]  # fmt: skip
    params = policy_params(policies)
    assert params["cite_from_seen"]["margin"] == 2 and params["first_search"] == {"n": 2}
    assert spec.contract == "ExploreResult" and set(spec.__dataclass_fields__) == {
        "limits",
        "contract",
        "sampling",
        "caps",
    }
    parent = build.policies(AgentProfile())
    assert policy_names(parent) == ["skip_repeated", "grace"]  # no contract: no citation aids


@pytest.mark.parametrize("flag", ["cite_margin", "cite_anchors", "min_evidence"])
def test_citation_fields_are_one_policys_parameters(config: LabConfig, flag: str) -> None:
    value = {"cite_margin": 1, "cite_anchors": True, "min_evidence": 1}[flag]
    policies = build.policies(config.profile("explore").model_copy(update={flag: value}))
    [cite] = [p for p in policies if isinstance(p, CiteFromSeen)]
    assert {"cite_margin": cite.margin, "cite_anchors": cite.anchors, "min_evidence": cite.min_evidence}[
        flag
    ] == value
