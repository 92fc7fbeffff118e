"""An imported agent runs as imported: ``sl.run``, ``sl.explore`` and ``sl.sweep`` take the profile
object ``sl.import_agent`` returns, and a refused grant says how to import the file anyway."""

from __future__ import annotations

from pathlib import Path

import pytest

import subagent_lab as sl
from subagent_lab.config.agent_files import ImportedAgent
from subagent_lab.core.trace import RunStarted, read_trace
from subagent_lab.core.types import ConfigError

SCOUT = """\
---
name: scout
description: Finds where things are defined.
tools: Read, Grep, Glob
model: haiku
maxTurns: 4
---
You are a scout. Find where the code the task names lives, then answer with one JSON object.
"""
CODE = "def login(user, password):\n    return check_password(user, password)\n"


@pytest.fixture
def scout(tmp_path: Path) -> ImportedAgent:
    path = tmp_path / ".claude" / "agents" / "scout.md"
    path.parent.mkdir(parents=True)
    path.write_text(SCOUT)
    return sl.import_agent(path)


@pytest.fixture
def code(tmp_path: Path) -> Path:
    root = tmp_path / "code"
    (root / "app").mkdir(parents=True)
    (root / "app" / "auth.py").write_text(CODE)
    return root


def _started(trace: str | Path) -> RunStarted:
    return next(e for e in read_trace(trace) if isinstance(e, RunStarted))


def test_run_and_explore_take_an_imported_profile(scout: ImportedAgent, code: Path, tmp_path: Path) -> None:
    assert "scout" not in sl.load_config().profiles  # it exists only as the object
    for result in (
        sl.run(scout.profile, "Where is login defined?", code, "none", runs_dir=tmp_path / "runs"),
        sl.explore(
            "Where is login defined?", code, "none", profile=scout.profile, runs_dir=tmp_path / "runs"
        ),
    ):
        assert result.terminal_reason == "completed", result.detail
        started = _started(result.trace_path)
        assert started.profile == "scout" and "You are a scout." in started.system_prompt
        assert started.budgets["max_steps"] == 4
    with pytest.raises(ValueError, match="pass it as profile="):
        sl.rerun(result, "none", runs_dir=tmp_path / "runs")
    again = sl.rerun(result, "none", runs_dir=tmp_path / "runs", profile=scout.profile)
    assert again.terminal_reason == "completed" and _started(again.trace_path).profile == "scout"


def test_a_profile_object_too_big_for_the_served_context_is_refused(scout: ImportedAgent, code: Path) -> None:
    big = scout.profile.model_copy(update={"context_token_budget": 60_000, "total_token_budget": 90_000})
    with pytest.raises(ConfigError, match=r"profile 'scout': profiles\.scout\.context_token_budget"):
        sl.run(big, "Where is login defined?", code, "none")
    with pytest.raises(ConfigError, match="RuntimeProfile"):
        sl.run({"name": "scout"}, "Where is login defined?", code, "none")  # type: ignore[arg-type]


def test_sweep_takes_an_imported_profile(scout: ImportedAgent, code: Path, tmp_path: Path) -> None:
    tasks = tmp_path / "tasks.yaml"
    tasks.write_text(
        "suite: mine\ntasks:\n"
        "  - {id: login, prompt: 'Where is login defined?', workspace: {dir: code},\n"
        "     gold: [{path: app/auth.py, start: 1, end: 2}]}\n"
    )
    df = sl.sweep(str(tasks), ["none"], profile=scout.profile, runs_dir=tmp_path / "runs", progress=False)
    row = df.iloc[0]
    assert row["terminal_reason"] == "completed" and row["variant"] == "scout" and row["max_steps"] == 4
    assert "You are a scout." in _started(row["trace_path"]).system_prompt


def test_a_refused_shell_says_how_to_import_the_file(tmp_path: Path) -> None:
    path = tmp_path / ".claude" / "agents" / "runner.md"
    path.parent.mkdir(parents=True)
    path.write_text(SCOUT.replace("tools: Read, Grep, Glob", "tools: Read, Grep, Bash"))
    with pytest.raises(
        ConfigError, match=r"add `disallowedTools: Bash` to its front matter or drop it from tools"
    ):
        sl.import_agent(path)
    path.write_text(
        SCOUT.replace("tools: Read, Grep, Glob", "tools: Read, Grep, Bash\ndisallowedTools: Bash")
    )
    assert sl.import_agent(path).profile.tools == ("Read", "Grep")  # the fix the message names works
