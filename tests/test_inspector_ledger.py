"""The run inspector's cost ledger for a parent run, built from the traces of a scripted-model
main agent (two Task children and a verification child): its rows, its total, its HTML."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from conftest import LOGIN_ANSWER, task_call

from subagent_lab.agents.parent import MainAgent
from subagent_lab.agents.result import MainRunResult
from subagent_lab.config.profiles import LabConfig
from subagent_lab.core.trace import RunEnded, read_trace
from subagent_lab.core.types import ModelResponse, Usage
from subagent_lab.models.scripted import ScriptedModel, final, tool_call, tool_calls
from subagent_lab.widgets import RunInspector, is_parent_run, ledger_rows, rolled_up_usage, run_view
from subagent_lab.widgets.render import ledger_html

GOOD = LOGIN_ANSWER
PASS = {"verdict": "PASS", "reasons": ["login is at app/auth.py:4"], "findings": [],
        "evidence": ["app/auth.py:4"]}  # fmt: skip


def _served(payload: Any, model_id: str, prompt: int, completion: int, cached: int) -> ModelResponse:
    response = payload if isinstance(payload, ModelResponse) else final(payload)
    usage = Usage(prompt_tokens=prompt, completion_tokens=completion, cached_tokens=cached)
    return response.model_copy(update={"model_id": model_id, "usage": usage})


_task = task_call


@pytest.fixture
def parent_run(config: LabConfig, workspace: Path, tmp_path: Path) -> MainRunResult:
    """A verified main-agent run: two Task children (a Grep, then an answer), then a verification
    child; every call reports its served model and cached tokens."""
    child = ScriptedModel([
        _served(tool_call("Grep", pattern="login"), "served-a", 310, 17, 200),
        _served(GOOD, "served-a", 402, 61, 290),
        _served(tool_call("Grep", pattern="check_password"), "served-b", 330, 19, 210),
        _served(GOOD, "served-b", 420, 58, 300),
        _served(PASS, "served-v", 510, 33, 120),
    ])  # fmt: skip
    parent = ScriptedModel([
        _served(tool_calls(_task("first")), "served-main", 900, 40, 0),
        _served(tool_calls(_task("second")), "served-main", 1300, 35, 880),
        _served("login: app/auth.py:4", "served-main", 1500, 9, 1290),
    ])  # fmt: skip
    main = config.agents["main"].model_copy(update={"tools": ("Task",)})
    lab = config.model_copy(update={"agents": {**config.agents, "main": main}})
    agent = MainAgent(
        lab,
        workspace,
        model_factory=lambda c, cfg: parent,
        child_model_factory=lambda c, cfg: child,
        scratch_dir=tmp_path,
        verify=True,
    )
    result = agent.run("Where is login?")
    assert [c.via for c in result.children] == ["task", "task", "verification"]
    return result


def test_the_ledger_has_a_row_per_run_and_a_total_equal_to_the_roll_up(parent_run: MainRunResult) -> None:
    view = run_view(parent_run.trace_path)
    rows = ledger_rows(view)
    assert [r.role for r in rows] == ["parent", "task", "task", "verification", "total"]
    parent, *children, total = rows
    assert parent.run_id == parent_run.run_id and parent.usage == parent_run.usage
    assert [r.run_id for r in children] == [c.run_id for c in parent_run.children]
    assert [r.usage for r in children] == [c.usage for c in parent_run.children]
    assert [r.calls for r in rows] == [3, 2, 2, 1, 8]
    assert [r.served for r in rows] == [
        "served-main", "served-a", "served-b", "served-v", "served-main,served-a,served-b,served-v"
    ]  # fmt: skip
    assert parent.usage.cached_tokens == 2170 and [r.usage.cached_tokens for r in children] == [490, 510, 120]
    # The total is the parent's rolled-up usage, as the result and as the parent's trace have it.
    assert total.usage == parent_run.total_usage == rolled_up_usage(view)
    for row in children:
        end = read_trace(row.trace_path)[-1]
        assert isinstance(end, RunEnded) and row.wall_s == end.elapsed_s
    assert total.wall_s == parent.wall_s == view.end.elapsed_s > 0  # type: ignore[union-attr]


def test_the_inspector_shows_the_ledger_of_a_parent_run_only(parent_run: MainRunResult) -> None:
    inspector = RunInspector(parent_run.trace_path)
    assert inspector.ledger == ledger_rows(inspector.run) and inspector.ledger_view in inspector.children
    html = inspector.ledger_view.value
    assert html.count("sl-ledger-row") == 4 and html.count("sl-ledger-total") == 1
    total = parent_run.total_usage
    for figure in (total.prompt_tokens, total.completion_tokens, total.cached_tokens):
        assert f"{figure:,}" in html
    assert "served-v" in html and "sl-ledger-mismatch" not in html

    child = RunInspector(parent_run.children[0].trace_path)
    assert not is_parent_run(child.run) and child.ledger == []
    assert child.ledger_view not in child.children


def test_a_missing_child_trace_leaves_its_row_empty_and_is_flagged(parent_run: MainRunResult) -> None:
    missing = parent_run.children[1]
    Path(missing.trace_path).unlink()
    view = run_view(parent_run.trace_path)
    rows = ledger_rows(view)
    assert rows[2].run_id == missing.run_id and rows[2].calls == 0 and rows[2].usage == Usage()
    assert rows[-1].usage.total_tokens == parent_run.total_usage.total_tokens - missing.usage.total_tokens
    html = ledger_html(rows, rolled_up_usage(view))
    assert "sl-ledger-mismatch" in html and f"{parent_run.total_usage.total_tokens:,}" in html
    assert ledger_html([], None) == ""
