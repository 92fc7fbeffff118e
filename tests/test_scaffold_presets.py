"""Scaffold presets: one preset is one scaffold for every model, errors name the field, grammar-only
aids are refused where no grammar is sent, and sweeps record which preset ran."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml
from conftest import REPO

from subagent_lab.agents.launcher import SubagentLauncher, SubagentRequest
from subagent_lab.config import presets, profiles
from subagent_lab.config.agent_profile import apply_overrides
from subagent_lab.config.profiles import RuntimeProfile, load_config
from subagent_lab.config.scaffolds import PLAIN, Scaffold, scaffold_hash
from subagent_lab.core.policy import FINISH, Policy, RunContext, TaskShape
from subagent_lab.core.trace import RunStarted, read_trace
from subagent_lab.core.types import ConfigError
from subagent_lab.experiments.sweep import SweepSpec, plan_runs
from subagent_lab.models.scripted import ScriptedModel, final, tool_call
from subagent_lab.scaffold import specs
from subagent_lab.scaffold.task_shaping import TaskShaping


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


def test_the_shipped_presets_resolve_to_policy_lists() -> None:
    lab = load_config(REPO / "profiles.yaml", env={})
    assert lab.scaffold("plain").scaffold == PLAIN
    assert [name for name, _ in PLAIN.specs()] == ["SkipRepeated", "CiteFromSeen", "Grace"]
    assert not PLAIN.param("CiteFromSeen", "constrain") and not PLAIN.has("FirstSearch")
    aided = lab.scaffold("aided").scaffold
    assert aided.param("CiteFromSeen", "margin") == 2 and aided.has("AbsenceCheck")
    assert scaffold_hash(aided) != scaffold_hash(PLAIN)
    # extends: symbols-units is symbols-guided with one parameter more, and nothing else
    guided, units = lab.scaffold("symbols-guided").scaffold, lab.scaffold("symbols-units").scaffold
    assert set(units.labels()) - set(guided.labels()) == {"CiteFromSeen.units=True"}


def test_loading_profiles_yaml_resolves_its_presets_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """One resolution of the file's presets serves its profiles' named scaffolds and
    ``LabConfig.scaffold``: loading does not resolve them again after validation."""
    real = presets.resolve_presets
    calls: list[list[str]] = []

    def spy(
        written: Mapping[str, presets.ScaffoldPreset], known: Mapping[str, Scaffold] | None = None
    ) -> dict[str, Scaffold]:
        if known is None:  # a scaffold written in place resolves over the file's presets (known=)
            calls.append(sorted(written))
        return real(written, known)

    for module in (presets, profiles):  # every name the resolver is called through
        monkeypatch.setattr(module, "resolve_presets", spy)
    lab = load_config(REPO / "profiles.yaml", env={})
    assert lab.scaffolds and calls == [sorted(lab.scaffolds)]
    assert lab.scaffold("rank").scaffold == lab.profile("explore").scaffold
    assert len(calls) == 1  # asking for a preset resolves nothing more


def test_a_preset_overrides_a_models_own_tuning_so_both_models_run_one_scaffold() -> None:
    lab = load_config(REPO / "profiles.yaml", env={})
    profile = lab.profile("explore").model_copy(update={"model_overrides": {"light": {"read_window": 20}}})
    aided = lab.scaffold("aided").resolved()
    resolved = {}
    for choice in ("light", "main"):
        tuned = profile.model_overrides.get(choice, {})
        run = apply_overrides(RuntimeProfile, profile, tuned, aided, where="test")
        resolved[choice] = run.scaffold
    assert resolved["light"] == resolved["main"] == lab.scaffold("aided").scaffold


def test_an_unknown_preset_policy_or_parameter_is_a_config_error_naming_it(tmp_path: Path) -> None:
    lab = load_config(REPO / "profiles.yaml", env={})
    with pytest.raises(ConfigError, match=r"unknown scaffold 'fancy'.*plain"):
        lab.scaffold("fancy")
    bad = _write(tmp_path, {"scaffolds": {"mine": {"policies": ["Telepathy"]}}})
    with pytest.raises(
        ConfigError, match=r"scaffolds\.mine: .*unknown policy 'Telepathy'; known: SymbolTools"
    ):
        load_config(bad, env={})
    param = _write(tmp_path, {"scaffolds": {"mine": {"policies": [{"CiteFromSeen": {"margn": 2}}]}}})
    with pytest.raises(ConfigError, match=r"scaffolds\.mine: .*CiteFromSeen\.margn: not a parameter.*margin"):
        load_config(param, env={})
    typed = _write(tmp_path, {"scaffolds": {"mine": {"policies": [{"RetrievalStart": {"k": "four"}}]}}})
    with pytest.raises(ConfigError, match=r"scaffolds\.mine: .*RetrievalStart\.k: .*integer"):
        load_config(typed, env={})
    shared = _write(
        tmp_path, {"scaffolds": {"mine": {"policies": [{"RetrievalStart": {"max_evidence": 2}}]}}}
    )
    with pytest.raises(ConfigError, match=r"RetrievalStart\.max_evidence: set in CiteFromSeen\.max_evidence"):
        load_config(shared, env={})
    wrong = _write(tmp_path, {"scaffolds": {"mine": {"observation": {"read_window": -1}}}})
    with pytest.raises(ConfigError, match=r"scaffolds\.mine: .*read_window"):
        load_config(wrong, env={})
    loop = _write(tmp_path, {"scaffolds": {"a": {"extends": "b"}, "b": {"extends": "a"}}})
    with pytest.raises(ConfigError, match=r"scaffolds\.a\.extends: a circle"):
        load_config(loop, env={})
    nowhere = _write(tmp_path, {"scaffolds": {"a": {"extends": "zzz"}}})
    with pytest.raises(ConfigError, match=r"scaffolds\.a\.extends: unknown preset 'zzz'"):
        load_config(nowhere, env={})
    with pytest.raises(ConfigError, match=r"scaffolds\.plain: built in"):
        load_config(_write(tmp_path, {"scaffolds": {"plain": {}}}), env={})


def test_a_profile_names_its_scaffold_or_writes_it_in_place(tmp_path: Path) -> None:
    raw = yaml.safe_load((REPO / "profiles.yaml").read_text())
    profiles = raw["profiles"]
    for prof in profiles.values():
        prof["system_prompt_file"] = str(REPO / prof["system_prompt_file"])
    profiles["plan"]["scaffold"] = [{"RequireToolFirst": {"n": 2}}, "PathsFromSeen"]
    profiles["verification"]["scaffold"] = {"extends": "aided", "policies": [{"AbsenceCheck": False}]}
    lab = load_config(_write(tmp_path, {"profiles": profiles}), env={})
    plan, check = lab.profile("plan").scaffold, lab.profile("verification").scaffold
    assert plan.param("RequireToolFirst", "n") == 2 and plan.has("Grace")  # over plain
    assert not check.has("AbsenceCheck") and check.param("CiteFromSeen", "anchors")
    profiles["plan"]["scaffold"] = "nope"
    with pytest.raises(ConfigError, match=r"profiles\.plan\.scaffold: unknown preset 'nope'"):
        load_config(_write(tmp_path, {"profiles": profiles}), env={})


def test_grammar_only_aids_run_as_checks_on_an_endpoint_without_constrained_output(tmp_path: Path) -> None:
    raw = yaml.safe_load((REPO / "profiles.yaml").read_text())
    models = raw["models"]
    models["main"]["constrain_output"] = False
    lab = load_config(_write(tmp_path, {"models": models}), env={})
    grammar, checked = lab.grammar_aids(lab.scaffold("aided").scaffold, "main")
    assert grammar == [] and "CiteFromSeen.constrain" in checked  # no longer refused: checked instead
    assert lab.grammar_aids(lab.scaffold("plain").scaffold, "main") == ([], [])
    grammar, checked = lab.grammar_aids(lab.scaffold("aided").scaffold, "light")  # light has a grammar
    assert checked == [] and "CiteFromSeen.constrain" in grammar


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
    assert checked.terminal_reason != "crashed" and "PathsFromSeen" in checked.aids_checked
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


@dataclass
class Banner(Policy):
    """A new aid, as a test writes one: a line at the end of the child's first message."""

    text: str = "hello"
    name = "banner"

    def shape_task(self, ctx: RunContext, shape: TaskShape) -> None:
        shape.sections.append(f"Banner: {self.text}")


def test_adding_an_aid_is_one_file_and_one_place_in_the_order(
    tmp_path: Path, workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The one place: after TaskShaping in ORDER. Nothing else names the new aid: no profile field,
    # no list of flags, no preset copied; profiles.yaml names it by class with its parameter.
    order = list(specs.ORDER)
    order.insert(order.index(TaskShaping) + 1, Banner)
    monkeypatch.setattr(specs, "ORDER", order)
    shipped = yaml.safe_load((REPO / "profiles.yaml").read_text())["scaffolds"]
    banner = {"extends": "aided", "policies": [{"Banner": {"text": "hi"}}]}
    path = _write(tmp_path, {"scaffolds": {**shipped, "bannered": banner}})
    lab = load_config(path, env={})
    assert lab.scaffold("bannered").scaffold.param("Banner", "text") == "hi"
    answer = {"status": "completed", "summary": "s", "findings": ["f"], "evidence": ["app/auth.py:4"],
              "unresolved_questions": []}  # fmt: skip
    grep = tool_call("Grep", pattern="login", path=".")
    model = ScriptedModel([grep, tool_call(FINISH), final({"found": "yes"}), final(answer)])
    launcher = SubagentLauncher(lab, workspace, model_factory=lambda c, cfg: model, trace_dir=tmp_path)
    result = launcher.launch(
        SubagentRequest(task="Where is login?", overrides=lab.scaffold("bannered").resolved())
    )
    assert "Banner: hi" in str(model.requests[0].messages[1].content)
    assert result.policies.index("banner") == result.policies.index("task_shaping") + 1
    [start] = [e for e in read_trace(result.trace_path) if isinstance(e, RunStarted)]
    assert {"policy": "Banner", "params": {"text": "hi"}} in start.profile_fields["scaffold"]["policies"]
    # and a sweep override addresses its parameter
    tuned = launcher.resolve_profile(
        SubagentRequest(task="-", overrides={**lab.scaffold("bannered").resolved(), "Banner.text": "yo"})
    )
    assert tuned.scaffold.param("Banner", "text") == "yo"


def test_old_flat_profiles_load_through_the_legacy_mapper_as_the_same_scaffolds(tmp_path: Path) -> None:
    """The profiles.yaml of 574c9e3 (flat aid fields, presets as flat `fields:`) resolves to the very
    scaffolds the spec lists of today's file resolve to: every profile and every preset."""
    old = yaml.safe_load((REPO / "tests" / "fixtures" / "profiles-flat-574c9e3.yaml").read_text())
    for prof in old["profiles"].values():
        prof["system_prompt_file"] = str(REPO / prof["system_prompt_file"])
    (tmp_path / "old.yaml").write_text(yaml.safe_dump(old))
    then, now = load_config(tmp_path / "old.yaml", env={}), load_config(REPO / "profiles.yaml", env={})
    # Presets added after it whose aid has no flat key (issue 49's RankStart) are today's only.
    assert set(then.scaffolds) == set(now.scaffolds) - {"rank", "rank-explore"}
    for name in ("plain", "base", *then.scaffolds):
        assert then.scaffold(name).scaffold == now.scaffold(name).scaffold, name
    for name, profile in now.profiles.items():
        # The explore profile ships `rank` since issue 49; the old file's explore ran retrieval-start.
        expected = now.scaffold("retrieval-start").scaffold if name == "explore" else profile.scaffold
        assert then.profile(name).scaffold == expected, name
    # flat keys still address the scaffold in an override, in the order written
    flat = {"cite_margin": 3, "absence_check": False}
    explore = apply_overrides(RuntimeProfile, now.profile("explore"), flat, {"read_window": 12}, where="test")
    assert explore.scaffold.param("CiteFromSeen", "margin") == 3 and not explore.scaffold.has("AbsenceCheck")
    assert explore.scaffold.observation.read_window == 12


def test_a_child_profile_holds_no_aid_switch_and_no_observation_size() -> None:
    from subagent_lab.config.legacy import FLAT, SIZES

    assert set(RuntimeProfile.model_fields) & (set(FLAT) | SIZES) == set()
    # ... and each is reached only through the scaffold: the flat name folds in, the field is gone
    explore = load_config(REPO / "profiles.yaml", env={}).profile("explore")
    changed = explore.model_copy(update={"cite_margin": 5, "read_window": 9})
    assert changed.scaffold.param("CiteFromSeen", "margin") == 5
    assert changed.scaffold.observation.read_window == 9
    assert "cite_margin" not in changed.model_dump() and "read_window" not in changed.model_dump()


def test_check_names_each_profiles_scaffold_and_lists_each_presets_policies(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from subagent_lab.cli.main import main

    assert main(["check"]) == 0  # the repository's profiles.yaml
    out = capsys.readouterr().out
    assert "profile explore:" in out and "scaffold=rank" in out and "scaffold=base" in out
    assert "scaffold plain: SkipRepeated, CiteFromSeen, Grace" in out
