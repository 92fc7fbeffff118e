"""Child-level counterfactual replay: a recorded parent re-run with one child swapped, every other
call served from its record (``sl.replay_parent``), and the per-child credit table."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from conftest import LOGIN_ANSWER, task_call

from subagent_lab.agents.parent import MainAgent
from subagent_lab.agents.result import MainRunResult
from subagent_lab.api.credit import CREDIT_COLUMNS, child_credit, identity_exact
from subagent_lab.api.replay import replay_parent
from subagent_lab.config.profiles import LabConfig
from subagent_lab.core.trace import ModelCalled, RunStarted, read_trace
from subagent_lab.core.types import ConfigError, ModelChoice, ModelRequest, ModelResponse
from subagent_lab.models.scripted import ScriptedModel, final, tool_call, tool_calls

FIRST = {**LOGIN_ANSWER, "summary": "login is in app/auth.py.", "evidence": ["app/auth.py:4-5"]}
SECOND = {**LOGIN_ANSWER, "summary": "check_password hashes the password.", "evidence": ["app/auth.py:8-9"]}
ANSWER = "login is at app/auth.py:4-5 and check_password at app/auth.py:8-9."


def _delegating(config: LabConfig) -> LabConfig:
    main = config.agents["main"].model_copy(update={"tools": ("Task",), "verify": False})
    return config.model_copy(update={"agents": {**config.agents, "main": main}})


def _parent_turns() -> list[Any]:
    return [
        tool_calls(task_call("Where is login?")),
        tool_calls(task_call("What does check_password do?")),
        final(ANSWER),
    ]


def _child_turns() -> list[Any]:
    return [tool_call("Read", path="app/auth.py"), final(FIRST), tool_call("Grep", pattern="sha256"),
            final(SECOND)]  # fmt: skip


def _record(config: LabConfig, workspace: Path, tmp_path: Path) -> MainRunResult:
    """A parent on main that asks two explore children (on light) and answers from both."""
    parent, child = ScriptedModel(_parent_turns()), ScriptedModel(_child_turns())
    agent = MainAgent(_delegating(config), workspace, model_factory=lambda c, cfg: parent,
                      child_model_factory=lambda c, cfg: child, scratch_dir=tmp_path)  # fmt: skip
    return agent.run("Where is login and what does check_password do?")


def _silent(choice: ModelChoice, cfg: object) -> ScriptedModel:
    """A live model with no turns: any call that reaches it fails the run."""
    return ScriptedModel([])


def _keys(trace: str) -> list[str]:
    return [e.request_key for e in read_trace(trace) if isinstance(e, ModelCalled)]


def test_identity_replay_reproduces_the_recorded_parent_with_no_live_call(
    config: LabConfig, workspace: Path, tmp_path: Path
) -> None:
    recorded = _record(config, workspace, tmp_path)
    assert len(recorded.children) == 2 and recorded.answer == ANSWER
    replay = replay_parent(recorded, config=_delegating(config), live=_silent, scratch_dir=tmp_path)
    result = replay.result
    assert replay.live_calls == 0 and replay.served_calls == 7  # 3 parent calls, 2 + 2 children's
    assert (result.terminal_reason, result.answer, result.contract) == (
        recorded.terminal_reason, recorded.answer, recorded.contract,
    )  # fmt: skip
    assert result.usage == recorded.usage and result.total_usage == recorded.total_usage
    # The same requests, call for call: the parent's and each child's.
    assert _keys(result.trace_path) == _keys(recorded.trace_path)
    for new, old in zip(result.children, recorded.children, strict=True):
        assert _keys(new.trace_path) == _keys(old.trace_path) and new.result == old.result
    assert all(e.cache_hit for e in read_trace(result.trace_path) if isinstance(e, ModelCalled))
    assert identity_exact(replay)
    # A recorded ending the replay does not reproduce fails the check, with 0 live calls all the same.
    trace = Path(recorded.trace_path)
    lines = trace.read_text(encoding="utf-8").splitlines()
    ended = json.loads(lines[-1])
    assert ended["kind"] == "run_ended"
    ended["usage"]["completion_tokens"] += 1
    trace.write_text("\n".join([*lines[:-1], json.dumps(ended)]) + "\n", encoding="utf-8")
    assert replay.live_calls == 0 and not identity_exact(replay)


# --- a swapped child ---------------------------------------------------------------------------

ELSEWHERE = {**LOGIN_ANSWER, "summary": "only the views import it.", "evidence": ["app/views.py:1"]}
GOLD = ("app/auth.py:4-5", "app/auth.py:8-9")


def _child_policy(request: ModelRequest) -> ModelResponse:
    """A child that answers its task at once: FIRST about login, SECOND about check_password."""
    return final(SECOND if "check_password" in str(request.messages[1].content) else FIRST)


def _floor_policy(request: ModelRequest) -> ModelResponse:
    """A stand-in for the no-model floor: it finds only the import."""
    return final(ELSEWHERE)


def _parent_policy(request: ModelRequest) -> ModelResponse:
    """A parent that asks two children in turn, then answers with every location they reported."""
    seen = [m.content for m in request.messages if m.role == "tool"]
    if len(seen) < 2:
        prompt = ("Where is login?", "What does check_password do?")[len(seen)]
        return tool_calls(task_call(prompt))
    text = " ".join(str(c) for c in seen)
    found = [loc for loc in ("app/auth.py:4-5", "app/auth.py:8-9", "app/views.py:1") if loc in text]
    return final("Found at " + " and ".join(found) + ".")


def _scripted(policy: Any, n: int = 6) -> ScriptedModel:
    return ScriptedModel([policy] * n)


def _children(choice: ModelChoice, cfg: object) -> ScriptedModel:
    return _scripted(_floor_policy if choice == "none" else _child_policy)


def _record_policies(config: LabConfig, workspace: Path, tmp_path: Path) -> MainRunResult:
    parent = _scripted(_parent_policy)
    agent = MainAgent(_delegating(config), workspace, model_factory=lambda c, cfg: parent,
                      child_model_factory=_children, scratch_dir=tmp_path)  # fmt: skip
    return agent.run("Where is login and what does check_password do?")


def test_swapping_child_1_serves_child_0_and_changes_only_what_follows(
    config: LabConfig, workspace: Path, tmp_path: Path
) -> None:
    recorded = _record_policies(config, workspace, tmp_path)
    assert recorded.answer == "Found at app/auth.py:4-5 and app/auth.py:8-9."
    live_parent = _scripted(_parent_policy)
    replay = replay_parent(recorded, {1: {"model": "none"}}, config=_delegating(config),
                           live=lambda c, cfg: live_parent, child_live=_children,
                           scratch_dir=tmp_path)  # fmt: skip
    result = replay.result
    first, second = result.children
    # Child 0 ran as recorded, every call served; child 1 ran on the floor, live.
    assert first.model_used == "light" and _keys(first.trace_path) == _keys(recorded.children[0].trace_path)
    assert all(e.cache_hit for e in read_trace(first.trace_path) if isinstance(e, ModelCalled))
    assert second.model_used == "none" and second.result == ELSEWHERE
    assert not any(e.cache_hit for e in read_trace(second.trace_path) if isinstance(e, ModelCalled))
    # The parent's two calls up to child 1 were served; only its answer after it was live.
    assert replay.tally.served == {"parent": 2, "children": 1}
    assert replay.tally.live == {"parent": 1, "children": 1} and len(live_parent.requests) == 1
    assert _keys(result.trace_path)[:2] == _keys(recorded.trace_path)[:2]
    assert _keys(result.trace_path)[2] != _keys(recorded.trace_path)[2]
    assert result.answer == "Found at app/auth.py:4-5 and app/views.py:1."
    assert replay.live_usage.total_tokens == sum(u.total_tokens for u in replay.tally.live_usage.values()) > 0


def test_a_swap_changes_budgets_and_context_mode_and_a_bad_one_is_refused(
    config: LabConfig, workspace: Path, tmp_path: Path
) -> None:
    recorded = _record_policies(config, workspace, tmp_path)
    options: dict[str, Any] = dict(config=_delegating(config), live=lambda c, cfg: _scripted(_parent_policy),
                                   child_live=_children, scratch_dir=tmp_path)  # fmt: skip
    replay = replay_parent(recorded, {0: {"max_steps": 3, "context_mode": "forked"}}, **options)
    starts = [
        next(e for e in read_trace(c.trace_path) if isinstance(e, RunStarted)) for c in replay.result.children
    ]
    assert starts[0].profile_fields["max_steps"] == 3 and starts[0].prior_messages  # forked, 3 steps
    assert starts[1].profile_fields["max_steps"] != 3 and not starts[1].prior_messages
    assert replay.tally.live["children"] == 1  # child 0's new start; child 1 was asked as recorded
    aided = _delegating(config).scaffold("aided").resolved()
    replay = replay_parent(recorded, {1: {"scaffold": "aided"}}, **options)
    fields = next(
        e for e in read_trace(replay.result.children[1].trace_path) if isinstance(e, RunStarted)
    ).profile_fields
    assert {k: fields[k] for k in aided} == aided and replay.tally.served["parent"] == 2
    with pytest.raises(ConfigError, match="max_stepz"):
        replay_parent(recorded, {0: {"max_stepz": 3}}, **options)
    with pytest.raises(ValueError, match="no child 2"):
        replay_parent(recorded, {2: {"model": "none"}}, **options)
    with pytest.raises(ValueError, match="one child at a time"):
        replay_parent(recorded, {0: {"model": "none"}, 1: {"model": "none"}}, **options)


def test_child_credit_scores_each_child_swapped_to_the_floor_and_the_other_model(
    config: LabConfig, workspace: Path, tmp_path: Path
) -> None:
    recorded = _record_policies(config, workspace, tmp_path)

    def gold_share(result: MainRunResult) -> float:
        return sum(loc in (result.answer or "") for loc in GOLD) / len(GOLD)

    df = child_credit(recorded.trace_path, gold_share, config=_delegating(config), target=workspace,
                      live=lambda c, cfg: _scripted(_parent_policy), child_live=_children,
                      scratch_dir=tmp_path)  # fmt: skip
    assert list(df.columns) == list(CREDIT_COLUMNS) and df.attrs["identity_live_calls"] == 0
    # The identity check on every row: no live call, and the recorded ending reproduced.
    assert (df["identity_misses"] == 0).all() and df["identity_exact"].all()
    assert set(df["parent_run"]) == {recorded.run_id}
    assert [(r.child, r.recorded_model, r.swapped_to) for r in df.itertuples()] == [
        (0, "light", "none"), (0, "light", "main"), (1, "light", "none"), (1, "light", "main"),
    ]  # fmt: skip
    assert set(df["recorded_score"]) == {1.0}
    # Each child found one of the two gold places: on the floor it finds neither, on main the same.
    assert list(df["score"]) == [0.5, 1.0, 0.5, 1.0] and list(df["contribution"]) == [0.5, 0.0, 0.5, 0.0]
    assert list(df["answer_changed"]) == [True, False, True, False]
    # Swapping child 0 re-asks child 1 identically (served); swapping child 1 serves child 0 and
    # the parent's first two calls. Every replay sent the swapped child and the parent's answer live.
    assert list(df["cache_misses"]) == [3, 3, 2, 2] and list(df["parent_live_calls"]) == [2, 2, 1, 1]
    assert (df["cache_hits"] + df["cache_misses"] == 5).all() and (df["live_tokens"] > 0).all()


# --- the delegation study ----------------------------------------------------------------------


def test_study_credit_replays_a_study_row_under_its_arm_and_reproduces_its_score(tmp_path: Path) -> None:
    from subagent_lab.api.credit import study_credit
    from subagent_lab.experiments.delegation import Cell, DelegationSpec, run_study
    from subagent_lab.experiments.parent_baseline import ParentBaseline
    from subagent_lab.models.baseline import BaselineModel

    spec = DelegationSpec(splits=("dev",), tasks_per_split=1, cells=(Cell(arm="delegate-light"),))
    parents, children = (lambda c, cfg: ParentBaseline()), (lambda c, cfg: BaselineModel())
    row = run_study(spec, out_dir=tmp_path, parent_factory=parents, child_factory=children).iloc[0]
    assert not isinstance(row["error"], str)  # no traceback: the run ran
    assert row["sub_agents"] == 1 and row["child_model"] == "light"
    df = study_credit(row, live=parents, child_live=children)
    assert df.attrs["identity_live_calls"] == 0  # the configured arm replays the row call for call
    assert list(df["swapped_to"]) == ["none", "main"] and set(df["cell"]) == {"delegate-light"}
    assert set(df["recorded_score"]) == {row["quality"]}  # scored as the study scored it
    assert (df["cache_misses"] > 0).all() and (df["live_tokens"] > 0).all()
    assert len(list(tmp_path.glob("*/replays/*/main-*.jsonl"))) == 3  # apart from the study's traces


def test_a_forced_delegations_child_is_child_0_and_parallel_children_replay_in_any_order(
    config: LabConfig, workspace: Path, tmp_path: Path
) -> None:
    def composer(request: ModelRequest) -> ModelResponse:  # cites what the forced envelope showed
        text = " ".join(str(m.content) for m in request.messages)
        return final("Found at " + " and ".join(loc for loc in (*GOLD, "app/views.py:1") if loc in text))

    main = config.agents["main"].model_copy(update={"tools": (), "verify": False})
    lab = config.model_copy(update={"agents": {**config.agents, "main": main}})
    parent = _scripted(composer)
    recorded = MainAgent(lab, workspace, model_factory=lambda c, cfg: parent, child_model_factory=_children,
                         scratch_dir=tmp_path, forced_delegation=True).run("Where is login?")  # fmt: skip
    assert recorded.answer == "Found at app/auth.py:4-5"
    options: dict[str, Any] = dict(config=lab, live=lambda c, cfg: _scripted(composer), child_live=_children,
                                   scratch_dir=tmp_path)  # fmt: skip
    assert replay_parent(recorded.trace_path, target=workspace, **options).live_calls == 0  # forced: inferred
    swapped = replay_parent(recorded, {0: {"model": "none"}}, **options)
    assert (
        swapped.result.children[0].model_used == "none" and swapped.result.answer == "Found at app/views.py:1"
    )

    # Two Task calls in one turn run at once; each child is found again by its task.
    both = tool_calls(task_call("Where is login?"), task_call("What does check_password do?"))
    twice = ScriptedModel([both, final(ANSWER)])
    recorded = MainAgent(_delegating(config), workspace, model_factory=lambda c, cfg: twice,
                         child_model_factory=_children, scratch_dir=tmp_path).run("Both?")  # fmt: skip
    live_parent = ScriptedModel([final("one answer")])
    options.update(config=_delegating(config), live=lambda c, cfg: live_parent)
    assert replay_parent(recorded, **options).live_calls == 0
    replay = replay_parent(recorded, {1: {"model": "none"}}, **options)
    # Child 1 is the one requested second in the recording, whichever thread got there first.
    swapped_task = replay.children[1].task
    starts = [
        next(e for e in read_trace(c.trace_path) if isinstance(e, RunStarted)) for c in replay.result.children
    ]
    ran = {start.request_task: start.model_used for start in starts}
    assert ran == {swapped_task: "none", replay.children[0].task: "light"} and len(ran) == 2
    assert replay.tally.live == {"parent": 1, "children": 1} and replay.result.answer == "one answer"
