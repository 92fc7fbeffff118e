"""Agent files in and out: the four formats (real files from public repositories) into a child
profile with a report of what had no counterpart; refusal of tools a child may not hold; a
Claude Code export that imports back to the same profile."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from conftest import REPO

from subagent_lab.config.agent_files import ImportedAgent, export_agent, import_agent, model_choice
from subagent_lab.config.profiles import LabConfig
from subagent_lab.core.types import ConfigError
from subagent_lab.core.yaml_load import parse_yaml

FIXTURES = Path(__file__).parent / "fixtures" / "agents"


@pytest.mark.parametrize(
    ("fixture", "expected", "unmapped"),
    [
        (
            "claude/ccx-scout.md",
            {"format": "claude", "name": "ccx-scout", "model": "light", "max_steps": 20},
            {},
        ),
        (
            "gemini/codebase-investigator.md",
            {
                "format": "gemini",
                "name": "codebase-investigator",
                "max_steps": 20,
                "timeout_s": 900.0,
                "temperature": 0.1,
            },
            {"kind": "local"},
        ),
        (
            "codex/explorer.toml",
            {"format": "codex", "name": "explorer", "model": "main"},
            {"model_reasoning_effort": "medium"},
        ),
        (
            "opencode/skill-creator-agent.md",
            {"format": "opencode", "name": "skill-creator-agent"},
            {"mode": "subagent"},
        ),
    ],
)
def test_real_agent_files_import_with_the_field_loss_report(
    config: LabConfig, fixture: str, expected: dict[str, Any], unmapped: dict[str, Any]
) -> None:
    imported = import_agent(FIXTURES / fixture, config=config)
    profile, explore = imported.profile, config.profile("explore")
    for key, value in expected.items():
        got = getattr(imported, key) if key in ("format", "temperature") else getattr(profile, key)
        assert got == value, key
    assert profile.tools == ("Read", "Grep", "Glob")  # read-only, whatever each format calls them
    # No format has a budget: they, the contract and the scaffold are the explore profile's.
    for field in ("context_token_budget", "total_token_budget", "contract", "scaffold"):
        assert getattr(profile, field) == getattr(explore, field)
    assert profile.system_prompt != explore.system_prompt and len(profile.system_prompt) > 100
    assert {u.field: u.value for u in imported.unmapped} == unmapped  # reported with its value
    for field in (*imported.mapped, *(u.field for u in imported.unmapped)):
        assert field in _fields(fixture) or field == "(file name)" or field == "body"


def _fields(fixture: str) -> set[str]:
    text = (FIXTURES / fixture).read_text()
    if fixture.endswith(".toml"):
        import tomllib

        return set(tomllib.loads(text))
    return set(parse_yaml(text.split("---")[1], FIXTURES / fixture))


def test_every_field_of_a_file_is_either_mapped_or_reported(config: LabConfig, tmp_path: Path) -> None:
    path = tmp_path / ".claude" / "agents" / "scout.md"
    path.parent.mkdir(parents=True)
    path.write_text(
        "---\nname: scout\ndescription: finds things\ntools: Read, Grep, Glob, Bash\n"
        "disallowedTools: Bash\nmodel: claude-opus-4-5\nmaxTurns: 7\npermissionMode: plan\n"
        "memory: project\ncolor: red\nhooks:\n  Stop: []\n---\nFind it.\n"
    )
    imported = import_agent(path, config=config)
    assert imported.format == "claude"  # by its folder
    assert imported.profile.tools == ("Read", "Grep", "Glob")  # Bash granted, then disallowed
    assert imported.profile.model == "main" and imported.profile.max_steps == 7
    assert imported.profile.system_prompt == "Find it.\n"
    reported = {u.field: u.value for u in imported.unmapped}
    assert reported == {"permissionMode": "plan", "memory": "project", "color": "red", "hooks": {"Stop": []}}
    assert set(imported.mapped) == {
        "name",
        "description",
        "body",
        "tools",
        "disallowedTools",
        "model",
        "maxTurns",
    }


@pytest.mark.parametrize(
    ("fixture", "field", "tools"),
    [
        ("claude/test-writer.md", "tools", "Bash, Write, Edit"),
        ("opencode/scout.md", "permission", "bash, skill"),
    ],
)
def test_tools_a_child_may_not_hold_are_refused_naming_the_file_and_field(
    config: LabConfig, fixture: str, field: str, tools: str
) -> None:
    with pytest.raises(ConfigError) as refused:
        import_agent(FIXTURES / fixture, config=config)
    message = str(refused.value)
    assert message.startswith(str(FIXTURES / fixture)) and f"{field}: {tools}:" in message
    assert "read-only tools" in message


def test_codex_sandbox_that_writes_is_refused(config: LabConfig, tmp_path: Path) -> None:
    path = tmp_path / "worker.toml"
    path.write_text('name = "worker"\ndeveloper_instructions = "Fix it."\nsandbox_mode = "workspace-write"\n')
    with pytest.raises(ConfigError, match=r"worker\.toml: sandbox_mode: 'workspace-write'"):
        import_agent(path, config=config)


def test_a_value_the_profile_rejects_names_the_file(config: LabConfig, tmp_path: Path) -> None:
    path = tmp_path / "a.md"
    path.write_text("---\nname: a\ntools: Read\nmaxTurns: 0\n---\nGo.\n")
    with pytest.raises(ConfigError, match=r"a\.md: the profile it makes: max_steps"):
        import_agent(path, config=config)


def test_model_tiers() -> None:
    assert [model_choice(m) for m in ("haiku", "sonnet", "gpt-5-mini", "gemini-2.5-flash", "inherit")] == [
        "light", "main", "light", "light", None,
    ]  # fmt: skip


def test_export_then_import_gives_the_same_profile(config: LabConfig, tmp_path: Path) -> None:
    imported = import_agent(FIXTURES / "claude" / "ccx-scout.md", config=config)
    tuned = config.profile("explore").model_copy(
        update={"total_token_budget": 20000, "max_steps": 5, "model": "main", "timeout_s": 120.0,
                "tools": ("Read", "Grep"), "cost_budget_usd": 0.5}
    )  # fmt: skip
    for profile in (imported.profile, tuned, config.profile("verification")):
        path = export_agent(profile, tmp_path / ".claude" / "agents" / f"{profile.name}.md", config=config)
        back = import_agent(path, config=config)
        assert back.profile == profile
        assert back.unmapped == []
        front = parse_yaml(path.read_text().split("---")[1], path)
        assert front["name"] == profile.name and front["maxTurns"] == profile.max_steps
        assert front["tools"] == ", ".join(profile.tools)
    # The plain fields carry an imported profile whole; the budgets of a tuned one ride along.
    assert "x-subagent-lab" not in (tmp_path / ".claude" / "agents" / "ccx-scout.md").read_text()
    extra = parse_yaml((tmp_path / ".claude/agents/explore.md").read_text().split("---")[1], tmp_path)
    assert extra["x-subagent-lab"] == {
        "total_token_budget": 20000,
        "timeout_s": 120.0,
        "cost_budget_usd": 0.5,
    }


def test_import_agent_is_public_and_reports_as_yaml(config: LabConfig) -> None:
    import subagent_lab as sl

    imported = sl.import_agent(FIXTURES / "gemini" / "codebase-investigator.md", config=config)
    assert isinstance(imported, ImportedAgent)
    entry = parse_yaml(imported.profile_yaml(), REPO / "x.yaml")
    assert entry["codebase-investigator"]["max_steps"] == 20


def test_cli_import_agent_prints_the_profile_and_the_report(capsys: pytest.CaptureFixture[str]) -> None:
    from subagent_lab.cli.main import main

    assert main(["import-agent", str(FIXTURES / "codex" / "explorer.toml")]) == 0
    out = capsys.readouterr().out
    assert "explorer:" in out and '# no counterpart: model_reasoning_effort = "medium"' in out
    assert main(["import-agent", str(FIXTURES / "claude" / "test-writer.md")]) == 2
    assert "tools: Bash, Write, Edit" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("text", "field"),
    [
        ("---\nname: ../../../escaped\ntools: [read_file]\n---\nGo.\n", "name"),
        ("---\nname: /tmp/escaped\ntools: [read_file]\n---\nGo.\n", "name"),
        ("---\nname: a/b\ntools: [read_file]\n---\nGo.\n", "name"),
        ("---\nname: ..\ntools: [read_file]\n---\nGo.\n", "name"),
        ("---\nname: [x]\ntools: [read_file]\n---\nGo.\n", "name"),
        ("---\nname: a\ntools: [read_file]\ntimeout_mins: soon\n---\nGo.\n", "timeout_mins"),
        ("---\nname: a\ntools: [read_file]\ntimeout_mins: [1]\n---\nGo.\n", "timeout_mins"),
        ("---\nname: a\ntools: [read_file]\ntemperature: .nan\n---\nGo.\n", "temperature"),
        ("---\nname: a\ntools: [read_file]\ntemperature: true\n---\nGo.\n", "temperature"),
        (f"---\nname: a\ntools: [read_file]\ntimeout_mins: {10**400}\n---\nGo.\n", "timeout_mins"),
        ("---\nname: a\ntools: [read_file]\nmax_turns: many\n---\nGo.\n", "max_turns"),
        ("---\nname: a\ntools: [read_file]\nmax_turns: 2.5\n---\nGo.\n", "max_turns"),
    ],
)
def test_a_bad_name_or_number_is_a_config_error_naming_file_and_field(
    config: LabConfig, tmp_path: Path, text: str, field: str
) -> None:
    path = tmp_path / ".gemini" / "agents" / "a.md"
    path.parent.mkdir(parents=True)
    path.write_text(text)
    with pytest.raises(ConfigError) as refused:
        import_agent(path, config=config)
    message = str(refused.value)  # the YAML reader refuses an integer past a float's range itself
    assert message.startswith(f"{path}:") and f" {field}:" in message, message


@pytest.mark.parametrize(
    "text",
    [
        "name = 'a'\ndeveloper_instructions = 'Go.'\nx = " + "[" * 5000 + "]" * 5000 + "\n",  # deep nesting
        "name = 'a'\ndeveloper_instructions = 'Go.\n",  # an unclosed string
        "name = 'a'\nname = 'b'\n",
    ],
)
def test_malformed_toml_is_a_config_error_naming_the_file(
    config: LabConfig, tmp_path: Path, text: str
) -> None:
    path = tmp_path / "a.toml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=rf"^{re.escape(str(path))}: not valid TOML"):
        import_agent(path, config=config)


def test_an_agents_trace_stays_in_the_trace_directory_whatever_its_profile_name(
    config: LabConfig, workspace: Path, tmp_path: Path
) -> None:
    """The trace path's layer on its own: a profile name holding a path (from an override, a config
    or an agent file read before names were checked) still names a file inside the trace directory."""
    from subagent_lab.agents.launcher import SubagentLauncher, SubagentRequest
    from subagent_lab.models.scripted import ScriptedModel, final

    answer = {"status": "not_found", "summary": "nothing", "findings": [], "unanswered": []}
    traces = tmp_path / "deep" / "runs"
    for name in ("../../../escaped", str(tmp_path / "escaped"), ".."):
        profiles = {**config.profiles, name: config.profiles["explore"].model_copy(update={"name": name})}
        model = ScriptedModel([final(answer)])
        launcher = SubagentLauncher(config.model_copy(update={"profiles": profiles}), workspace,
                                    model_factory=lambda c, m, one=model: one, trace_dir=traces)  # fmt: skip
        result = launcher.launch(SubagentRequest(task="Where is login?", profile=name))
        assert result.trace_path is not None
        trace = Path(result.trace_path)
        assert trace.resolve().is_relative_to(traces.resolve()) and trace.is_file(), trace
    assert not list(tmp_path.glob("escaped*")) and not list((tmp_path / "deep").glob("escaped*"))
