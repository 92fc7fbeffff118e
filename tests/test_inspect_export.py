"""Runs as an Inspect ``.eval`` log: written by inspect_ai's own writer, read back with its
``read_eval_log``; one sample per run, each run (and each child) an agent span with its tokens."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from conftest import LOGIN_ANSWER, LauncherFactory, task_call

from subagent_lab.agents.launcher import SubagentRequest, SubagentResult
from subagent_lab.agents.parent import MainAgent
from subagent_lab.api import inspect_export
from subagent_lab.api.views import bench_task
from subagent_lab.config.profiles import LabConfig
from subagent_lab.models.scripted import ScriptedModel, final, tool_call, tool_calls

inspect_log = pytest.importorskip(
    "inspect_ai.log", reason="inspect_ai (the 'inspect' extra) is not installed"
)


def _child(make_launcher: LauncherFactory, task: str = "Where is login implemented?") -> SubagentResult:
    script = [
        tool_call("Grep", pattern="def login"),
        tool_call("Read", path="app/auth.py"),
        final(LOGIN_ANSWER),
    ]
    launcher, _ = make_launcher(script)
    return launcher.launch(SubagentRequest(task=task))


def _spans(sample: Any) -> list[Any]:
    return [e for e in sample.events if e.event == "span_begin"]


def test_a_run_round_trips_through_read_eval_log(make_launcher: LauncherFactory, tmp_path: Path) -> None:
    import subagent_lab as sl

    result = _child(make_launcher)
    path = sl.to_inspect([result], tmp_path / "logs" / "child.eval")
    log = inspect_log.read_eval_log(str(path))
    assert log.status == "success" and log.eval.task == "subagent_lab" and len(log.samples) == 1
    sample = log.samples[0]
    assert sample.input == "Where is login implemented?" and sample.target == ""
    assert sample.scores["contract_valid"].value == 1.0
    assert (
        sample.metadata["model_id"] == result.model_id and sample.metadata["terminal_reason"] == "completed"
    )
    assert sample.output.completion == LOGIN_ANSWER["summary"]
    (span,) = _spans(sample)
    assert span.type == "agent" and span.id == result.run_id and span.parent_id is None
    assert span.metadata["total_tokens"] == result.usage.total_tokens
    models = [e for e in sample.events if e.event == "model"]
    tools = [e for e in sample.events if e.event == "tool"]
    assert len(models) == result.model_calls and all(e.span_id == span.id for e in models)
    assert [t.function for t in tools] == ["Grep", "Read"] and tools[1].arguments == {"path": "app/auth.py"}
    assert "def login" in str(tools[0].result)
    assert sum(e.output.usage.total_tokens for e in models) == result.usage.total_tokens
    (usage,) = sample.model_usage.values()
    assert usage.input_tokens == result.usage.prompt_tokens
    assert log.results.scores[0].name == "contract_valid"


def test_each_child_is_its_own_span_inside_its_parent(
    config: LabConfig, workspace: Path, tmp_path: Path
) -> None:
    parent = ScriptedModel([tool_calls(task_call("where is login?")), final("login is in app/auth.py:4")])
    light = ScriptedModel([tool_call("Grep", pattern="def login"), final(LOGIN_ANSWER)])
    agent = MainAgent(
        config, workspace, model_factory=lambda c, cfg: parent if c == "main" else light, scratch_dir=tmp_path
    )
    result = agent.run("Where is login?")
    path = inspect_export.to_inspect(Path(result.trace_path).parent, tmp_path / "parent.eval")
    (sample,) = inspect_log.read_eval_log(str(path)).samples  # the child's trace is no sample of its own
    outer, inner = _spans(sample)
    assert (outer.id, inner.id) == (result.run_id, result.children[0].run_id)
    assert inner.parent_id == outer.id and inner.type == "agent" and inner.name.startswith("explore")
    assert inner.metadata["total_tokens"] == result.children[0].usage.total_tokens
    assert outer.metadata["total_tokens"] == result.usage.total_tokens  # the parent's own
    in_child = [e for e in sample.events if e.event == "model" and e.span_id == inner.id]
    assert len(in_child) == 2
    total = sum(u.total_tokens for u in sample.model_usage.values())
    assert total == result.total_usage.total_tokens  # parent and child together
    # Inspect's own timeline (what its viewer draws) finds the child inside the parent, with its tokens.
    from inspect_ai.event import timeline_build

    root = timeline_build(sample.events).root
    (parent_span,) = [c for c in root.content if getattr(c, "span_type", None) == "agent"]
    (child_span,) = [c for c in parent_span.content if getattr(c, "span_type", None) == "agent"]
    assert child_span.total_tokens() == result.children[0].usage.total_tokens
    assert parent_span.total_tokens() == result.total_usage.total_tokens


def test_a_sweep_row_carries_gold_scores_and_provenance(
    make_launcher: LauncherFactory, tmp_path: Path
) -> None:
    task = bench_task("jinja-filesystemloader")
    result = _child(make_launcher, task.prompt)
    sweep = tmp_path / "sweep"
    sweep.mkdir()
    row = {
        "run_key": "k1", "task_id": task.id, "model_choice": "light", "model_id": result.model_id,
        "scaffold": "aided", "quality": 0.75, "gold_recall_file": 1.0, "code_hash": "c0de",
        "config_hash": "c0f1", "weights_sha256": "ab12", "provenance": "p1", "trace_path": result.trace_path,
        "contract_valid": True,
    }  # fmt: skip
    (sweep / "results.jsonl").write_text(json.dumps({**row, "quality": 0.1}) + "\n" + json.dumps(row) + "\n")
    log = inspect_log.read_eval_log(str(inspect_export.to_inspect(sweep, tmp_path / "sweep.eval")))
    (sample,) = log.samples  # the latest row of a run key
    assert sample.id == "k1" and sample.input == task.prompt
    assert sample.target == [span.label for span in task.gold]
    assert (
        sample.scores["quality"].value == 0.75
        and sample.scores["quality"].metadata["gold_recall_file"] == 1.0
    )
    assert {k: sample.metadata[k] for k in ("scaffold", "code_hash", "config_hash", "weights_sha256")} == {
        "scaffold": "aided", "code_hash": "c0de", "config_hash": "c0f1", "weights_sha256": "ab12",
    }  # fmt: skip
    quality = next(s for s in log.results.scores if s.name == "quality")
    assert quality.metrics["mean"].value == 0.75


def test_every_run_of_a_recorded_study_round_trips(tmp_path: Path) -> None:
    """The delegation study on the no-model baseline: each row of its results.jsonl is a sample
    with the row's score, parent and children nested; no model ran, so no span and no sample
    shows the tokens the harness estimated for its budgets (the rows keep those)."""
    from subagent_lab.experiments.delegation import Cell, DelegationSpec, run_study
    from subagent_lab.experiments.delegation.ledger import answer_evidence

    cells = (Cell(arm="alone"), Cell(arm="forced-delegation"))
    spec = DelegationSpec(splits=("dev",), tasks_per_split=1, cells=cells, baseline=True)
    df = run_study(spec, out_dir=tmp_path / "sweeps")
    log = inspect_log.read_eval_log(
        str(inspect_export.to_inspect(df.attrs["study_dir"], tmp_path / "s.eval"))
    )
    samples = {sample.id: sample for sample in log.samples}
    assert sorted(samples) == sorted(df["run_key"]) and df["sub_agents"].sum() == 1
    for row in df.to_dict("records"):
        sample = samples[row["run_key"]]
        assert sample.scores["quality"].value == row["quality"]
        # The answer scored: the path:line items of the parent's answer, as the study scores them.
        assert sample.scores["quality"].answer == "\n".join(answer_evidence(row["answer"]))
        assert sample.metadata["terminal_reason"] == row["terminal_reason"] == "completed"
        parent, *children = _spans(sample)
        assert len(children) == row["sub_agents"] and all(c.parent_id == parent.id for c in children)
        assert row["parent_tokens"] > 0 and row["total_tokens"] > 0  # the harness's estimates
        assert parent.metadata["total_tokens"] == 0 and parent.metadata["no_model"]
        assert all(c.metadata["total_tokens"] == 0 for c in children)
        assert sample.model_usage == {}
    assert any(sample.scores["quality"].answer for sample in samples.values())


def test_without_inspect_ai_the_error_says_how_to_install(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(inspect_export, "inspect_available", lambda: False)
    with pytest.raises(ImportError, match=r"subagent_lab\[inspect\]"):
        inspect_export.to_inspect([], tmp_path / "x.eval")


def test_cli_export_inspect(make_launcher: LauncherFactory, tmp_path: Path) -> None:
    from subagent_lab.cli.main import main

    result = _child(make_launcher)
    out = tmp_path / "cli.eval"
    assert main(["export", "--inspect", result.trace_path, "-o", str(out)]) == 0
    assert len(inspect_log.read_eval_log(str(out)).samples) == 1


# ---------------------------------------------------------------- a task file's sweep, exported

BUILT_IN = "jinja-filesystemloader"
"""A built-in dev task's id, reused by the task file below for a task of its own."""


def _task_file(tmp_path: Path, workspace: Path) -> Path:
    """A task file whose first task's id is a built-in task's, with gold of its own."""
    path = tmp_path / "tasks" / "mine.yaml"
    path.parent.mkdir(parents=True)
    path.write_text(
        f"suite: mine\nworkspace: {{dir: {workspace}}}\ntasks:\n"
        f"  - {{id: {BUILT_IN}, prompt: 'Where is login implemented?', kind: locate,\n"
        "     gold: [{path: app/auth.py, start: 4, end: 5, anchor: 'def login('}]}\n"
        "  - {id: no-such-thing, prompt: 'Where are passwords salted?', kind: absent, probes: [salt]}\n",
        encoding="utf-8",
    )
    return path


def _check_samples(samples: list[Any], df: Any) -> None:
    by_task = {s.metadata["task_id"]: s for s in samples}
    # A sample per run: the give-up floor's rows beside the absent task are scored, not run.
    runs = df[df["model_choice"] != "give-up"]
    assert len(samples) == len(runs) == 4  # two tasks x (none, retrieval)
    for sample in samples:
        task = sample.metadata["task_id"]
        if task == BUILT_IN:  # the file's gold, never the built-in task's of the same id
            assert sample.target == ["app/auth.py:4-5"], sample.target
            assert sample.input == "Where is login implemented?"
        else:
            assert sample.target == "absent"
        row = df[df["run_key"] == sample.id].iloc[0]
        # The evidence the score was computed from is the score's answer (the viewer's ANSWER).
        assert sample.scores["quality"].answer == "\n".join(json.loads(row["evidence"]))
        assert sample.scores["quality"].value == pytest.approx(row["quality"])
        assert sample.total_time is not None and sample.total_time > 0  # DURATION is not "-"
        assert sample.started_at and sample.completed_at and sample.completed_at >= sample.started_at
        # No model ran: no tokens, though the rows hold the harness's estimates.
        assert sample.model_usage == {} and row["total_tokens"] > 0
        assert all(e.output.usage is None for e in sample.events if e.event == "model")
        assert all(e.metadata["total_tokens"] == 0 for e in _spans(sample))
    assert any(s.scores["quality"].answer for s in by_task.values())


def test_a_task_file_sweep_exports_its_own_gold_answers_durations_and_no_tokens(
    workspace: Path, tmp_path: Path, config_path: str
) -> None:
    import pandas as pd

    import subagent_lab as sl

    built_in = [span.label for span in bench_task(BUILT_IN).gold]
    assert built_in and "app/auth.py:4-5" not in built_in
    path = _task_file(tmp_path, workspace)
    df = sl.sweep(str(path), ["none", "retrieval"], config=config_path, runs_dir=tmp_path, progress=False)
    assert not df["terminal_reason"].eq("crashed").any(), df.get("error")
    sweep = Path(df.attrs["sweep_dir"])

    for source in (sweep, df):  # the directory, and the DataFrame a notebook holds
        out = inspect_export.to_inspect(source, tmp_path / f"{type(source).__name__}.eval")
        log = inspect_log.read_eval_log(str(out))
        _check_samples(log.samples, df)
        assert log.stats.model_usage == {}

    # Rows written before rows carried their gold: the sweep's task file (spec.json) gives it.
    results = sweep / "results.jsonl"
    rows = [json.loads(line) for line in results.read_text().splitlines()]
    results.write_text("".join(json.dumps({k: v for k, v in r.items() if k != "gold"}) + "\n" for r in rows))
    old = inspect_log.read_eval_log(str(inspect_export.to_inspect(sweep, tmp_path / "old.eval")))
    _check_samples(old.samples, df)
    # A loose row of a task file's sweep, neither gold nor sweep known: no gold rather than another's.
    loose = {k: v for k, v in rows[0].items() if k not in ("gold", "trace_path")}
    (sample,) = inspect_log.read_eval_log(str(inspect_export.to_inspect(loose, tmp_path / "l.eval"))).samples
    assert sample.target in ("", "absent") and sample.target != built_in
    # A row of a built-in suite still finds its gold by id.
    dev_row = {**loose, "task_id": BUILT_IN, "split": "dev", "kind": "locate"}
    (dev,) = inspect_log.read_eval_log(str(inspect_export.to_inspect(dev_row, tmp_path / "d.eval"))).samples
    assert dev.target == built_in
    assert isinstance(pd.DataFrame(rows), pd.DataFrame)


def test_a_child_path_out_of_the_exported_directory_is_not_followed(
    config: LabConfig, workspace: Path, tmp_path: Path
) -> None:
    """A trace is data: a parent's ``child_trace`` naming a file outside the directory exported (here
    a planted trace-shaped file, and a link out of the folder) is not read into the log."""
    parent = ScriptedModel([tool_calls(task_call("where is login?")), final("login is in app/auth.py")])
    light = ScriptedModel([tool_call("Grep", pattern="def login"), final(LOGIN_ANSWER)])
    agent = MainAgent(
        config, workspace, model_factory=lambda c, cfg: parent if c == "main" else light, scratch_dir=tmp_path
    )
    result = agent.run("Where is login?")
    here = Path(result.trace_path).parent
    child = Path(result.children[0].trace_path)
    assert child.parent == here
    outside = tmp_path / "elsewhere" / "secret.jsonl"
    outside.parent.mkdir()
    outside.write_bytes(child.read_bytes().replace(b"def login", b"SECRET-OUTSIDE"))
    for hostile in (str(outside), f"{here}/../../elsewhere/secret.jsonl"):
        trace = Path(result.trace_path)
        original = trace.read_text()
        trace.write_text(original.replace(json.dumps(str(child))[1:-1], hostile))
        assert hostile in trace.read_text()
        for source in (here, trace, [result]):
            log = inspect_log.read_eval_log(str(inspect_export.to_inspect(source, tmp_path / "h.eval")))
            sample = log.samples[0]
            assert "SECRET-OUTSIDE" not in sample.model_dump_json()
            assert len(_spans(sample)) == 1  # the parent alone
        trace.write_text(original)
    # A link in the folder that leads out of it is outside too.
    child.unlink()
    child.symlink_to(outside)
    log = inspect_log.read_eval_log(str(inspect_export.to_inspect(here, tmp_path / "l.eval")))
    assert "SECRET-OUTSIDE" not in log.samples[0].model_dump_json()
    # A sweep's row naming a trace out of the sweep's directory is not read either.
    sweep = tmp_path / "sweep"
    sweep.mkdir()
    (sweep / "results.jsonl").write_text(json.dumps({"run_key": "k", "trace_path": str(outside)}) + "\n")
    (sample,) = inspect_log.read_eval_log(str(inspect_export.to_inspect(sweep, tmp_path / "s.eval"))).samples
    assert "SECRET-OUTSIDE" not in sample.model_dump_json() and _spans(sample) == []
    # The child where it belongs is followed (the check above is not a refusal of every child).
    child.unlink()
    child.write_bytes(outside.read_bytes())
    log = inspect_log.read_eval_log(str(inspect_export.to_inspect(here, tmp_path / "in.eval")))
    assert "SECRET-OUTSIDE" in log.samples[0].model_dump_json() and len(_spans(log.samples[0])) == 2
