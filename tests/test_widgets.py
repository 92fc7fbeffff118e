"""The inspectors, built from real (scripted-model) traces and sweep results: their state, not pixels."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import matplotlib
import pandas as pd
import pytest
from conftest import LauncherFactory, copy_profiles

from subagent_lab.agents.launcher import ParentLink, SubagentRequest, SubagentResult
from subagent_lab.bench.suite import load_suite
from subagent_lab.core.trace import (
    ModelCalled,
    RunStarted,
    ToolFinished,
    ToolStarted,
    TraceWriter,
    read_trace,
)
from subagent_lab.core.types import Message, Usage
from subagent_lab.experiments.sweep import SweepSpec, Variant, load_results, run_sweep, sweep_dir
from subagent_lab.models.scripted import ScriptedFactory, final, tool_call
from subagent_lab.widgets import (
    RunInspector,
    SweepExplorer,
    child_traces,
    cited_lines,
    evidence_records,
    filter_runs,
    pick_trace,
    plot_run_tokens,
    run_view,
    side_by_side,
    step_records,
)
from subagent_lab.widgets.render import contract_html, header_html, step_html

matplotlib.use("Agg")

ANSWER = {
    "status": "completed",
    "summary": "login is defined in app/auth.py and checks the password hash.",
    "findings": ["login calls check_password"],
    "evidence": ["app/auth.py:4-5", "app/missing.py:3", "app/auth.py:999"],
    "unresolved_questions": [],
}
BUDGETS = {"context_token_budget": 9000, "total_token_budget": 21000}


@pytest.fixture
def run(make_launcher: LauncherFactory, workspace: Path) -> SubagentResult:
    """A finished run: a Grep, a denied Edit, a long Read, then an answer with mixed evidence."""
    (workspace / "app" / "big.py").write_text(
        "".join(f"value_{i} = {i}  # filler line\n" for i in range(200))
    )
    launcher, _ = make_launcher(
        [
            tool_call("Grep", pattern="def login"),
            tool_call("Edit", path="app/auth.py", old="a", new="b"),
            tool_call("Read", path="app/big.py"),
            final(ANSWER),
        ]
    )
    return launcher.launch(SubagentRequest(task="Where is login implemented?", overrides=BUDGETS))


def test_step_records_fold_the_trace(run: SubagentResult) -> None:
    steps = step_records(read_trace(run.trace_path))
    assert [s.purpose for s in steps] == ["step"] * 4
    assert [[t.tool for t in s.tools] for s in steps] == [["Grep"], ["Edit"], ["Read"], []]
    assert [t.status for s in steps for t in s.tools] == ["ok", "denied", "ok"]
    assert steps[1].denied_count == 1 and steps[0].denied_count == 0
    assert steps[0].tools[0].arguments == {"pattern": "def login"}
    cumulative = [s.cumulative_tokens for s in steps]
    assert cumulative == sorted(cumulative) and cumulative[-1] == run.usage.total_tokens
    assert all(s.budget is not None and s.budget.allowed for s in steps)
    assert steps[-1].contract is not None and steps[-1].contract.valid


def test_step_html_marks_denials_budgets_and_truncation(run: SubagentResult) -> None:
    view = run_view(run.trace_path)
    assert view.context_budget == 9000 and view.total_budget == 21000
    first, denied, read = (step_html(s, view) for s in view.steps[:3])
    assert "Where is login implemented?" in first  # the task message opens the run
    assert "/ 9,000 tokens" in first and "/ 21,000 tokens" in first
    assert f"{view.steps[0].prompt_tokens:,} / 9,000 tokens" in first
    assert "sl-denied" in denied and "DENIED" in denied and "sl-denied" not in first
    assert "more characters" in read and "value_150" not in read
    expanded = step_html(view.steps[2], view, expand=True)
    assert "value_150" in expanded and "more characters" not in expanded
    assert "completed" in header_html(view) and f"{run.usage.total_tokens:,}" in header_html(view)


def test_evidence_is_grounded_against_the_recorded_workspace(run: SubagentResult, workspace: Path) -> None:
    view = run_view(run.trace_path)
    records = evidence_records(view)
    assert [(r.item, r.grounded) for r in records] == [
        ("app/auth.py:4-5", True),
        ("app/missing.py:3", False),
        ("app/auth.py:999", False),
    ]
    assert records[1].reason == "no such file" and records[2].reason == "line beyond end of file"
    lines = cited_lines(workspace, records[0])
    assert [(n, cited) for n, _, cited in lines if cited] == [(4, True), (5, True)]
    assert any("def login" in text for _, text, _ in lines)
    assert cited_lines(workspace, records[1]) == []
    html = contract_html(view, records)
    assert html.count("sl-grounded") == 1 and html.count("sl-ungrounded") == 2


def test_run_inspector_navigates_and_shows_citations(run: SubagentResult) -> None:
    inspector = RunInspector(run.trace_path, title="scripted")
    assert inspector.slider.max == 3 and inspector.slider.value == 0
    assert "sl-denied" not in inspector.step_view.value
    inspector.next_button.click()
    assert inspector.slider.value == 1 and "sl-denied" in inspector.step_view.value
    inspector.slider.value = 2
    assert "more characters" in inspector.step_view.value
    inspector.expand.value = True
    assert "value_150" in inspector.step_view.value
    inspector.slider.value = 3
    inspector.next_button.click()  # clamped at the last step
    assert inspector.slider.value == 3
    assert [b.button_style for b in inspector.evidence_buttons] == ["success", "danger", "danger"]
    inspector.evidence_buttons[0].click()
    assert "def login" in inspector.citation.value
    inspector.evidence_buttons[1].click()
    assert "not grounded" in inspector.citation.value and "no such file" in inspector.citation.value
    assert "login is defined in app/auth.py" in inspector.contract_view.value


def test_a_forked_child_shows_the_parent_messages_it_started_from(make_launcher: LauncherFactory) -> None:
    launcher, _ = make_launcher([final(ANSWER), final(ANSWER)])
    prior = [
        Message(role="user", content="Where is login?"),
        Message(role="assistant", content="Looking <now>."),
    ]
    forked = run_view(launcher.launch(SubagentRequest(task="Find login", prior_messages=prior)).trace_path)
    first = step_html(forked.steps[0], forked)
    assert "sl-forked" in first and "2 messages of the parent" in first
    assert first.index("Where is login?") < first.index("Looking &lt;now&gt;.") < first.index("Find login")
    plain = run_view(launcher.launch(SubagentRequest(task="Find login")).trace_path)
    assert "sl-forked" not in step_html(plain.steps[0], plain)


def test_limits_refusals_and_grace_turns_are_visible(make_launcher: LauncherFactory) -> None:
    turns = [tool_call("Glob", _id=f"g{i}", pattern=f"**/*{i}.py") for i in range(2)]
    launcher, _ = make_launcher([*turns, final(ANSWER)])
    graced = run_view(
        launcher.launch(SubagentRequest(task="Find login", overrides={"max_steps": 2})).trace_path
    )
    assert graced.terminal_reason == "max_steps"
    assert graced.steps[-1].purpose == "grace" and graced.steps[-1].prompts[0][0] == "grace"
    assert "harness prompt" in step_html(graced.steps[-1], graced, expand=False)

    reads = [tool_call("Read", _id=f"r{i}", path="app/auth.py", start=1 + i) for i in range(20)]
    launcher, _ = make_launcher([*reads, final(ANSWER)])
    budget = {"total_token_budget": 3000, "context_token_budget": 2500, "grace_turn": False}
    result = launcher.launch(SubagentRequest(task="Find login", overrides=budget))
    view = run_view(result.trace_path)
    assert view.terminal_reason == "token_budget"
    assert view.steps[-1].purpose == "refused" and not view.steps[-1].ok
    assert "refused" in step_html(view.steps[-1], view) and "token_budget" in header_html(view)
    assert all(s.cumulative_tokens <= 3000 for s in view.steps)


def test_plot_run_tokens_draws_cumulative_tokens_and_budgets(run: SubagentResult) -> None:
    view = run_view(run.trace_path)
    ax = plot_run_tokens(view)
    lines = {line.get_label(): line for line in ax.get_lines()}
    assert list(lines["cumulative tokens"].get_ydata()) == [s.cumulative_tokens for s in view.steps]
    assert list(lines["total budget"].get_ydata()) == [21000, 21000]
    assert list(lines["context budget"].get_ydata()) == [9000, 9000]


def test_parent_trace_links_and_opens_its_sub_agents(
    make_launcher: LauncherFactory, workspace: Path, tmp_path: Path
) -> None:
    parent_path = tmp_path / "parent.jsonl"
    parent = TraceWriter(parent_path, "run-parent")
    common = {"run_id": "run-parent", "session_id": "s-parent"}
    parent.emit(
        RunStarted(
            **common,
            profile="main",
            model_choice="main",
            model_used="main",
            model_id="m",
            endpoint="e",
            workspace=str(workspace),
            system_prompt="sys",
            task="delegate it",
        )
    )
    parent.emit(
        ModelCalled(
            run_id="run-parent",
            purpose="step",
            prompt_tokens_est=10,
            max_tokens=10,
            usage=Usage(prompt_tokens=10, completion_tokens=5),
            latency_s=0.1,
            finish_reason="stop",
        )
    )
    parent.emit(
        ToolStarted(run_id="run-parent", step=1, call_id="t1", tool="Task", arguments={"prompt": "x"})
    )
    launcher, _ = make_launcher(
        [tool_call("Grep", pattern="def login"), final(ANSWER)],
        parent=ParentLink(session_id="s-parent", run_id="run-parent", trace_path=str(parent_path)),
        parent_trace=parent,
    )
    child = launcher.launch(SubagentRequest(task="Where is login implemented?"))
    parent.emit(
        ToolFinished(run_id="run-parent", step=1, call_id="t1", tool="Task", status="ok", text="done")
    )
    parent.close()
    view = run_view(parent_path)
    ((label, path),) = child_traces(view)
    assert path == child.trace_path and "explore" in label and "completed" in label
    assert "sub-agent completed" in step_html(view.steps[0], view)
    inspector = RunInspector(parent_path)
    inspector.children_select.value = child.trace_path
    (nested,) = inspector.children_box.children
    assert isinstance(nested, RunInspector) and nested.run.trace_path == child.trace_path
    assert [r.grounded for r in nested.evidence] == [True, False, False]


# --- sweeps -----------------------------------------------------------------------------------

TASK = next(t for t in load_suite() if t.id == "yaml-safe-load")


@pytest.fixture
def sweep_df(tmp_path: Path) -> pd.DataFrame:
    """A light-vs-main sweep in which light never produces valid JSON and main answers well."""
    config = copy_profiles(tmp_path / "profiles.yaml", tmp_path / "runs")
    # Main cites the gold unit's header line, which the harness's Find showed (seen): its keywords
    # alone no longer carry it, since the harness's listing names SafeLoader too (issue 49's search).
    gold = [f"{g.path}:{g.start}" for g in TASK.gold]
    good = {**ANSWER, "summary": "safe_load uses SafeLoader", "evidence": gold}
    factory = ScriptedFactory(
        {
            "light": [tool_call("Glob", pattern="*.py"), final("nope"), final("still not json"), final("{")],
            "main": [tool_call("Grep", pattern="def safe_load"), final(good)],
        }
    )
    spec = SweepSpec(
        name="w",
        tasks=(TASK.id,),
        models=("light", "main"),
        variants=(Variant(label="s4", overrides={"max_steps": 4}), Variant()),
    )
    run_sweep(
        spec,
        config_path=str(config),
        out_dir=tmp_path / "sw",
        model_factory=factory,
        progress=False,
        cache=False,
    )
    # What a fresh kernel sees: the persisted results, not the in-memory return value.
    return load_results(sweep_dir(spec, tmp_path / "sw"))


def test_filter_runs_selects_and_sorts(sweep_df: pd.DataFrame) -> None:
    assert len(sweep_df) == 4
    main = filter_runs(sweep_df, {"model_used": ["main"], "task_id": []})
    assert set(main["model_used"]) == {"main"} and len(main) == 2
    ordered = filter_runs(sweep_df, {}, sort_by="total_tokens", ascending=False)
    assert list(ordered["total_tokens"]) == sorted(sweep_df["total_tokens"], reverse=True)


def test_sweep_explorer_filters_and_opens_runs(sweep_df: pd.DataFrame) -> None:
    explorer = SweepExplorer(sweep_df)
    assert set(explorer.filters) >= {"model_used", "profile", "terminal_reason", "task_id"}
    assert "4 of 4 runs" in explorer.count.value
    assert all(key in explorer.table.value for key in sweep_df["run_key"])
    explorer.filters["terminal_reason"].value = ("invalid_output",)
    assert set(explorer.filtered()["model_used"]) == {"light"}
    assert "2 of 4 runs" in explorer.count.value and "yaml-safe-load|main" not in explorer.table.value
    explorer.filters["terminal_reason"].value = ()
    explorer.sort_by.value = "quality"
    explorer.ascending.value = False
    assert explorer.filtered()["model_used"].iloc[0] == "main"
    index = explorer.run_select.options[1][1]
    explorer.run_select.value = index
    (inspector,) = explorer.inspector_box.children
    assert isinstance(inspector, RunInspector)
    assert inspector.run.trace_path == sweep_df.loc[index, "trace_path"]
    assert [r.grounded for r in inspector.evidence] == [True] * len(TASK.gold)
    explorer.filters["model_used"].value = ("light",)  # the open run is filtered away: close it
    assert explorer.run_select.value == -1 and explorer.inspector_box.children == ()


def test_sweep_explorer_reports_a_run_without_trace(sweep_df: pd.DataFrame) -> None:
    crashed = {
        "run_key": "x|light|default|0",
        "task_id": "x",
        "model_used": None,
        "model_choice": "light",
        "terminal_reason": "crashed",
        "status": "failed",
        "error": "Traceback: boom",
        "trace_path": None,
    }
    explorer = SweepExplorer(pd.concat([sweep_df, pd.DataFrame([crashed])], ignore_index=True))
    explorer.run_select.value = len(sweep_df)
    (message,) = explorer.inspector_box.children
    assert "no trace" in message.value and "boom" in message.value


def test_side_by_side_shows_two_inspectors(sweep_df: pd.DataFrame) -> None:
    light, main = pick_trace(sweep_df, TASK.id, "light"), pick_trace(sweep_df, TASK.id, "main", "default")
    box = side_by_side(light, main, labels=["light", "main"])
    left, right = box.children
    assert isinstance(left, RunInspector) and isinstance(right, RunInspector)
    assert "light" in left.title.value and right.run.terminal_reason == "completed"
    assert left.run.terminal_reason == "invalid_output"
    with pytest.raises(LookupError):
        pick_trace(sweep_df, TASK.id, "nonexistent")


def test_core_package_does_not_import_widgets() -> None:
    code = (
        "import sys, subagent_lab.experiments.sweep, subagent_lab.analysis.summary;"
        "import subagent_lab.analysis.metrics;"
        "assert 'ipywidgets' not in sys.modules and 'subagent_lab.widgets' not in sys.modules"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
