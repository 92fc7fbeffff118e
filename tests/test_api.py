"""The public API (``import subagent_lab as sl``) with scripted models: no network, no server."""

from __future__ import annotations

import inspect
import pkgutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import ipywidgets
import pytest
from conftest import GOOD, REPO

import subagent_lab as sl
from subagent_lab.bench.suite import load_suite
from subagent_lab.config.profiles import LabConfig, ModelConfig
from subagent_lab.core.trace import ModelCalled, RunStarted, read_trace
from subagent_lab.core.types import ConfigError
from subagent_lab.local_models import factory as factory_module
from subagent_lab.models.scripted import ScriptedFactory, final, tool_call

HEAVY = ("pandas", "openai", "ipywidgets", "matplotlib", "numpy", "httpx")


def _script() -> list[Any]:
    return [tool_call("Grep", pattern="def login"), final(GOOD)]


def test_import_is_light_and_all_names_resolve() -> None:
    code = (
        "import sys, subagent_lab as sl; "
        f"print(sorted({{m.split('.')[0] for m in sys.modules}} & set({HEAVY!r})))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
    assert set(sl.__all__) == {"__version__", *sl._EXPORTS}
    for name in sl.__all__:
        assert getattr(sl, name) is not None
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        sl.nope  # noqa: B018


def test_no_public_name_is_also_a_submodule() -> None:
    """Importing a submodule sets it as a package attribute, hiding a lazy name of the same spelling."""
    modules = {m.name for m in pkgutil.iter_modules(sl.__path__)}
    assert not modules & set(sl.__all__)


@pytest.mark.parametrize(
    "name",
    [
        "explore",
        "run",
        "run_parent",
        "rerun",
        "sweep",
        "load_runs",
        "trace_table",
        "inspect",
        "compare",
        "score",
        "write_report",
    ],
)
def test_every_argument_is_explained(name: str) -> None:
    function = getattr(sl, name)
    doc = inspect.getdoc(function) or ""
    for param in inspect.signature(function).parameters.values():
        stars = "**" if param.kind is param.VAR_KEYWORD else ""
        assert f"{stars}{param.name}:" in doc, f"sl.{name}: argument {param.name} is not documented"


def test_explore_with_a_scripted_model(config: LabConfig, workspace: Path, tmp_path: Path) -> None:
    model = sl.ScriptedModel(_script())
    runs = tmp_path / "elsewhere"
    result = sl.explore(
        "Where is login?",
        workspace,
        model,
        config=config,
        runs_dir=runs,
        context={"hint": "app/"},
        max_steps=5,
    )
    assert (result.status, result.terminal_reason) == ("completed", "completed")
    assert result.contract == GOOD and result.profile == "explore" and result.model_used == "light"
    assert Path(result.trace_path).is_relative_to(runs)
    start = read_trace(result.trace_path)[0]
    assert isinstance(start, RunStarted) and start.budgets["max_steps"] == 5
    first = model.requests[0].messages[1].content
    assert first.startswith("Where is login?") and '"hint": "app/"' in first


def test_model_forms(
    config: LabConfig, workspace: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[str] = []

    def factory(choice: str, cfg: ModelConfig) -> sl.ScriptedModel:
        seen.append(f"{choice}:{cfg.model}")
        return sl.ScriptedModel(_script())

    result = sl.run("explore", "Where is login?", workspace, factory, config=config, runs_dir=tmp_path)
    assert result.status == "completed" and seen == ["light:qwen2.5-coder-0.5b"]  # the profile's model

    # A choice goes through the configured models' factory: "main" is asked for and used.
    monkeypatch.setattr(factory_module, "default_model_factory", lambda lab: factory)
    result = sl.explore("Where is login?", workspace, "main", config=config, runs_dir=tmp_path)
    assert (result.model_choice, result.model_used) == ("main", "main") and seen[-1].startswith("main:")

    with pytest.raises(ValueError, match="'light' or 'main'"):
        sl.explore("x", workspace, "huge", config=config)
    with pytest.raises(TypeError, match="model object or a factory"):
        sl.explore("x", workspace, 42, config=config)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="max_steps"):
        sl.explore("x", workspace, sl.ScriptedModel([]), config=config, max_steps=0)


def test_cache_is_one_keyword(config: LabConfig, workspace: Path, tmp_path: Path) -> None:
    first = sl.explore(
        "Where is login?",
        workspace,
        sl.ScriptedModel(_script()),
        config=config,
        runs_dir=tmp_path,
        cache=True,
    )
    # The same requests again: every call is replayed, so a model with no turns left is never asked.
    again = sl.explore(
        "Where is login?", workspace, sl.ScriptedModel([]), config=config, runs_dir=tmp_path, cache=True
    )
    assert first.contract == again.contract == GOOD
    calls = [e for e in read_trace(again.trace_path) if isinstance(e, ModelCalled)]
    assert calls and all(c.cache_hit for c in calls)
    assert list(sl.trace_table(again)["cache_hit"]) == [True] * len(calls)
    assert not sl.trace_table(first)["cache_hit"].any()
    assert any((tmp_path / "sweeps" / "model-cache").rglob("*.json"))
    # Without the cache the empty script is asked and fails.
    fresh = sl.explore("Where is login?", workspace, sl.ScriptedModel([]), config=config, runs_dir=tmp_path)
    assert fresh.status == "failed"


def test_bench_task_and_score(config: LabConfig, tmp_path: Path) -> None:
    task = sl.bench_task("yaml-safe-load")
    gold = [f"{g.path}:{g.start}" for g in task.gold]  # the line the Grep shows: evidence must be seen
    answer = {**GOOD, "summary": "safe_load uses SafeLoader.", "evidence": gold}
    model = sl.ScriptedModel([tool_call("Grep", pattern="def safe_load"), final(answer)])
    result = sl.explore(task, model=model, config=config, runs_dir=tmp_path)  # the package is the workspace
    start = read_trace(result.trace_path)[0]
    assert isinstance(start, RunStarted) and Path(start.workspace) == sl.bench_workspace(task.id)
    assert sl.load_runs(result)["trace_path"].tolist() == [result.trace_path]
    assert result.status == "completed"
    assert sl.score(task, result).gold_recall_line == 1.0 and sl.score(task.id, result).quality > 0
    with pytest.raises(KeyError, match="no benchmark task"):
        sl.bench_task("no-such-task")


def test_run_parent_with_overrides(config: LabConfig, workspace: Path, tmp_path: Path) -> None:
    turns = [
        tool_call("Task", description="find", prompt="Where is login?", subagent_type="explore"),
        tool_call("Grep", pattern="def login"),
        final(GOOD),
        final("login is in app/auth.py:4-5."),
    ]
    model = sl.ScriptedModel(turns)
    result = sl.run_parent(
        "Where is login?",
        workspace,
        model,
        config=config,
        runs_dir=tmp_path,
        scratch=False,
        child_overrides={"explore": {"max_steps": 3}},
        tools=["Read", "Task"],
        max_steps=4,
    )
    assert result.answer == "login is in app/auth.py:4-5." and len(result.children) == 1
    parent = read_trace(result.trace_path)[0]
    assert (
        isinstance(parent, RunStarted)
        and parent.budgets["max_steps"] == 4
        and parent.tools == ["Read", "Task"]
    )
    child = read_trace(result.children[0].trace_path)[0]
    assert isinstance(child, RunStarted) and child.budgets["max_steps"] == 3
    with pytest.raises(ConfigError, match="tools"):
        sl.run_parent("x", workspace, model, config=config, tools=["WebFetch"])
    with pytest.raises(ConfigError, match="unknown agent profile"):
        sl.run_parent("x", workspace, model, config=config, profile="nobody")


TASK = next(t for t in load_suite() if t.id == "yaml-safe-load")
SWEEP_ANSWER = {**GOOD, "summary": "safe_load uses SafeLoader.", "evidence": [g.label for g in TASK.gold]}
FACTORY = ScriptedFactory({"*": [tool_call("Grep", pattern="def safe_load"), final(SWEEP_ANSWER)]})


def test_sweep_load_runs_inspect_compare(config_path: str, tmp_path: Path) -> None:
    df = sl.sweep(
        TASK.id,
        ["light", "main"],
        {"s3": {"max_steps": 3}, "s5": {}},
        model=FACTORY,
        config=config_path,
        name="api",
        progress=False,
        total_token_budget=20000,
    )
    assert len(df) == 4 and set(df["terminal_reason"]) == {"completed"}
    assert set(df.loc[df["variant"] == "s3", "max_steps"]) == {3}
    assert set(df["total_token_budget"]) == {20000}  # applied to every variant
    where = Path(df.attrs["sweep_dir"])
    assert where.parent == tmp_path / "runs" / "sweeps" and (where / "results.jsonl").is_file()
    assert set(sl.load_runs(where)["run_key"]) == set(df["run_key"])
    traces = sl.load_runs(where / "traces")
    assert len(traces) == 4 and set(traces["terminal_reason"]) == {"completed"}
    assert len(sl.load_runs(df["trace_path"].iloc[0])) == 1
    assert list(sl.load_runs([df.iloc[1], df["trace_path"].iloc[0]])["trace_path"]) == list(
        df["trace_path"][1::-1]
    )
    with pytest.raises(FileNotFoundError):
        sl.load_runs(tmp_path / "missing")

    assert isinstance(sl.inspect(df), ipywidgets.VBox) and isinstance(sl.inspect(where), ipywidgets.VBox)
    inspector = sl.inspect(df.iloc[0])
    assert inspector.run.trace_path == df["trace_path"].iloc[0]
    light, main = (sl.pick_trace(df, TASK.id, m, "s5") for m in ("light", "main"))
    pair = sl.compare(light, main)
    assert isinstance(pair, ipywidgets.HBox) and len(pair.children) == 2
    titles = [side.title.value for side in pair.children]
    assert "light" in titles[0] and "main" in titles[1] and "completed" in titles[0]
    assert set(sl.trace_table(light)["purpose"]) >= {"step"} and list(
        sl.trace_table(light, "tool")["tool"]
    ) == ["Grep"]
    assert not sl.summarize(df).empty and not sl.headline(df).empty


def test_sweep_refuses_what_it_cannot_do(config: LabConfig, config_path: str) -> None:
    with pytest.raises(TypeError, match=r"profiles\.yaml path"):
        sl.sweep(TASK.id, "light", config=config)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="cache=False"):
        sl.sweep(TASK.id, "light", model=FACTORY, cache=True, config=config_path)
    with pytest.raises(TypeError, match="models="):
        sl.sweep(TASK.id, "light", model="main", config=config_path)


def test_unit_tests_cannot_reach_the_embedded_model(config: LabConfig, workspace: Path) -> None:
    """The conftest guard: forgetting the scripted model fails at once, naming the fix."""
    with pytest.raises(pytest.fail.Exception, match="pass a ScriptedModel"):
        sl.explore("Where is login?", workspace, "light", config=config)


def test_explore_takes_a_scaffold_preset(workspace: Path, tmp_path: Path) -> None:
    """``scaffold=`` applies a preset's every field as a sweep does; keywords still win over it."""
    lab = sl.load_config(REPO / "profiles.yaml", env={})
    model = sl.ScriptedModel([final({"status": "completed", "summary": "s", "findings": [], "evidence": []})])
    result = sl.explore(
        "Where is login?",
        workspace,
        model,
        config=lab,
        runs_dir=tmp_path,
        scaffold="retrieval-start",
        max_steps=3,
    )
    start = read_trace(result.trace_path)[0]
    assert isinstance(start, RunStarted)
    assert "retrieval_start" in result.policies and start.budgets["max_steps"] == 3
    assert {"Find", "Search"} <= set(start.tools)
    with pytest.raises(ConfigError, match="no-such-preset"):
        sl.explore(
            "Where is login?", workspace, model, config=lab, runs_dir=tmp_path, scaffold="no-such-preset"
        )
