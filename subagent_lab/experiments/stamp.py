"""Provenance of a sweep: what code, configuration, prompts, tasks and weights produced its rows.

Every row carries these hashes, and a sweep directory is keyed by them as well as by its grid: a
sweep of the same grid after a change of code, ``profiles.yaml``, a prompt or a task starts a new
directory (and says which hashes moved) instead of resuming into rows another version produced.

Seeds: repeat ``i`` of a (task, model) cell runs with ``derive_seed(base, task, model, i)``, a
stable hash, so sampled repeats of different tasks never share one seed (a shared seed correlated
the sampled answers of a repeat across tasks). ``seeding="base"`` keeps the old ``base + i``.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
from collections.abc import Iterable
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from subagent_lab.analysis.seeds import derive_seed
from subagent_lab.bench.suite import BenchTask
from subagent_lab.config.profiles import LabConfig
from subagent_lab.core.types import FLOOR_CHOICES, ModelChoice

Seeding = Literal["derived", "base"]
__all__ = ["Provenance", "Seeding", "derive_seed", "provenance", "row_stamp", "suite_hash", "weights_id"]
PACKAGE_ROOT = Path(__file__).resolve().parents[1]


class Provenance(BaseModel):
    """The hashes a sweep's rows are stamped with (short SHA-256 prefixes unless said otherwise)."""

    model_config = ConfigDict(frozen=True)

    code_version: str
    """``git describe`` of the package's checkout when there is one, else ``unknown``."""
    code_hash: str
    """Over every ``.py`` file of the package, by content: uncommitted changes count."""
    config_hash: str
    """Over the resolved ``LabConfig`` (profiles with their prompt texts, models, presets, server)."""
    prompts_hash: str
    """Over the system prompts of every profile and agent, as loaded."""
    suite_hash: str
    """Over the tasks the sweep runs (ids, prompts, gold, keywords, splits), in order."""
    weights: dict[str, str]
    """Model choice -> the weights' full SHA-256 for embedded models, ``endpoint:<model id>`` else."""

    def identity(self) -> dict[str, Any]:
        """What decides whether two sweeps may share rows: every hash, not the version label (a
        commit that changes no code, or a commit made while a sweep runs, changes no result)."""
        return self.model_dump(exclude={"code_version"})

    def key(self) -> str:
        """One short hash over ``identity``."""
        return _sha(json.dumps(self.identity(), sort_keys=True))[:8]

    def same(self, other: Provenance) -> bool:
        return self.identity() == other.identity()

    def for_tasks(self, tasks: Iterable[BenchTask]) -> Provenance:
        """This provenance with ``suite_hash`` over ``tasks`` only (a study stamps each split's rows
        with its own suite), every other hash as computed once for the whole grid."""
        return self.model_copy(update={"suite_hash": suite_hash(tasks)})

    def differences(self, other: Provenance) -> list[str]:
        """The identity fields whose values differ (sorted)."""
        mine, theirs = self.identity(), other.identity()
        return sorted(k for k in mine if mine[k] != theirs.get(k))


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


@lru_cache(maxsize=4)
def _code_hash(root: Path) -> str:
    digest = hashlib.sha256()
    for path in sorted(root.rglob("*.py")):
        digest.update(str(path.relative_to(root)).encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()[:12]


@lru_cache(maxsize=4)
def code_version(root: Path = PACKAGE_ROOT) -> str:
    """``git describe --always --dirty`` of the checkout holding ``root``, or ``unknown``."""
    try:
        out = subprocess.run(
            ["git", "-C", str(root), "describe", "--always", "--dirty", "--abbrev=12"],
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return out.stdout.strip() if out.returncode == 0 and out.stdout.strip() else "unknown"


def weights_id(lab: LabConfig, choice: ModelChoice) -> str:
    """The weights a choice runs on: the embedded file's SHA-256, else the endpoint and model id."""
    if choice in FLOOR_CHOICES:
        return str(choice)
    used, cfg, _ = lab.resolve_model(choice)
    if cfg.base_url is None:
        from subagent_lab.local_models.weights import SPECS

        spec = SPECS.get(used)
        if spec is not None and spec.alias == cfg.model:
            return spec.sha256
    return f"endpoint:{lab.endpoint_url(cfg)}|{cfg.model}"


def provenance(lab: LabConfig, tasks: Iterable[BenchTask], models: Iterable[ModelChoice]) -> Provenance:
    """The provenance of running ``tasks`` x ``models`` under ``lab`` with this checkout."""
    config = lab.model_dump(mode="json", exclude={"source", "trace_dir"})  # where traces go is no input
    prompts = {
        **{f"profile:{n}": p.system_prompt for n, p in lab.profiles.items()},
        **{f"agent:{n}": a.system_prompt for n, a in lab.agents.items()},
    }
    return Provenance(
        code_version=code_version(),
        code_hash=_code_hash(PACKAGE_ROOT),
        config_hash=_sha(json.dumps(config, sort_keys=True, default=str))[:12],
        prompts_hash=_sha(json.dumps(prompts, sort_keys=True))[:12],
        suite_hash=suite_hash(tasks),
        weights={choice: weights_id(lab, choice) for choice in dict.fromkeys(models)},
    )


def suite_hash(tasks: Iterable[BenchTask]) -> str:
    """``Provenance.suite_hash`` of ``tasks``, in order."""
    suite = [t.model_dump(mode="json") for t in tasks]
    return _sha(json.dumps(suite, sort_keys=True, default=str))[:12]


def row_stamp(prov: Provenance, choice: ModelChoice) -> dict[str, Any]:
    """The provenance columns of one row."""
    return {
        "code_version": prov.code_version,
        "code_hash": prov.code_hash,
        "config_hash": prov.config_hash,
        "prompts_hash": prov.prompts_hash,
        "suite_hash": prov.suite_hash,
        "weights_sha256": prov.weights.get(choice, ""),
        "provenance": prov.key(),
    }
