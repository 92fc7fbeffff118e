"""profiles.yaml: shipped profiles, invariants with file and field in the message, env overrides."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import yaml
from conftest import REPO
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from subagent_lab.config.parsed import parsed_config
from subagent_lab.config.profiles import LabConfig, config_json_schema, load_config, served_context
from subagent_lab.core.types import ConfigError


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
        15000,
        32000,
    )
    assert (explore.model, explore.contract) == ("light", "ExploreResult")
    # 12,000 + 768 output tokens fit the embedded server's 16,384 (20,000 did not: issue 10).
    assert (verification.max_steps, verification.context_token_budget, verification.total_token_budget) == (
        10,
        12000,
        30000,
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


# --- every bad file is a ConfigError naming the file (issue 10) ------------------------------

MINIMAL = "models: {main: {model: m}}\nprofiles: {}\n"
PROFILE = "{system_prompt: hi, max_steps: 3, context_token_budget: 100, total_token_budget: 200}"
LLM_ENV = {"LLM_MODEL_ID": "other", "LIGHT_LLM_BASE_URL": "http://example.invalid/v1"}


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("- models\n- profiles\n", "top level must be a mapping"),
        ("models: {main: {model: m}}\nprofiles: [explore, plan]\n", "profiles"),
        ("models: just-a-string\nprofiles: {}\n", "models"),
        ("models: {main: a-string, light: [1]}\nprofiles: {}\n", "models.main"),
        ("models: {main: {model: m}}\nprofiles: {explore: 3}\n", "profiles.explore"),
        (
            "models: {main: {model: m}}\nprofiles: {explore: {system_prompt_file: [a]}}\n",
            "system_prompt_file",
        ),
        ("models: {main: {model: m}}\nprofiles: {}\nagents: [main]\n", "agents"),
        ("models: {main: {model: m}}\nprofiles: {}\nagents: {main: {tools: Read}}\n", "agents.main.tools"),
        ("models: {main: {model: m}}\nprofiles: {1: " + PROFILE + "}\n", "profiles"),
        ("models: {main: {model: m}}\nprofiles: {}\nserver: {n_ctx: lots}\n", "server.n_ctx"),
        ("a: &x [*x]\n", "recursive alias *x"),
        ("a: &x {b: {c: *x}}\n", "recursive alias *x"),
        ("models: {main: {model: m}}\nprofiles: {}\nmodels: {}\n", "duplicate key 'models' (lines 1 and 3)"),
        ("models:\n  main: {model: m, model: n}\nprofiles: {}\n", "duplicate key 'model' (lines 2 and 2)"),
        ("models: {main: {model: m}}\nprofiles: {}\ntrace_dir: x\u0000\n", "not valid YAML"),
        ("models: {main: {model: m}\n", "line 2"),
        ("[" * 5000, "YAML"),
        ("", "top level must be a mapping"),
    ],
)
def test_malformed_file_is_a_config_error(tmp_path: Path, text: str, needle: str) -> None:
    path = tmp_path / "profiles.yaml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ConfigError) as info:
        load_config(path, env=LLM_ENV)  # env overrides touch models: wrong shapes must survive them
    assert str(path) in str(info.value) and needle in str(info.value)


def test_non_utf8_file_names_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "profiles.yaml"
    path.write_bytes(b"models: {main: {model: m}}\nprofiles: {}\ntrace_dir: caf\xe9\n")
    with pytest.raises(ConfigError, match=r"profiles\.yaml: line 3: configuration is not UTF-8.*0xe9"):
        load_config(path, env={})


def test_non_utf8_prompt_file_names_the_field(tmp_path: Path) -> None:
    (tmp_path / "p.md").write_bytes(b"\xff\xfe prompt")
    path = tmp_path / "profiles.yaml"
    path.write_text(
        "models: {main: {model: m}}\nprofiles:\n  explore: {system_prompt_file: p.md, max_steps: 3,"
        " context_token_budget: 10, total_token_budget: 20}\n"
    )
    with pytest.raises(ConfigError, match=r"profiles\.explore\.system_prompt_file: .*p\.md.*not UTF-8"):
        load_config(path, env={})


def test_oversized_file_is_refused_before_parsing(tmp_path: Path) -> None:
    path = tmp_path / "profiles.yaml"
    path.write_text(MINIMAL + "# " + "x" * 1_100_000 + "\n")
    started = time.monotonic()
    with pytest.raises(ConfigError, match=r"1,100,0\d\d bytes; the limit is 1,000,000"):
        load_config(path, env={})
    assert time.monotonic() - started < 1.0


def test_alias_bomb_is_refused(tmp_path: Path) -> None:
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{i}: &a{i} [*a{i - 1}, *a{i - 1}, *a{i - 1}, *a{i - 1}, *a{i - 1}]" for i in range(1, 12)]
    path = tmp_path / "profiles.yaml"
    path.write_text("\n".join(lines) + "\n" + MINIMAL)
    started = time.monotonic()
    with pytest.raises(ConfigError, match="alias bomb"):
        load_config(path, env={})
    assert time.monotonic() - started < 2.0


def test_merge_keys_may_override_without_a_duplicate_error(tmp_path: Path) -> None:
    path = tmp_path / "profiles.yaml"
    path.write_text(
        "base: &base {system_prompt: hi, max_steps: 3, context_token_budget: 100, total_token_budget: 200}\n"
        "models: {main: {model: m}}\n"
        "profiles:\n  explore: {<<: *base, max_steps: 5}\n".replace("base: &base", "x-base: &base")
    )
    with pytest.raises(ConfigError, match="x-base"):  # an unknown top-level key, not a duplicate
        load_config(path, env={})
    path.write_text(
        "models: {main: {model: m, max_output_tokens: 100}}\n"
        "profiles:\n"
        "  explore: &base {system_prompt: hi, max_steps: 3,\n"
        "                  context_token_budget: 100, total_token_budget: 200}\n"
        "  plan: {<<: *base, name: plan, max_steps: 5, contract: PlanResult}\n"
    )
    cfg = load_config(path, env={})
    assert (cfg.profile("plan").max_steps, cfg.profile("explore").max_steps) == (5, 3)


# --- the largest call must fit in what the server serves --------------------------------------


def test_context_budget_plus_output_must_fit_the_served_context(tmp_path: Path) -> None:
    path = _write(tmp_path, lambda r: r["profiles"]["verification"].update(context_token_budget=20000))
    with pytest.raises(ConfigError) as info:
        load_config(path, env={})
    message = str(info.value)
    assert str(path) in message
    assert "profiles.verification.context_token_budget: 20000 + models.main.max_output_tokens 768" in message
    assert "exceeds the served context 16384 (server.n_ctx)" in message
    bigger = _write(
        tmp_path,
        lambda r: (
            r["profiles"]["verification"].update(context_token_budget=20000),
            r["server"].update(n_ctx=32768),
        ),
    )
    cfg = load_config(bigger, env={})
    assert served_context(cfg) == 32768 and cfg.profile("verification").context_token_budget == 20000


def test_profile_output_cap_and_agents_are_checked_too(tmp_path: Path) -> None:
    path = _write(tmp_path, lambda r: r["profiles"]["explore"].update(max_output_tokens=2000))
    with pytest.raises(
        ConfigError,
        match=r"profiles\.explore\.context_token_budget: 15000 \+ "
        r"profiles\.explore\.max_output_tokens 2000 = 17000",
    ):
        load_config(path, env={})
    path = _write(tmp_path, lambda r: r["agents"]["main"].update(context_token_budget=16000))
    with pytest.raises(ConfigError, match=r"agents\.main\.context_token_budget: 16000"):
        load_config(path, env={})


def test_remote_models_are_checked_against_their_context_window(tmp_path: Path) -> None:
    def remote(window: int | None):  # type: ignore[no-untyped-def]
        def mutate(raw):  # type: ignore[no-untyped-def]
            raw["models"]["main"].update(base_url="http://example.invalid/v1")
            if window is not None:
                raw["models"]["main"]["context_window"] = window

        return mutate

    load_config(_write(tmp_path, remote(None)), env={})  # unknown window: nothing to check
    load_config(_write(tmp_path, remote(200_000)), env={})  # a remote window may exceed n_ctx
    with pytest.raises(
        ConfigError,
        match=r"profiles\.verification\.context_token_budget: .*"
        r"exceeds the served context 8000 \(models\.main\.context_window\)",
    ):
        load_config(_write(tmp_path, remote(8000)), env={})


# --- fuzzing: whatever the bytes, a LabConfig or a ConfigError --------------------------------

_SCALARS = st.one_of(
    st.none(), st.booleans(), st.integers(-5, 10**6), st.floats(allow_nan=True), st.text(max_size=8)
)
_VALUES = st.recursive(
    _SCALARS,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6) | st.integers(), inner, max_size=3)
    ),
    max_leaves=8,
)
_SECTIONS = ("models", "profiles", "agents", "server", "trace_dir")


def _valid_raw() -> dict[str, object]:
    raw = yaml.safe_load((REPO / "profiles.yaml").read_text())
    for section in ("profiles", "agents"):
        for prof in raw[section].values():
            prof["system_prompt"] = "You explore."
            prof.pop("system_prompt_file")
    return raw


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_fuzzed_files_load_or_raise_config_error(tmp_path: Path, data: st.DataObject) -> None:
    raw = _valid_raw()
    # Replace a section, or a field of one profile, with an arbitrary value.
    if data.draw(st.booleans()):
        raw[data.draw(st.sampled_from(_SECTIONS))] = data.draw(_VALUES)
    else:
        prof = raw["profiles"]["explore"]  # type: ignore[index]
        field = data.draw(st.sampled_from([*prof, "extra"]))  # type: ignore[list-item]
        prof[field] = data.draw(_VALUES)  # type: ignore[index]
    text = yaml.safe_dump(raw, allow_unicode=True)
    # ... then damage the text itself: cut it, splice in characters or raw bytes.
    blob = text.encode("utf-8")
    cut = data.draw(st.integers(0, len(blob)))
    insert = data.draw(st.binary(max_size=6) | st.sampled_from([b"&a [*a]", b"\n*a", b"{", b": :", b"\t"]))
    blob = blob[:cut] + insert + blob[cut + data.draw(st.integers(0, 20)) :]
    path = tmp_path / "fuzz.yaml"
    path.write_bytes(blob)
    env = data.draw(st.sampled_from([{}, LLM_ENV]))
    try:
        cfg = load_config(path, env=env)
    except ConfigError as exc:
        assert str(path) in str(exc)
    else:
        assert isinstance(cfg, LabConfig) and cfg.source == str(path)


def test_a_parsed_config_is_kept_until_its_file_or_environment_changes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "profiles.yaml"
    raw = yaml.safe_load((REPO / "profiles.yaml").read_text())  # its prompts: the packaged ones
    path.write_text(yaml.safe_dump(raw))
    first = parsed_config(path)
    assert parsed_config(str(path)) is first  # one parse for the process's runs
    raw["profiles"]["explore"]["max_steps"] = first.profile("explore").max_steps + 1
    path.write_text(yaml.safe_dump(raw))
    changed = parsed_config(path)
    assert (
        changed is not first
        and changed.profile("explore").max_steps == first.profile("explore").max_steps + 1
    )
    monkeypatch.setenv("LIGHT_LLM_MODEL_ID", "other-light")
    light = parsed_config(path).models["light"]
    assert light is not None and light.model == "other-light"
