"""The delegation study with scripted models: context modes, forced delegation, the cost ledger,
caps across verification and parallel children, the parent's evidence and its score, the grid."""

from __future__ import annotations

import math
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from conftest import LOGIN_ANSWER, task_call

from subagent_lab.agents.launch_io import fork_prefix
from subagent_lab.agents.launcher import SubagentLauncher, SubagentRequest
from subagent_lab.agents.parent import MainAgent
from subagent_lab.agents.task_tool import TaskContext
from subagent_lab.bench.suite import BenchTask, GoldSpan
from subagent_lab.config.profiles import LabConfig
from subagent_lab.core.context import estimate_messages
from subagent_lab.core.trace import ActionForced, RunStarted, read_trace
from subagent_lab.core.types import Message, ModelRequest, ModelResponse, ToolCall, Usage
from subagent_lab.experiments.delegation import Cell, DelegationSpec, run_children, run_study, study_tasks
from subagent_lab.experiments.delegation.ledger import (
    answer_evidence,
    ledger_columns,
    ledger_totals,
    parent_evidence,
    parent_ledgers,
    score_parent,
)
from subagent_lab.experiments.delegation.table import study_sentences, study_table
from subagent_lab.models.scripted import ScriptedModel, final, tool_call, tool_calls

GOOD = LOGIN_ANSWER


_task = task_call


def _with_main(config: LabConfig, **fields: Any) -> LabConfig:
    main = config.agents["main"].model_copy(update=fields)
    return config.model_copy(update={"agents": {**config.agents, "main": main}})


def _served(payload: Any, model_id: str, usage: Usage | None = None) -> ModelResponse:
    response = final(payload) if not isinstance(payload, ModelResponse) else payload
    return response.model_copy(update={"model_id": model_id, "usage": usage or Usage()})


def _agent(config: LabConfig, workspace: Path, tmp_path: Path, parent: ScriptedModel, child: ScriptedModel,
           **kwargs: Any) -> MainAgent:  # fmt: skip
    """A main agent whose parent and children run on two scripted models."""
    return MainAgent(config, workspace, model_factory=lambda c, cfg: parent,
                     child_model_factory=lambda c, cfg: child, scratch_dir=tmp_path, **kwargs)  # fmt: skip


def _u(prompt: int, completion: int, cached: int) -> Usage:
    return Usage(prompt_tokens=prompt, completion_tokens=completion, cached_tokens=cached)


# --- the parent's answer as evidence ---------------------------------------------------------


def test_answer_evidence_takes_path_lines_out_of_prose() -> None:
    text = (
        "login lives in `app/auth.py:4-5` (see app/auth.py:8), called from app/views.py:1. "
        "Not evidence: auth:login, http://x.org:80, 12:30, app/auth.py:4-5 again."
    )
    assert answer_evidence(text) == ["app/auth.py:4-5", "app/auth.py:8", "app/views.py:1"]
    assert answer_evidence("./app/auth.py:4,") == ["./app/auth.py:4"]
    assert answer_evidence(None) == [] and answer_evidence("no locations at all") == []


def _bench_task() -> BenchTask:
    # The fixture workspace is no suite package: built without validation, scored all the same.
    gold = (GoldSpan(path="app/auth.py", start=4, end=5, anchor="def login"),)
    return BenchTask.model_construct(id="ws-login", kind="locate", package="jinja2", prompt="Where is login?",
                                     gold=gold, keywords=("check_password",), difficulty="easy")  # fmt: skip


def test_evidence_relayed_from_a_child_scores_like_the_parents_own(
    config: LabConfig, workspace: Path, tmp_path: Path
) -> None:
    relay = "login is at app/auth.py:4-5; it calls check_password."
    # The child reads the file (so its tool showed the lines) and answers; the parent relays it.
    child = ScriptedModel([tool_call("Read", path="app/auth.py"), final(GOOD)])
    parent = ScriptedModel([tool_calls(_task("Where is login?")), final(relay)])
    result = _agent(_with_main(config, tools=("Task",)), workspace, tmp_path, parent, child).run(
        "Where is login?"
    )
    score = score_parent(_bench_task(), result, workspace)
    assert score.contract_valid and score.strict_line_recall == 1.0 and score.unseen_evidence == []
    assert score.quality > 0.9

    # The same answer from a parent whose child never looked: the lines were not shown, no credit.
    blind = ScriptedModel([final(GOOD)])
    parent = ScriptedModel([tool_calls(_task("Where is login?")), final(relay)])
    result = _agent(_with_main(config, tools=("Task",)), workspace, tmp_path, parent, blind).run(
        "Where is login?"
    )
    score = score_parent(_bench_task(), result, workspace)
    assert score.unseen_evidence == ["app/auth.py:4-5"] and score.strict_line_recall == 0.0


def test_under_the_answer_contract_the_parent_cites_in_a_list_the_grammar_holds(
    config: LabConfig, workspace: Path, tmp_path: Path
) -> None:
    # Prose alone names the place the way a small model writes it: no path:line, nothing scored.
    prose = "login is defined in the auth.py file at line 4."
    assert answer_evidence(prose) == []
    answer = {"answer": prose, "evidence": ["app/auth.py:4-5"]}
    child = ScriptedModel([tool_call("Read", path="app/auth.py"), final(GOOD)])
    parent = ScriptedModel([tool_calls(_task("Where is login?")), tool_call("finish"), final(answer)])
    lab = _with_main(config, tools=("Task",), contract="AnswerResult")
    result = _agent(lab, workspace, tmp_path, parent, child).run("Where is login?")
    final_request = parent.requests[-1]
    assert final_request.phase == "final" and final_request.final_schema is not None
    assert set(final_request.final_schema["properties"]) == {"answer", "evidence"}
    assert result.answer == prose and result.contract == answer
    assert parent_evidence(result) == ["app/auth.py:4-5"]
    score = score_parent(_bench_task(), result, workspace)
    assert score.strict_line_recall == 1.0 and score.unseen_evidence == []

    # The evidence must be locations: prose in the list is a contract error, repaired or refused.
    bad = ScriptedModel([tool_calls(_task("Where is login?")), final({"answer": prose, "evidence": [prose]})])
    child = ScriptedModel([tool_call("Read", path="app/auth.py"), final(GOOD)])
    refused = _agent(_with_main(lab, max_repairs=0), workspace, tmp_path, bad, child)
    assert refused.run("Where is login?").terminal_reason == "invalid_output"


def test_an_unknown_parent_contract_is_a_config_error_naming_the_field() -> None:
    from subagent_lab.config.agent_profile import AgentProfile

    with pytest.raises(ValueError, match="contract: unknown contract 'Essay'"):
        AgentProfile(contract="Essay")


# --- the child's context mode ----------------------------------------------------------------


@pytest.mark.parametrize("mode", ["isolated", "brief", "forked"])
def test_context_modes_decide_what_the_child_starts_from(
    mode: str, config: LabConfig, workspace: Path, tmp_path: Path
) -> None:
    child = ScriptedModel([final(GOOD)])
    parent = ScriptedModel([
        tool_call("Grep", pattern="def login"),
        tool_calls(_task("Where is login?", context={"hints": ["app/auth.py"]})),
        final("app/auth.py:4"),
    ])  # fmt: skip
    agent = _agent(
        _with_main(config, tools=("Grep", "Task")), workspace, tmp_path, parent, child, context_mode=mode
    )
    [record] = agent.run("Where is login?").children
    messages = child.requests[0].messages
    # The child's trace records the parent's messages it started from: all of them, and only when forked.
    start = read_trace(record.trace_path)[0]
    assert isinstance(start, RunStarted)
    assert start.prior_messages == (messages[1:-1] if mode == "forked" else [])
    first_user = [m for m in messages if m.role == "user"][-1].content
    assert ("Context from the parent agent" in first_user) == (mode != "isolated")
    earlier = "\n".join(str(m.content) for m in messages[1:-1])
    if mode == "forked":  # the parent's task, its Grep call and the Grep's result, before the child's task
        assert messages[0].role == "system" and messages[-1].content == first_user
        assert (
            "Where is login?" in earlier
            and "the parent called Grep" in earlier
            and "app/auth.py:4" in earlier
        )
    else:
        assert len(messages) == 2 and earlier == ""


def test_fork_prefix_keeps_the_newest_messages_within_the_childs_budget() -> None:
    own = [Message(role="system", content="sys"), Message(role="user", content="task")]
    prior = [Message(role="user", content=f"message {i} " + "x" * 600) for i in range(40)]
    kept = fork_prefix(prior, own, context_budget=4000)
    assert kept and kept[-1].content == prior[-1].content  # the newest survive, in order
    assert estimate_messages(kept) + estimate_messages(own) <= 2000  # FORK_SHARE of the budget
    assert len(kept) < len(prior)
    assert fork_prefix(prior, own, context_budget=100) == []


def test_a_forked_childs_trace_records_exactly_the_kept_prefix_redacted(
    config: LabConfig, workspace: Path, tmp_path: Path
) -> None:
    secret = "sk-abcdefghijklmnopqrstuvwxyz0123456789"
    prior = [Message(role="user", content=f"message {i} " + "x" * 600) for i in range(40)]
    call = ToolCall(id="c1", name="Grep", arguments={"pattern": "def login"})
    prior += [
        Message(role="assistant", content="Searching.", tool_calls=[call]),
        Message(role="tool", name="Grep", tool_call_id="c1", content=f"app/auth.py:4: def login  # {secret}"),
    ]
    model = ScriptedModel([final(GOOD), final(GOOD)])
    launcher = _launcher(config, workspace, tmp_path, model)
    forked_request = SubagentRequest(task="Where is login?", prior_messages=prior)
    forked = launcher.launch(forked_request)
    plain = launcher.launch(SubagentRequest(task="Where is login?"))

    messages = model.requests[0].messages
    budget = launcher.resolve_profile(forked_request).context_token_budget
    kept = fork_prefix(prior, [messages[0], messages[-1]], budget)
    assert messages[1:-1] == kept and 2 < len(kept) < len(prior)  # trimmed: the oldest dropped
    assert secret in kept[-1].content  # the child's model is sent the parent's text as it was
    start = read_trace(forked.trace_path)[0]
    assert isinstance(start, RunStarted)
    # Exactly the kept prefix, in order, as the trace writer's redactor masks it.
    assert start.prior_messages[:-1] == kept[:-1]
    assert start.prior_messages[-1].content == kept[-1].content.replace(secret, "[REDACTED]")
    assert "[the parent called Grep" in start.prior_messages[-2].content
    assert secret not in Path(forked.trace_path).read_text()
    unforked = read_trace(plain.trace_path)[0]
    assert isinstance(unforked, RunStarted) and unforked.prior_messages == []
    # A trace written before the field still loads, with no prior messages.
    older = RunStarted.model_validate_json(start.model_dump_json(exclude={"prior_messages"}))
    assert older.prior_messages == []


def test_the_harness_fixes_the_childs_model(config: LabConfig, workspace: Path, tmp_path: Path) -> None:
    child = ScriptedModel([final(GOOD)])
    parent = ScriptedModel([tool_calls(_task("Where is login?", model="main")), final("app/auth.py:4")])
    agent = _agent(
        _with_main(config, tools=("Task",)), workspace, tmp_path, parent, child, child_model="light"
    )
    [record] = agent.run("Where is login?").children
    assert record.model_used == "light"  # the parent asked for main


# --- forced delegation -----------------------------------------------------------------------


def test_forced_delegation_sends_the_question_verbatim_and_the_parent_only_composes(
    config: LabConfig, workspace: Path, tmp_path: Path
) -> None:
    child = ScriptedModel([final(GOOD)])
    parent = ScriptedModel([final("login: app/auth.py:4-5")])
    agent = _agent(_with_main(config, tools=()), workspace, tmp_path, parent, child, forced_delegation=True)
    result = agent.run("Where is login implemented?")
    assert child.requests[0].messages[1].content.startswith("Where is login implemented?")
    assert "Context from the parent agent" not in child.requests[0].messages[1].content
    [request] = parent.requests  # one call: the answer; the parent chose no tool
    assert request.phase == "final"
    assert any(isinstance(e, ActionForced) for e in read_trace(result.trace_path))
    envelope = request.messages[2].content
    assert envelope.startswith("The harness sent your task") and "app/auth.py:4-5" in envelope
    assert [c.via for c in result.children] == ["task"] and result.answer == "login: app/auth.py:4-5"


# --- the cost ledger -------------------------------------------------------------------------


def test_the_ledger_sums_exactly_to_the_runs_totals_and_names_the_served_model(
    config: LabConfig, workspace: Path, tmp_path: Path
) -> None:
    def child_turns(tag: str) -> list[Any]:
        return [
            _served(tool_call("Grep", pattern="login"), f"served-{tag}", _u(310, 17, 200)),
            _served(GOOD, f"served-{tag}", _u(402, 61, 290)),
        ]  # fmt: skip

    child = ScriptedModel([*child_turns("a"), *child_turns("b")])
    parent = ScriptedModel([
        _served(tool_calls(_task("first")), "served-main", _u(900, 40, 0)),
        _served(tool_calls(_task("second")), "served-main", _u(1300, 35, 880)),
        _served("app/auth.py:4", "served-main", _u(1500, 9, 1290)),
    ])  # fmt: skip
    agent = _agent(_with_main(config, tools=("Task",)), workspace, tmp_path, parent, child)
    result = agent.run("Where is login?")
    ledgers = parent_ledgers(result, config)
    assert [ledger.role for ledger in ledgers] == ["parent", "task", "task"]
    assert ledgers[0].usage == result.usage  # input, output and cached tokens, to the token
    assert result.usage.cached_tokens == 2170
    for ledger, record in zip(ledgers[1:], result.children, strict=True):
        assert ledger.usage == record.usage and ledger.run_id == record.run_id
        assert (
            sum(ledger.by_tool().values(), Usage()) == ledger.usage == sum(ledger.by_turn().values(), Usage())
        )
    assert ledger_totals(ledgers) == result.total_usage
    assert ledgers[0].model_ids == ["served-main"] and [x.model_ids for x in ledgers[1:]] == [
        ["served-a"],
        ["served-b"],
    ]
    # Booked per tool: the two Task turns, then the answer (prompts as charged: the exact count
    # where it exceeds what the scripted server reported).
    by_tool = ledgers[0].by_tool()
    assert set(by_tool) == {"Task", "answer"} and (
        by_tool["Task"].completion_tokens,
        by_tool["Task"].cached_tokens,
    ) == (75, 880)
    assert by_tool["Task"].prompt_tokens >= 2200
    columns = ledger_columns(ledgers)
    assert columns["parent_peak_context"] == max(c.usage.prompt_tokens for c in ledgers[0].calls) >= 1500
    assert (
        columns["parent_tokens"] + columns["children_tokens"]
        == columns["total_tokens"]
        == result.total_usage.total_tokens
    )
    assert (
        columns["children_cached_tokens"] == 980 and columns["children_models_served"] == "served-a,served-b"
    )


# --- caps across verification and parallel children ------------------------------------------


def test_verification_children_count_against_the_childrens_cap(
    config: LabConfig, workspace: Path, tmp_path: Path
) -> None:
    verdict = {
        "verdict": "PASS",
        "reasons": ["login is at app/auth.py:4"],
        "findings": [],
        "evidence": ["app/auth.py:4"],
    }
    child = ScriptedModel([final(GOOD), final(verdict)])
    parent = ScriptedModel([tool_calls(_task("Where is login?")), final("app/auth.py:4")])
    cap = 3000
    agent = _agent(_with_main(config, tools=("Task",)), workspace, tmp_path, parent, child, verify=True,
                   children_token_cap=cap)  # fmt: skip
    result = agent.run("Where is login?")
    task_tokens = result.children[0].usage.total_tokens
    vias = [c.via for c in result.children]
    if vias == ["task", "verification"]:  # it ran: within what the Task child left of the cap
        assert result.children_usage.total_tokens <= cap
        start = read_trace(result.children[1].trace_path)[0]
        assert start.budgets["total_token_budget"] <= cap - task_tokens  # type: ignore[union-attr]
    else:  # too little left: not started, and then the answer is not verified
        assert vias == ["task"] and result.verdict == "UNVERIFIED"
        assert "children's token cap" in result.verifications[0].reasons[0]
    assert result.children_usage.total_tokens <= cap


def test_a_spent_cap_leaves_the_answer_unverified(config: LabConfig, workspace: Path, tmp_path: Path) -> None:
    child = ScriptedModel([final(GOOD)])
    parent = ScriptedModel([tool_calls(_task("Where is login?")), final("app/auth.py:4")])
    agent = _agent(_with_main(config, tools=("Task",)), workspace, tmp_path, parent, child, verify=True,
                   children_token_cap=2100)  # fmt: skip
    result = agent.run("Where is login?")
    assert [c.via for c in result.children] == ["task"]  # the verification child was never started
    assert result.verdict == "UNVERIFIED" and result.status == "partial"
    assert "no verification child was started" in result.verifications[0].reasons[0]
    assert result.children_usage.total_tokens <= 2100


def test_verification_counts_against_the_parents_total_budget(
    config: LabConfig, workspace: Path, tmp_path: Path
) -> None:
    verdict = {"verdict": "PASS", "reasons": ["ok"], "findings": [], "evidence": ["app/auth.py:4"]}
    child = ScriptedModel([final(verdict)])
    parent = ScriptedModel([final("app/auth.py:4")])
    lab = _with_main(config, tools=("Read",), total_token_budget=6000, context_token_budget=4000)
    result = _agent(lab, workspace, tmp_path, parent, child, verify=True).run("Where is login?")
    [record] = result.children
    start = read_trace(record.trace_path)[0]
    assert start.budgets["total_token_budget"] <= 6000 - result.usage.total_tokens  # type: ignore[union-attr]
    assert result.usage.total_tokens + record.usage.total_tokens <= 6000


def _launcher(config: LabConfig, workspace: Path, tmp_path: Path, model: ScriptedModel) -> SubagentLauncher:
    return SubagentLauncher(
        config, workspace, model_factory=lambda c, cfg: model, trace_dir=tmp_path / "runs"
    )


def test_parallel_children_overlap_and_share_the_cap(
    config: LabConfig, workspace: Path, tmp_path: Path
) -> None:
    running, peak, lock = [0], [0], threading.Lock()

    def slow(request: ModelRequest) -> ModelResponse:
        with lock:
            running[0] += 1
            peak[0] = max(peak[0], running[0])
        time.sleep(0.3)
        with lock:
            running[0] -= 1
        return final(GOOD)

    requests = [SubagentRequest(task="alpha question"), SubagentRequest(task="beta question")]
    wide = TaskContext(launcher=_launcher(config, workspace, tmp_path, ScriptedModel([slow, slow])))
    results, _ = run_children(wide, requests, parallel=True)
    assert peak[0] == 2 and all(not isinstance(r, str) for r in results)

    peak[0] = 0
    serial = TaskContext(launcher=_launcher(config, workspace, tmp_path, ScriptedModel([slow, slow])))
    results, _ = run_children(serial, requests, parallel=False)
    assert peak[0] == 1 and len(serial.results) == 2

    capped = TaskContext(launcher=_launcher(config, workspace, tmp_path, ScriptedModel([slow, slow])),
                         children_token_cap=3000)  # fmt: skip
    results, _ = run_children(capped, requests, parallel=True)
    refused = [r for r in results if isinstance(r, str)]
    assert len(refused) == 1 and "reserved by sub-agents still running" in refused[0]
    assert capped.children_tokens <= 3000


# --- the grid --------------------------------------------------------------------------------


def test_study_tasks_cover_every_kind_early() -> None:
    tasks = study_tasks("dev", 10)
    assert len(tasks) == 10 and {t.kind for t in tasks} == {
        "locate",
        "trace",
        "enumerate",
        "explain",
        "absent",
    }
    assert study_tasks("dev", 2) == tasks[:2]


def test_the_plan_takes_the_splits_in_turn_with_every_cell_of_a_task_together(tmp_path: Path) -> None:
    from subagent_lab.config.profiles import load_config
    from subagent_lab.experiments.delegation import plan_study

    cells = (Cell(arm="alone"), Cell(arm="forced-delegation"))
    spec = DelegationSpec(tasks_per_split=2, cells=cells, baseline=True)
    runs = plan_study(spec, config_path=None, out=tmp_path, lab=load_config())
    order = [(r.split, r.task.id, r.cell.label) for r in runs]
    dev, test = study_tasks("dev", 2), study_tasks("test", 2)
    expected = [
        (split, task.id, cell.label)
        for pair in zip(dev, test, strict=True)
        for split, task in zip(("dev", "test"), pair, strict=True)
        for cell in cells
    ]
    assert order == expected
    # stopped after any whole task, the rows hold both splits (from the second task on) and every cell
    first_four = {(split, label) for split, _, label in order[:4]}
    assert first_four == {(s, c.label) for s in ("dev", "test") for c in cells}


def test_tables_keep_only_the_tasks_every_cell_ran_on() -> None:
    import pandas as pd

    from subagent_lab.experiments.delegation.table import complete_tasks

    rows = [("dev", "a", "alone"), ("dev", "a", "delegate-light"), ("dev", "b", "alone"),
            ("test", "a", "alone"), ("test", "a", "delegate-light")]  # fmt: skip
    df = pd.DataFrame(rows, columns=["split", "task_id", "cell"])
    kept = complete_tasks(df)
    pairs = sorted(zip(kept["split"], kept["task_id"], strict=True))
    assert pairs == [("dev", "a"), ("dev", "a"), ("test", "a"), ("test", "a")]
    assert complete_tasks(df.iloc[:0]).empty


def test_the_study_runs_on_the_no_model_baseline_and_tabulates(tmp_path: Path) -> None:
    cells = (Cell(arm="alone"), Cell(arm="forced-delegation"))
    spec = DelegationSpec(splits=("dev",), tasks_per_split=1, cells=cells, baseline=True)
    df = run_study(spec, out_dir=tmp_path)
    assert list(df["cell"]) == ["alone", "forced-delegation"] and df["error"].isna().all()
    forced = df.set_index("cell").loc["forced-delegation"]
    assert forced["sub_agents"] == 1 and forced["children_tokens"] > 0
    assert (df["parent_tokens"] + df["children_tokens"] == df["total_tokens"]).all()
    assert set(df["parent_model_served"]) == {"none"}
    table = study_table(df, "dev").set_index("cell")
    diffs = table["quality_diff"].astype(float)
    assert math.isnan(diffs["alone"]) and not math.isnan(diffs["forced-delegation"])
    assert len(study_sentences(df, "dev")) == 1
    again = run_study(spec, out_dir=tmp_path)  # resumed: nothing runs again
    assert sorted(again["run_key"]) == sorted(df["run_key"]) and len(again) == 2


def test_run_parent_takes_the_studys_arms(config: LabConfig, workspace: Path, tmp_path: Path) -> None:
    import subagent_lab as sl

    child = ScriptedModel([final(GOOD)])
    parent = ScriptedModel([final("login: app/auth.py:4-5")])
    result = sl.run_parent("Where is login?", workspace, parent, child_model=child, forced_delegation=True,
                           context_mode="isolated", config=config, runs_dir=tmp_path, tools=[])  # fmt: skip
    assert [c.via for c in result.children] == ["task"] and len(child.requests) == 1
    assert result.answer == "login: app/auth.py:4-5" and parent.requests[0].phase == "final"


def test_the_study_fixes_each_arms_child_model(tmp_path: Path) -> None:
    from subagent_lab.experiments.parent_baseline import ParentBaseline
    from subagent_lab.models.baseline import BaselineModel

    asked: list[str] = []

    def children(choice: str, cfg: object) -> BaselineModel:
        asked.append(choice)
        return BaselineModel()

    cells = (Cell(arm="delegate-light"), Cell(arm="delegate-main"))
    spec = DelegationSpec(splits=("dev",), tasks_per_split=1, cells=cells)  # the configured models' path
    df = run_study(
        spec, out_dir=tmp_path, parent_factory=lambda c, cfg: ParentBaseline(), child_factory=children
    )
    assert df["error"].isna().all()
    assert dict(zip(df["cell"], df["child_model"], strict=True)) == {
        "delegate-light": "light",
        "delegate-main": "main",
    }
    assert sorted(asked) == ["light", "main"] and set(df["parent_model"]) == {"main"}
