"""Provenance: rows carry what produced them, and a sweep never resumes into rows of another version."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from conftest import REPO

from subagent_lab.config.profiles import load_config
from subagent_lab.experiments.stamp import Provenance, provenance
from subagent_lab.experiments.sweep import SweepSpec, load_results, run_sweep, sweep_dir
from subagent_lab.models.baseline import BaselineModel

SPEC = SweepSpec(name="prov", tasks=("yaml-safe-load",), models=("none",), scaffolds=("plain",))


def _config(tmp_path: Path, max_steps: int) -> str:
    raw = yaml.safe_load((REPO / "profiles.yaml").read_text())
    for section in ("profiles", "agents"):
        for prof in raw.get(section, {}).values():
            prof["system_prompt_file"] = str(REPO / prof["system_prompt_file"])
    raw["profiles"]["explore"]["max_steps"] = max_steps
    path = tmp_path / f"profiles-{max_steps}.yaml"
    path.write_text(yaml.safe_dump(raw))
    return str(path)


def _factory(choice: str, cfg: object) -> BaselineModel:
    return BaselineModel()


def test_rows_carry_the_hashes_of_what_produced_them(tmp_path: Path) -> None:
    config = _config(tmp_path, 12)
    df = run_sweep(SPEC, config_path=config, out_dir=tmp_path / "sw", model_factory=_factory, progress=False)
    prov = provenance(load_config(config), [], ["none"])
    row = df.iloc[0]
    assert row["config_hash"] == prov.config_hash and row["code_hash"] == prov.code_hash
    assert row["weights_sha256"] == "none" and row["scaffold"] == "plain" and len(row["scaffold_hash"]) == 12
    recorded = Provenance.model_validate_json((sweep_dir(SPEC, tmp_path / "sw", load_config(config)) /
                                               "provenance.json").read_text())  # fmt: skip
    assert recorded.config_hash == prov.config_hash


def test_a_changed_config_starts_a_directory_of_its_own_and_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "sw"
    first, second = _config(tmp_path, 12), _config(tmp_path, 11)
    run_sweep(SPEC, config_path=first, out_dir=out, model_factory=_factory, progress=False)
    old_dir = sweep_dir(SPEC, out, load_config(first))
    capsys.readouterr()
    again = run_sweep(SPEC, config_path=second, out_dir=out, model_factory=_factory, progress=False)
    new_dir = sweep_dir(SPEC, out, load_config(second))
    assert new_dir != old_dir and new_dir.name.startswith(old_dir.name + "-")
    assert "config_hash" in capsys.readouterr().out  # it says which hash moved
    assert len(again) == 1 and len(load_results(old_dir)) == 1  # neither directory holds the other's row
    assert again.iloc[0]["max_steps"] == 11
    # The same config again resumes its own directory: nothing runs twice.
    calls: list[str] = []
    run_sweep(SPEC, config_path=second, out_dir=out, model_factory=_factory, progress=False,
              on_row=lambda row: calls.append(row["run_key"]))  # fmt: skip
    assert calls == []
