"""profiles.yaml: shipped profiles, invariants with file and field in the message, env overrides."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from conftest import REPO
from pydantic import ValidationError

from subagent_lab.profiles import config_json_schema, load_config
from subagent_lab.types import ConfigError


def _write(tmp_path: Path, mutate) -> Path:  # type: ignore[no-untyped-def]
    raw = yaml.safe_load((REPO / "profiles.yaml").read_text())
    for prof in raw["profiles"].values():  # keep the test file self-contained
        prof["system_prompt"] = "You explore."
        prof.pop("system_prompt_file")
    mutate(raw)
    path = tmp_path / "profiles.yaml"
    path.write_text(yaml.safe_dump(raw))
    return path


def test_shipped_profiles_match_the_spec() -> None:
    cfg = load_config(REPO / "profiles.yaml", env={})
    explore, verification = cfg.profile("explore"), cfg.profile("verification")
    assert (explore.tools, explore.max_steps, explore.context_token_budget, explore.total_token_budget) == (
        ("Read", "Grep", "Glob"),
        12,
        16000,
        32000,
    )
    assert (explore.model, explore.contract) == ("light", "ExploreResult")
    assert (verification.max_steps, verification.context_token_budget, verification.total_token_budget) == (
        10,
        20000,
        40000,
    )
    assert (verification.model, verification.contract) == ("main", "VerificationResult")
    assert "JSON" in explore.system_prompt  # loaded from prompts/explore.md
    with pytest.raises(ValidationError):
        explore.max_steps = 99  # type: ignore[misc]  # frozen


@pytest.mark.parametrize(
    ("mutate", "needle"),
    [
        (lambda r: r["profiles"]["explore"].update(tools=["Read", "Bash"]), "profiles.explore"),
        (lambda r: r["profiles"]["explore"].update(tools=["Read", "Task"]), "may not hold ['Task']"),
        (lambda r: r["profiles"]["explore"].update(max_steps=0), "profiles.explore.max_steps"),
        (
            lambda r: r["profiles"]["explore"].update(context_token_budget=99999),
            "context_token_budget (99999)",
        ),
        (lambda r: r["profiles"]["explore"].update(model="huge"), "profiles.explore.model"),
        (lambda r: r["profiles"]["explore"].update(contract="Nope"), "unknown contract 'Nope'"),
        (lambda r: r["profiles"]["explore"].update(max_stepz=3), "profiles.explore.max_stepz"),
        (lambda r: r["models"].pop("main"), "models.main"),
    ],
)
def test_invalid_config_names_file_and_field(tmp_path: Path, mutate, needle: str) -> None:  # type: ignore[no-untyped-def]
    path = _write(tmp_path, mutate)
    with pytest.raises(ConfigError) as info:
        load_config(path, env={})
    assert str(path) in str(info.value) and needle in str(info.value)


def test_broken_yaml_names_line(tmp_path: Path) -> None:
    path = tmp_path / "profiles.yaml"
    path.write_text("models:\n  main: {model: x\nprofiles: {}\n")
    with pytest.raises(ConfigError, match=r"profiles.yaml: line \d+"):
        load_config(path, env={})


def test_missing_prompt_file_names_field(tmp_path: Path) -> None:
    path = tmp_path / "profiles.yaml"
    path.write_text(
        "models: {main: {model: m}}\nprofiles:\n  explore: {system_prompt_file: nope.md, max_steps: 3,"
        " context_token_budget: 10, total_token_budget: 20}\n"
    )
    with pytest.raises(ConfigError, match=r"profiles\.explore\.system_prompt_file"):
        load_config(path, env={})


def test_env_overrides_point_models_elsewhere() -> None:
    env = {
        "LLM_BASE_URL": "http://example.invalid/v1",
        "LLM_MODEL_ID": "big",
        "LLM_API_KEY": "k",
        "LIGHT_LLM_MODEL_ID": "small",
    }
    cfg = load_config(REPO / "profiles.yaml", env=env)
    main, light = cfg.models["main"], cfg.models["light"]
    assert main is not None and light is not None
    assert (main.base_url, main.model, main.api_key_env) == (
        "http://example.invalid/v1",
        "big",
        "LLM_API_KEY",
    )
    assert light.model == "small" and light.base_url is None


def test_json_schema_export_forbids_unknown_keys() -> None:
    schema = config_json_schema()
    assert schema["$defs"]["RuntimeProfile"]["additionalProperties"] is False
    assert "max_steps" in schema["$defs"]["RuntimeProfile"]["properties"]
