"""Shared fixtures: the repo's configuration, a small workspace, and scripted launchers."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path

import pytest

from subagent_lab.launcher import SubagentLauncher
from subagent_lab.models.scripted import ScriptedModel, Turn
from subagent_lab.profiles import LabConfig, load_config

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(autouse=True)
def _no_llm_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """Environment overrides from the developer's shell must not leak into unit tests."""
    for prefix in ("LLM_", "LIGHT_LLM_"):
        for suffix in ("BASE_URL", "MODEL_ID", "API_KEY"):
            monkeypatch.delenv(prefix + suffix, raising=False)
    monkeypatch.delenv("SUBAGENT_LAB_CONFIG", raising=False)


@pytest.fixture
def config(tmp_path: Path) -> LabConfig:
    cfg = load_config(REPO / "profiles.yaml", env={})
    # Scripted tests answer whenever they like and call the full tools with any path; the
    # small-model scaffold (min_tool_calls, constrained paths, the simple tools) has its own tests.
    loose = {
        "min_tool_calls": 0, "tool_interface": "full", "constrain_paths": False,
        "finish_after_stale": 0, "read_after_hits": False,
    }  # fmt: skip
    profiles = {name: p.model_copy(update=loose) for name, p in cfg.profiles.items()}
    return cfg.model_copy(update={"trace_dir": str(tmp_path / "runs"), "source": None, "profiles": profiles})


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    (root / "app").mkdir(parents=True)
    (root / "app" / "auth.py").write_text(
        "import hashlib\n\n\ndef login(user, password):\n    return check_password(user, password)\n\n\n"
        "def check_password(user, password):\n"
        "    return hashlib.sha256(password.encode()).hexdigest() == user.pw\n"
    )
    (root / "app" / "views.py").write_text("from app.auth import login\n\n\ndef index():\n    return 'hi'\n")
    (root / "README.md").write_text("# demo\nAuthentication lives in app/auth.py.\n")
    return root


LauncherFactory = Callable[..., tuple[SubagentLauncher, ScriptedModel]]


@pytest.fixture
def make_launcher(config: LabConfig, workspace: Path, tmp_path: Path) -> LauncherFactory:
    """Build a launcher whose every model is one shared ScriptedModel."""

    def make(
        turns: Iterable[Turn], cfg: LabConfig | None = None, **kwargs: object
    ) -> tuple[SubagentLauncher, ScriptedModel]:
        model = ScriptedModel(turns)
        launcher = SubagentLauncher(
            cfg or config,
            workspace,
            model_factory=lambda choice, mcfg: model,
            trace_dir=tmp_path / "runs",
            **kwargs,  # type: ignore[arg-type]
        )
        return launcher, model

    return make
