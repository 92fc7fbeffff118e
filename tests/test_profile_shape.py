"""One profile shape: the limits parent and child share (their old names, their one check), and
the parent's scaffold, a preset as a child's."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import REPO

from subagent_lab.config import build
from subagent_lab.config.agent_profile import AgentProfile, apply_overrides
from subagent_lab.config.build import loop_spec
from subagent_lab.config.endpoints import ModelConfig
from subagent_lab.config.legacy import upgrade_fields
from subagent_lab.config.limits import PARENT_LIMITS, Limits
from subagent_lab.config.profiles import config_json_schema, load_config
from subagent_lab.config.runtime_profile import RuntimeProfile
from subagent_lab.config.scaffolds import BASE
from subagent_lab.core.policy import policy_names
from subagent_lab.core.types import ConfigError


def _write(tmp_path: Path, raw: dict[str, Any]) -> Path:
    for prof in raw["profiles"].values():  # self-contained: no prompt files beside it
        prof["system_prompt"] = "You explore."
        prof.pop("system_prompt_file", None)
    path = tmp_path / "profiles.yaml"
    path.write_text(yaml.safe_dump(raw))
    return path


def _shipped() -> dict[str, Any]:
    raw: dict[str, Any] = yaml.safe_load((REPO / "profiles.yaml").read_text())
    return raw


@pytest.mark.parametrize("kind", [RuntimeProfile, AgentProfile])
def test_each_limit_is_declared_once_for_both_profile_kinds(kind: type[Limits]) -> None:
    assert issubclass(kind, Limits)
    for name, field in Limits.model_fields.items():
        # inherited, not declared again: one type, one bound, one default for both kinds
        assert name not in kind.__annotations__, name
        given = kind.model_fields[name]
        declared = (given.annotation, given.metadata, given.default)
        assert declared == (field.annotation, field.metadata, field.default), name
    assert "max_repairs" in kind.model_fields and "max_contract_repairs" not in kind.model_fields


def test_an_old_child_profile_with_the_old_repair_name_loads(tmp_path: Path) -> None:
    raw = _shipped()
    explore = raw["profiles"]["explore"]
    explore.pop("max_repairs")
    explore["max_contract_repairs"] = 0  # the name of files before the shared limits
    lab = load_config(_write(tmp_path, raw), env={})
    assert lab.profile("explore").max_repairs == 0
    assert "max_contract_repairs" not in lab.profile("explore").model_dump()


def test_both_repair_names_at_once_name_the_file_and_the_field(tmp_path: Path) -> None:
    raw = _shipped()
    raw["profiles"]["explore"]["max_contract_repairs"] = 0
    path = _write(tmp_path, raw)
    with pytest.raises(ConfigError) as info:
        load_config(path, env={})
    message = str(info.value)
    assert str(path) in message and "profiles.explore" in message and "max_contract_repairs" in message


@pytest.mark.parametrize(
    ("section", "name", "field", "value"),
    [
        ("profiles", "explore", "max_repairs", 11),
        ("agents", "main", "max_repairs", 11),
        ("agents", "main", "max_stale_turns", 0),
        ("profiles", "explore", "max_parallel_tools", 0),
    ],
)
def test_a_bad_limit_names_the_file_and_the_field_in_either_section(
    tmp_path: Path, section: str, name: str, field: str, value: int
) -> None:
    raw = _shipped()
    raw[section][name][field] = value
    path = _write(tmp_path, raw)
    with pytest.raises(ConfigError) as info:
        load_config(path, env={})
    assert str(path) in str(info.value) and f"{section}.{name}.{field}" in str(info.value)


@pytest.mark.parametrize("section", ["profiles", "agents"])
def test_one_check_holds_the_context_within_the_total_for_both_kinds(tmp_path: Path, section: str) -> None:
    raw = _shipped()
    name = "explore" if section == "profiles" else "main"
    raw[section][name].update(context_token_budget=9000, total_token_budget=8000)
    path = _write(tmp_path, raw)
    with pytest.raises(ConfigError) as info:
        load_config(path, env={})
    assert f"{section}.{name}" in str(info.value)
    assert "context_token_budget (9000) must be <= total_token_budget (8000)" in str(info.value)


def test_the_old_repair_name_in_an_override_replaces_the_value_of_the_layer_below() -> None:
    explore = load_config(REPO / "profiles.yaml", env={}).profile("explore")
    assert explore.max_repairs == 2
    old = apply_overrides(RuntimeProfile, explore, {"max_contract_repairs": 0}, where="test")
    assert old.max_repairs == 0
    layers = ({"max_repairs": 1}, {"max_contract_repairs": 3})
    later = apply_overrides(RuntimeProfile, explore, *layers, where="test")
    assert later.max_repairs == 3
    assert explore.model_copy(update={"max_contract_repairs": 1}).max_repairs == 1
    parent = apply_overrides(AgentProfile, AgentProfile.default(), {"max_contract_repairs": 0}, where="test")
    assert parent.max_repairs == 0


def test_an_old_traces_profile_fields_rerun_under_the_new_name() -> None:
    fields = upgrade_fields({"max_steps": 4, "max_contract_repairs": 0}, BASE)
    assert fields == {"max_steps": 4, "max_repairs": 0}


def test_a_parent_without_limits_gets_the_parent_defaults_and_the_schema_says_so() -> None:
    parent = AgentProfile.default()
    assert {name: getattr(parent, name) for name in PARENT_LIMITS} == PARENT_LIMITS
    schema = config_json_schema()["$defs"]
    agent, child = schema["AgentProfile"], schema["RuntimeProfile"]
    assert not set(PARENT_LIMITS) & set(agent.get("required", []))
    assert agent["properties"]["max_steps"]["default"] == PARENT_LIMITS["max_steps"]
    assert {"max_steps", "context_token_budget", "total_token_budget"} <= set(child["required"])
    with pytest.raises(ValueError, match="max_steps"):
        RuntimeProfile(name="x", system_prompt="p", context_token_budget=10, total_token_budget=20)  # type: ignore[call-arg]


# --- the parent's scaffold ------------------------------------------------------------------------


def test_a_parent_holds_no_aid_switch_and_no_observation_size() -> None:
    from subagent_lab.config.legacy import FLAT, SIZES

    assert set(AgentProfile.model_fields) & (set(FLAT) | SIZES) == set()
    assert "scaffold" in AgentProfile.model_fields


def test_an_old_parent_profile_with_flat_aid_fields_loads_as_its_scaffold(tmp_path: Path) -> None:
    raw = _shipped()
    raw["agents"]["main"].update(
        min_tool_calls=2, grace_turn=False, action_max_tokens=300, arg_max_chars=2000, max_contract_repairs=1
    )
    lab = load_config(_write(tmp_path, raw), env={})
    main = lab.agents["main"]
    assert main.scaffold.param("RequireToolFirst", "n") == 2 and not main.scaffold.has("Grace")
    assert (main.scaffold.observation.action_max_tokens, main.scaffold.observation.arg_max_chars) == (
        300,
        2000,
    )
    assert main.max_repairs == 1
    spec = loop_spec(main, ModelConfig(model="m"))
    assert (spec.caps.action_max_tokens, spec.caps.arg_max_chars, spec.limits.max_repairs) == (300, 2000, 1)
    assert policy_names(build.policies(main)) == ["require_tool_first", "skip_repeated"]


def test_a_parent_without_a_scaffold_runs_the_built_in_parent_preset(tmp_path: Path) -> None:
    lab = load_config(REPO / "profiles.yaml", env={})
    main = lab.agents["main"]
    assert main.scaffold == lab.scaffold("parent").scaffold == AgentProfile.default().scaffold
    # what the parent's two flat fields and its two caps meant before they were a preset
    assert policy_names(build.policies(main)) == ["skip_repeated", "grace"]
    spec = loop_spec(main, ModelConfig(model="m"))
    assert (spec.caps.action_max_tokens, spec.caps.arg_max_chars, spec.caps.thought_max_chars) == (
        400,
        4000,
        80,
    )


def test_a_parent_names_a_preset_or_writes_its_policies_over_the_parent_preset(tmp_path: Path) -> None:
    raw = _shipped()
    raw["agents"]["main"]["scaffold"] = [{"RequireToolFirst": {"n": 1}}]
    raw["agents"]["plain"] = {**raw["agents"]["main"], "scaffold": "plain"}
    lab = load_config(_write(tmp_path, raw), env={})
    written, plain = lab.agents["main"].scaffold, lab.agents["plain"].scaffold
    assert written.has("RequireToolFirst") and written.has("Grace")  # over ``parent``, not ``plain``
    assert written.observation == lab.scaffold("parent").scaffold.observation
    assert plain == lab.scaffold("plain").scaffold


def test_an_unknown_preset_on_a_parent_names_the_file_and_the_field(tmp_path: Path) -> None:
    raw = _shipped()
    raw["agents"]["main"]["scaffold"] = "nope"
    path = _write(tmp_path, raw)
    with pytest.raises(ConfigError) as info:
        load_config(path, env={})
    assert str(path) in str(info.value) and "agents.main.scaffold: unknown preset 'nope'" in str(info.value)


def test_a_parent_copy_is_validated_and_folds_old_fields() -> None:
    parent = AgentProfile.default().model_copy(update={"min_tool_calls": 3})
    assert parent.scaffold.param("RequireToolFirst", "n") == 3
    with pytest.raises(ValueError, match="max_steps"):
        AgentProfile.default().model_copy(update={"max_steps": 0})


# --- no consumer branches on the profile's kind ---------------------------------------------------

PROFILE_TYPES = frozenset({"AgentProfile", "RuntimeProfile", "Limits"})


def _profile_type_checks(source: str) -> list[int]:
    """Lines that test a value against a profile type: ``isinstance``/``issubclass`` with one of
    ``PROFILE_TYPES`` among its classes, or ``type(x) is/== ...`` naming one."""

    def names(node: ast.AST) -> set[str]:
        return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)} | {
            n.attr for n in ast.walk(node) if isinstance(n, ast.Attribute)
        }

    lines = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            checks = node.func.id in ("isinstance", "issubclass") and len(node.args) == 2
            if checks and names(node.args[1]) & PROFILE_TYPES:
                lines.append(node.lineno)
        elif isinstance(node, ast.Compare) and isinstance(node.left, ast.Call):
            left = node.left.func
            if isinstance(left, ast.Name) and left.id == "type" and names(node) & PROFILE_TYPES:
                lines.append(node.lineno)
    return lines


def test_the_check_finds_a_branch_on_the_profile_kind() -> None:
    bad = (
        "if isinstance(p, RuntimeProfile):\n    pass\n"
        "assert isinstance(p, (str, config.AgentProfile))\n"
        "if type(p) is AgentProfile:\n    pass\n"
        "if isinstance(p, str):\n    pass\n"
    )
    assert _profile_type_checks(bad) == [1, 3, 4]


def test_no_isinstance_on_a_profile_type_outside_config() -> None:
    package = REPO / "subagent_lab"
    found = [
        f"{path.relative_to(REPO)}:{line}"
        for path in sorted(package.rglob("*.py"))
        if "config" not in path.relative_to(package).parts[:1]
        for line in _profile_type_checks(path.read_text(encoding="utf-8"))
    ]
    assert found == []
