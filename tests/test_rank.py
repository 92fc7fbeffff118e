"""The scoring policy (issue 49, item 3): the model judges each candidate with a one-token yes/no,
P(yes) read from the endpoint's logprobs (or the generated word where it returns none), fused with
the retrieval's rank; ``rank`` cites the fused best, ``rank-explore`` explores from them.

Scripted models and the fake endpoint (``benchmarks/fake_endpoint.py``); no real model."""

from __future__ import annotations

import math
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import REPO, SHOP_FILES, SHOP_TASK, write_files

from subagent_lab.agents.launcher import SubagentLauncher, SubagentRequest, SubagentResult
from subagent_lab.config.profiles import LabConfig, load_config
from subagent_lab.core.judge import TOP_LOGPROBS, fused_score, p_yes
from subagent_lab.core.trace import CandidateJudged, ModelCalled, ToolStarted, read_trace
from subagent_lab.core.types import ModelRequest, ModelResponse, request_digest
from subagent_lab.models.baseline import BaselineModel
from subagent_lab.models.openai_chat import OpenAIChatModel
from subagent_lab.models.scripted import ScriptedModel, final, tool_call
from subagent_lab.scaffold.rank_judge import judge_messages, unit_view
from subagent_lab.tools.symbols.index import index_for
from subagent_lab.tools.symbols.retrieve import retrieve
from subagent_lab.workspace.sandbox import Workspace

sys.path.insert(0, str(REPO / "benchmarks"))
from fake_endpoint import FakeEndpoint

PICKED = "login_view"
"""The unit the scripted judge says yes to (and no to every other)."""


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return write_files(tmp_path / "shop", SHOP_FILES)


def _judge_turn(request: ModelRequest) -> ModelResponse:
    """A judgment: P(yes) 0.9 for the candidate ``PICKED``, 0.1 for any other, as logprobs."""
    p = 0.9 if f"function {PICKED}" in str(request.messages[-1].content) else 0.1
    top = {"Yes": math.log(p * 0.8), " yes": math.log(p * 0.2), "No": math.log(1 - p)}
    return ModelResponse(text="Yes" if p > 0.5 else "No", top_logprobs=top)


def _launch(config: LabConfig, root: Path, model: Any, preset: str, **over: Any) -> SubagentResult:
    fields = {**config.scaffold(preset).resolved(), **over}
    launcher = SubagentLauncher(
        config, root, model_factory=lambda c, cfg: model, trace_dir=root.parent / "runs"
    )
    return launcher.launch(SubagentRequest(task=SHOP_TASK, overrides=fields))


def test_p_yes_reads_the_yes_mass_of_the_first_token_else_the_generated_word() -> None:
    top = {"Yes": math.log(0.6), " yes": math.log(0.1), "No": math.log(0.2), "The": math.log(0.1)}
    p, source = p_yes(top, "Yes")
    assert source == "logprobs" and p == pytest.approx(0.7 / 0.9)
    assert p_yes({"The": -0.1, "A": -2.0}, "no") == (0.0, "generated")  # neither answer among them
    assert p_yes(None, "Yes.") == (1.0, "generated")
    assert p_yes(None, "maybe") == (0.5, "generated")
    assert fused_score(1.0, 4, 0.5) == pytest.approx(0.625) and fused_score(0.0, 1, 0.5) == 0.5


def test_the_adapter_asks_for_logprobs_and_reads_them_and_says_when_there_are_none() -> None:
    view = "app/views.py:4-7 function login_view\ndef login_view(request):\n    user = request.user"
    messages = judge_messages("the login view user request", view)
    request = ModelRequest(messages=messages, phase="final", max_tokens=1, top_logprobs=TOP_LOGPROBS)
    with FakeEndpoint(max_requests=10, max_seconds=60) as fake:
        response = OpenAIChatModel(base_url=fake.url, model="m", max_retries=0).complete(request)
    assert response.top_logprobs is not None and set(response.top_logprobs) == {"yes", "no"}
    p, source = p_yes(response.top_logprobs, response.text)
    assert source == "logprobs" and 0.5 < p < 1.0  # four of the request's five words are in the code
    with FakeEndpoint(max_requests=10, max_seconds=60, logprobs=False) as fake:
        bare = OpenAIChatModel(base_url=fake.url, model="m", max_retries=0).complete(request)
    assert bare.top_logprobs is None and p_yes(bare.top_logprobs, bare.text) == (1.0, "generated")
    # A request that asks for none is the request it was before the field existed.
    plain = request.model_copy(update={"top_logprobs": 0})
    assert request_digest(plain) != request_digest(request)
    assert "top_logprobs" not in OpenAIChatModel(base_url="http://127.0.0.1:9/v1", model="m").wire(plain).body


def test_a_candidate_view_is_compact_and_the_request_comes_first(root: Path) -> None:
    units = retrieve(SHOP_TASK, index_for(Workspace(root)), 10, shown=10)
    view = unit_view(root, units[0], cap=30)
    assert view.startswith(f"{units[0].label} function check_password\ndef check_password(user, password)")
    assert len(view) <= 30 * 4 + 40
    first, second = judge_messages("R", "one"), judge_messages("R", "two")
    assert first[0] == second[0] and str(first[1].content).startswith("Change request: R\n\nCode:\n")


def test_rank_cites_the_fused_best_without_an_action_call_and_traces_each_score(
    config: LabConfig, root: Path
) -> None:
    pool = retrieve(SHOP_TASK, index_for(Workspace(root)), 10, shown=10)
    assert [u.unit.name for u in pool].index(PICKED) >= 2  # the retrieval alone ranks it low
    model = ScriptedModel([_judge_turn] * len(pool))
    result = _launch(config, root, model, "rank")
    assert result.status == "completed", result.detail
    picked = next(u for u in pool if u.unit.name == PICKED)
    assert result.contract is not None and result.contract["evidence"][0] == picked.item
    assert result.contract["evidence"][1:] == [u.item for u in pool if u is not picked][:3]
    assert result.candidate_scores == {u.item: pytest.approx(0.9 if u is picked else 0.1) for u in pool}
    events = read_trace(result.trace_path)
    judged = [e for e in events if isinstance(e, CandidateJudged)]
    assert [(e.item, e.rank, e.source) for e in judged] == [
        (u.item, n, "logprobs") for n, u in enumerate(pool, 1)
    ]
    calls = [e for e in events if isinstance(e, ModelCalled)]
    assert {e.purpose for e in calls} == {"score"} and len(calls) == len(pool)  # no action, no answer call
    assert all(r.max_tokens == 1 and r.top_logprobs == TOP_LOGPROBS for r in model.requests)
    assert all(e.top_logprobs and "Yes" in e.top_logprobs for e in calls)  # kept for a replay
    assert result.usage.total_tokens == sum(e.usage.total_tokens for e in calls) > 0  # charged like any
    # The request leads every judged prompt; the conversation never holds them.
    assert all(
        "Where is the password checked" in str(r.messages[-1].content).split("Code:")[0]
        for r in model.requests
    )


def test_a_pick_search_did_not_list_is_looked_up_so_the_answer_cites_what_was_shown(
    config: LabConfig, root: Path
) -> None:
    # Eight units that say the task's words more often than the view: it falls past Search's eight.
    more = "".join(
        f"def password_check_{n}(user, password):\n"
        f'    """Check the password when a user logs in: password checked, user logs in."""\n'
        f"    return check_password(user, password)\n\n\n"
        for n in range(8)
    )
    (root / "app" / "more.py").write_text(more)
    pool = retrieve(SHOP_TASK, index_for(Workspace(root)), 10, shown=10)
    assert PICKED not in [u.unit.name for u in pool[:8]] and PICKED in [u.unit.name for u in pool]
    picked = next(u for u in pool if u.unit.name == PICKED)
    result = _launch(config, root, ScriptedModel([_judge_turn] * len(pool)), "rank")
    assert result.status == "completed", result.detail
    assert result.contract is not None and picked.item in result.contract["evidence"]
    finds = [
        e.arguments for e in read_trace(result.trace_path) if isinstance(e, ToolStarted) and e.tool == "Find"
    ]
    assert finds == [{"name": "check_password"}, {"name": "app.views.login_view"}]
    assert result.seen_ratio == 1.0  # every cited header line was shown by a tool


def test_the_no_model_floor_under_rank_is_the_retrievals_own_order(config: LabConfig, root: Path) -> None:
    pool = retrieve(SHOP_TASK, index_for(Workspace(root)), 4)
    result = _launch(config, root, BaselineModel(), "rank")
    assert result.status == "completed", result.detail
    assert result.contract is not None and result.contract["evidence"] == [u.item for u in pool]
    judged = [e for e in read_trace(result.trace_path) if isinstance(e, CandidateJudged)]
    assert judged and all(e.source == "generated" and e.p_yes == 0.5 for e in judged)


def test_rank_explore_judges_then_the_model_explores_from_the_fused_candidates(
    config: LabConfig, root: Path
) -> None:
    pool = retrieve(SHOP_TASK, index_for(Workspace(root)), 10, shown=10)
    picked = next(u for u in pool if u.unit.name == PICKED)
    answer = {"status": "completed", "summary": "the view", "findings": [], "evidence": [picked.item]}
    turns = [*([_judge_turn] * len(pool)), tool_call("finish"), final({"found": "yes"}), final(answer)]
    model = ScriptedModel(turns)
    result = _launch(config, root, model, "rank-explore")
    assert result.status == "completed", result.detail
    assert result.retrieval[0] == picked.item  # the fused order leads the candidates
    purposes = [e.purpose for e in read_trace(result.trace_path) if isinstance(e, ModelCalled)]
    assert purposes[: len(pool)] == ["score"] * len(pool) and "step" in purposes[len(pool) :]


def test_the_presets_are_retrieval_start_with_rank_start_in_its_place_and_its_hash_kept() -> None:
    config = load_config(REPO / "profiles.yaml", env={})
    base = config.scaffold("retrieval-start").scaffold
    assert not any(p.policy == "RankStart" for p in base.policies)  # the shipped preset's hash is kept
    for name, answer in (("rank", True), ("rank-explore", False)):
        spec = {p.policy: p.params for p in config.scaffold(name).scaffold.policies}
        assert "RetrievalStart" not in spec
        assert spec["RankStart"]["pool"] == 10 and spec["RankStart"]["answer"] is answer
        assert ("AbsenceCheck" in spec) is (not answer)
        assert {p.policy for p in base.policies} - {"AbsenceCheck", "RetrievalStart"} <= set(spec)


# --- candidate recall@K: the pool's ceiling, in rows and tables --------------------------------


def test_pool_recall_is_a_gold_function_anywhere_in_the_pool(root: Path) -> None:
    from subagent_lab.bench.pool import pool_recall
    from subagent_lab.bench.task import BenchTask, GoldSpan

    gold = GoldSpan(path="app/views.py", start=6, end=7)  # lines inside login_view
    task = BenchTask(id="t", prompt=SHOP_TASK, workspace={"dir": str(root)}, gold=(gold,))
    assert pool_recall(task, root, ["app/auth.py:3", "app/views.py:4"]) == 1.0  # its header line
    assert pool_recall(task, root, ["app/auth.py:3", "app/auth.py:14"]) == 0.0  # other units only
    assert pool_recall(task, root, []) is None and pool_recall(task, root, ["no colon"]) is None
    assert pool_recall(task.model_copy(update={"gold": ()}), root, ["app/views.py:4"]) is None


def test_lift_table_reports_each_arms_candidate_recall_beside_its_mean() -> None:
    import pandas as pd

    from subagent_lab.analysis.headline import lift_table, readable_lift

    rows = [
        {"task_id": f"t{i}", "model_choice": arm, "quality": q, "candidate_recall": pool}
        for arm, qs, pools in (
            ("retrieval", [0.5, 0.0, 1.0, 0.0], [1.0, 0.0, 1.0, 1.0]),
            ("main", [1.0, 0.0, 1.0, 0.5], [1.0, 0.0, 1.0, 0.0]),
            ("none", [0.0, 0.0, 0.0, 0.0], [None, None, None, None]),
        )
        for i, (q, pool) in enumerate(zip(qs, pools, strict=True))
    ]
    table = lift_table(pd.DataFrame(rows)).set_index("model_choice")
    assert table.loc["retrieval", "candidate_recall"] == pytest.approx(0.75)
    assert table.loc["main", "candidate_recall"] == pytest.approx(0.5)
    assert math.isnan(table.loc["none", "candidate_recall"])  # no pool: no ceiling
    shown = readable_lift(table.reset_index()).set_index("model")
    assert shown.loc["retrieval", "candidate recall@K"] == "0.75"
    assert shown.loc["none", "candidate recall@K"] == ""


def test_the_inspector_shows_each_judged_candidates_score(config: LabConfig, root: Path) -> None:
    from subagent_lab.widgets.records import run_view

    pool = retrieve(SHOP_TASK, index_for(Workspace(root)), 10, shown=10)
    result = _launch(config, root, ScriptedModel([_judge_turn] * len(pool)), "rank")
    steps = [s for s in run_view(result.trace_path).steps if s.purpose == "score"]
    assert len(steps) == len(pool)
    assert all(
        f"for {u.item} (rank {n}, logprobs)" in s.text
        for n, (s, u) in enumerate(zip(steps, pool, strict=True), 1)
    )


def test_a_sweep_row_carries_candidate_recall_and_how_the_candidates_were_judged(root: Path) -> None:
    from subagent_lab.bench.task import BenchTask, GoldSpan
    from subagent_lab.experiments.execute import execute_run
    from subagent_lab.experiments.spec import RunSpec, Variant

    lab = load_config(REPO / "profiles.yaml", env={})
    task = BenchTask(
        id="t",
        prompt=SHOP_TASK,
        workspace={"dir": str(root)},
        gold=(GoldSpan(path="app/views.py", start=6, end=7),),
    )
    run = RunSpec(
        run_key="t|none|rank", task=task, model="none", profile="explore", variant=Variant(), suite="s",
        scaffold="rank", scaffold_fields=lab.scaffold("rank").resolved(), repeat=0, config_path=None,
        trace_dir=str(root.parent / "traces"), cache_dir=None,
    )  # fmt: skip
    row = execute_run(run)
    pool = retrieve(SHOP_TASK, index_for(Workspace(root)), 10, shown=10)
    assert row["terminal_reason"] == "completed", row.get("detail")
    assert row["pool_size"] == len(pool) and row["candidate_recall"] == 1.0  # login_view is in the pool
    # The no-model policy returns no logprobs: every judgment is the generated word's, and says so.
    assert row["judged"] == len(pool) and row["judged_generated"] == len(pool)


def test_a_pool_smaller_than_k_keeps_the_unjudged_units_in_retrieval_order(
    config: LabConfig, root: Path
) -> None:
    pool = retrieve(SHOP_TASK, index_for(Workspace(root)), 4)
    fields = config.scaffold("rank").resolved()
    for spec in fields["scaffold"]["policies"]:
        if spec["policy"] == "RankStart":
            spec["params"]["pool"] = 2
    model = ScriptedModel(
        [lambda r: ModelResponse(text="No", top_logprobs={"No": -0.01, "Yes": -5.0}), _judge_turn]
    )
    launcher = SubagentLauncher(
        config, root, model_factory=lambda c, cfg: model, trace_dir=root.parent / "runs"
    )
    result = launcher.launch(SubagentRequest(task=SHOP_TASK, overrides=fields))
    assert result.status == "completed", result.detail
    # The two judged units in their fused order, then units 3 and 4 as retrieved.
    assert result.contract is not None and result.contract["evidence"][2:] == [u.item for u in pool[2:4]]
    assert sorted(result.contract["evidence"][:2]) == sorted(u.item for u in pool[:2])
    assert len(result.candidate_scores) == 2
