"""Scaffold presets: one preset is one scaffold for every model, errors name the field, grammar-only
aids are refused where no grammar is sent, and sweeps record which preset ran."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from conftest import REPO

from subagent_lab.config.profiles import RuntimeProfile, load_config
from subagent_lab.config.scaffolds import PLAIN_FIELDS, SCAFFOLD_FIELDS, scaffold_hash
from subagent_lab.core.types import ConfigError
from subagent_lab.experiments.sweep import SweepSpec, plan_runs


def _write(tmp_path: Path, edit: dict) -> str:
    raw = yaml.safe_load((REPO / "profiles.yaml").read_text())
    for prof in raw["profiles"].values():
        prof["system_prompt_file"] = str(REPO / prof["system_prompt_file"])
    for agent in raw.get("agents", {}).values():
        agent["system_prompt_file"] = str(REPO / agent["system_prompt_file"])
    for key, value in edit.items():
        raw[key] = value
    path = tmp_path / "profiles.yaml"
    path.write_text(yaml.safe_dump(raw))
    return str(path)


def test_the_shipped_presets_resolve_every_scaffold_field() -> None:
    lab = load_config(REPO / "profiles.yaml", env={})
    for name in ("plain", "aided", "light-tuned"):
        fields = lab.scaffold(name).resolved()
        assert set(fields) == SCAFFOLD_FIELDS
    plain = lab.scaffold("plain").resolved()
    assert plain == PLAIN_FIELDS
    assert not plain["first_search"] and not plain["evidence_from_seen"] and not plain["finish_after_reads"]
    assert scaffold_hash(lab.scaffold("aided").resolved()) != scaffold_hash(plain)


def test_a_preset_overrides_a_models_own_tuning_so_both_models_run_one_scaffold() -> None:
    lab = load_config(REPO / "profiles.yaml", env={})
    profile = lab.profile("explore")
    aided = lab.scaffold("aided").resolved()
    resolved = {}
    for choice in ("light", "main"):
        tuned = profile.model_overrides.get(choice, {})
        run = RuntimeProfile.model_validate({**profile.model_dump(), **tuned, **aided})
        resolved[choice] = {k: getattr(run, k) for k in SCAFFOLD_FIELDS}
    assert resolved["light"] == resolved["main"] == aided


def test_an_unknown_preset_or_field_is_a_config_error_naming_it(tmp_path: Path) -> None:
    lab = load_config(REPO / "profiles.yaml", env={})
    with pytest.raises(ConfigError, match=r"unknown scaffold 'fancy'.*plain"):
        lab.scaffold("fancy")
    bad = _write(tmp_path, {"scaffolds": {"mine": {"fields": {"max_steps": 3}}}})
    with pytest.raises(ConfigError, match=r"scaffolds\.mine\.fields\.max_steps: not a scaffold field"):
        load_config(bad, env={})
    wrong = _write(tmp_path, {"scaffolds": {"mine": {"fields": {"read_window": -1}}}})
    with pytest.raises(ConfigError, match=r"scaffolds\.mine\.fields.*read_window"):
        load_config(wrong, env={})
    with pytest.raises(ConfigError, match=r"scaffolds\.plain: built in"):
        load_config(_write(tmp_path, {"scaffolds": {"plain": {"fields": {}}}}), env={})


def test_grammar_only_aids_run_as_checks_on_an_endpoint_without_constrained_output(tmp_path: Path) -> None:
    raw = yaml.safe_load((REPO / "profiles.yaml").read_text())
    models = raw["models"]
    models["main"]["constrain_output"] = False
    lab = load_config(_write(tmp_path, {"models": models}), env={})
    grammar, checked = lab.grammar_aids(lab.scaffold("aided").resolved(), "main")
    assert grammar == [] and "evidence_from_seen" in checked  # no longer refused: checked instead
    assert lab.grammar_aids(lab.scaffold("plain").resolved(), "main") == ([], [])
    grammar, checked = lab.grammar_aids(lab.scaffold("aided").resolved(), "light")  # light has a grammar
    assert checked == [] and "evidence_from_seen" in grammar


def test_a_sweep_plans_every_model_under_every_preset_and_names_it(tmp_path: Path) -> None:
    lab = load_config(REPO / "profiles.yaml", env={})
    spec = SweepSpec(tasks=("smoke",), models=("none", "light", "main"), scaffolds=("plain", "aided"))
    runs = plan_runs(spec, config_path=None, out=tmp_path, cache=False, lab=lab)
    cells = {(r.model, r.scaffold) for r in runs}
    assert cells == {(m, s) for m in ("none", "light", "main") for s in ("plain", "aided")}
    assert all(r.scaffold_fields == lab.scaffold(r.scaffold or "").resolved() for r in runs)
    assert len({r.run_key for r in runs}) == len(runs)
    # Seeds are per (task, model, repeat): two tasks of one repeat never share one.
    light_plain = [r for r in runs if r.model == "light" and r.scaffold == "plain"]
    assert len({r.seed for r in light_plain}) == len(light_plain)
    assert {r.stamp["weights_sha256"] for r in runs if r.model == "none"} == {"none"}
    assert all(len(r.stamp["weights_sha256"]) == 64 for r in runs if r.model != "none")


def test_a_launch_runs_grammar_only_aids_as_checks_without_a_grammar(tmp_path: Path, workspace: Path) -> None:
    from subagent_lab.agents.launcher import SubagentLauncher, SubagentRequest
    from subagent_lab.models.baseline import BaselineModel

    raw = yaml.safe_load((REPO / "profiles.yaml").read_text())
    models = raw["models"]
    models["light"]["constrain_output"] = False
    lab = load_config(_write(tmp_path, {"models": models}), env={})
    launcher = SubagentLauncher(
        lab, workspace, model_factory=lambda c, cfg: BaselineModel(), trace_dir=tmp_path
    )
    aided = lab.scaffold("aided").resolved()
    checked = launcher.launch(SubagentRequest(task="Where is login?", model="light", overrides=aided))
    assert checked.terminal_reason != "crashed" and "constrain_paths" in checked.aids_checked
    plain = lab.scaffold("plain").resolved()
    result = launcher.launch(SubagentRequest(task="Where is login?", model="light", overrides=plain))
    assert result.terminal_reason == "completed"


def test_rows_count_harness_taken_actions_apart_from_model_steps(tmp_path: Path) -> None:
    from subagent_lab.experiments.sweep import run_sweep
    from subagent_lab.models.baseline import BaselineModel

    spec = SweepSpec(name="forced", tasks=("yaml-safe-load",), models=("none",), scaffolds=("light-tuned",))
    df = run_sweep(spec, config_path=_write(tmp_path, {}), out_dir=tmp_path / "sw",
                   model_factory=lambda c, cfg: BaselineModel(), progress=False)  # fmt: skip
    row = df.iloc[0]
    # light-tuned finishes after one Read without asking the model: that finish is no model step.
    assert row["forced_actions"] >= 1
    assert row["model_steps"] + row["forced_actions"] == row["steps"]
    assert "finish_when" in row["policies"] or "finish" in row["policies"]
