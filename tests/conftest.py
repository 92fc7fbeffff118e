"""Shared fixtures and helpers: the repo's configuration, small workspaces, answers, and scripted
launchers."""

from __future__ import annotations

import subprocess
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml

from subagent_lab.agents.launcher import SubagentLauncher
from subagent_lab.config.profiles import LabConfig, load_config
from subagent_lab.models.scripted import ScriptedModel, Turn

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(autouse=True)
def _no_llm_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """Environment overrides from the developer's shell must not leak into unit tests."""
    for prefix in ("LLM_", "LIGHT_LLM_"):
        for suffix in ("BASE_URL", "MODEL_ID", "API_KEY", "TOOL_PROTOCOL"):
            monkeypatch.delenv(prefix + suffix, raising=False)
    monkeypatch.delenv("SUBAGENT_LAB_CONFIG", raising=False)
    monkeypatch.delenv("SUBAGENT_LAB_RUNS", raising=False)


REAL_MODEL = (
    "this unit test reached for a real model ({what}); pass a ScriptedModel (or a model_factory) "
    "or mark the test `live`"
)
LOGIN_ANSWER: dict[str, Any] = {
    "status": "completed",
    "summary": "login is defined in app/auth.py and calls check_password.",
    "findings": ["login calls check_password"],
    "evidence": ["app/auth.py:4-5"],
    "unresolved_questions": [],
}
"""A valid explore answer about the ``workspace`` fixture's login (its evidence is real lines)."""
GOOD: dict[str, Any] = {
    **LOGIN_ANSWER,
    "summary": "login is defined in app/auth.py and checks the password hash.",
}
"""``LOGIN_ANSWER`` in the wording the launcher, agent, API and red-team tests send."""


def task_call(prompt: str, **extra: Any) -> tuple[str, dict[str, Any]]:
    """A parent's Task call (name and arguments) asking an explore child ``prompt``."""
    return ("Task", {"description": "explore job", "prompt": prompt, "subagent_type": "explore", **extra})


def write_files(root: Path, files: Mapping[str, str]) -> Path:
    """``files`` (relative path: text) written under ``root``, folders made; returns ``root``."""
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def git_in(repo: Path, *args: str) -> str:
    """``git -C repo ARGS``'s output, stripped, with a fixed identity and no user configuration."""
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@t", "HOME": str(repo), "PATH": "/usr/bin:/bin"}  # fmt: skip
    return subprocess.run(
        ["git", "-C", str(repo), *args], capture_output=True, text=True, check=True, env=env
    ).stdout.strip()


def copy_profiles(path: Path, trace_dir: Path, explore: Mapping[str, Any] | None = None) -> Path:
    """The repository's profiles.yaml written to ``path`` with its prompt files made absolute, its
    traces under ``trace_dir`` and ``explore`` (fields) laid over the explore profile; returns
    ``path``: a configuration file a sweep or the CLI can take by path."""
    raw = yaml.safe_load((REPO / "profiles.yaml").read_text())
    # Scripted turns answer themselves: the model writes the answer under `retrieval-start` (under
    # the shipped `rank` the harness writes it, and each judge call would take a scripted turn).
    raw["profiles"]["explore"].update({"scaffold": "retrieval-start", **(explore or {})})
    for prof in raw["profiles"].values():
        prof["system_prompt_file"] = str(REPO / prof["system_prompt_file"])
    raw["trace_dir"] = str(trace_dir)
    path.write_text(yaml.safe_dump(raw))
    return path


SHOP_TASK = "Where is the password checked when a user logs in? Start from `check_password`."
SHOP_FILES = {
    "app/auth.py": '''import hashlib


class Session:
    """A logged-in user's session."""

    def __init__(self, user):
        self.user = user

    def expire(self):
        self.user = None


def login(user, password):
    """Log a user in once the password is checked."""
    if not check_password(user, password):
        return None
    return Session(user)


def check_password(user, password):
    """Compare the password's hash with the stored one."""
    digest = hashlib.sha256(password.encode()).hexdigest()
    return digest == user.pw_hash
''',
    "app/views.py": '''from app.auth import login


def login_view(request):
    """The login page: checks the password and starts a session."""
    user = request.user
    return login(user, request.form["password"])
''',
}
"""A small shop whose login checks a password through a few units (``SHOP_TASK`` asks where): the
retrieval and ranking tests' workspace."""

EMBEDDED_ROOTS = ("http://127.0.0.1:8765", "http://localhost:8765")
"""The embedded server's address in the repo's profiles.yaml (and ServerConfig's default)."""
STAND_IN_SERVER_TESTS = frozenset({"test_server.py"})
"""Modules whose unit tests drive ``ensure_server`` on free ports with stand-in commands/servers."""


@pytest.fixture(autouse=True)
def _no_real_models(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """A unit test that forgets its scripted model fails at once with a clear message.

    Without this, the default model factory would start the embedded llama.cpp server (minutes of
    CPU), or quietly use one a developer left running. Blocked in tests not marked ``live``:
    ``server.ensure_server`` without a stand-in ``command`` (so the sweep's and the default
    factory's embedded path), and an ``OpenAIChatModel`` aimed at the embedded server's address.
    A model built for any other URL (the red-team fake OpenAI server on a free port) is untouched.
    ``pytest.fail`` raises a ``BaseException``, so no ``except Exception`` on the way turns it into
    a ``model_error`` row. The server lifecycle tests (``STAND_IN_SERVER_TESTS``) are exempt.
    """
    node = request.node
    if (
        node.get_closest_marker("live")
        or node.path.suffix == ".ipynb"
        or node.path.name in STAND_IN_SERVER_TESTS
    ):
        return
    from subagent_lab.local_models import server
    from subagent_lab.models import openai_chat

    real_ensure = server.ensure_server

    def ensure_server(config: LabConfig, *, command: object = None, **kwargs: object) -> object:
        if command is None:
            pytest.fail(REAL_MODEL.format(what=f"the embedded server at {config.server.base_url}"))
        return real_ensure(config, command=command, **kwargs)  # type: ignore[arg-type]

    real_init = openai_chat.OpenAIChatModel.__init__

    def init(self: openai_chat.OpenAIChatModel, *, base_url: str, **kwargs: object) -> None:
        urls = (base_url, str(kwargs.get("count_url") or ""))
        if any(url.startswith(EMBEDDED_ROOTS) for url in urls):
            pytest.fail(REAL_MODEL.format(what=f"an OpenAI client for the embedded server at {base_url}"))
        real_init(self, base_url=base_url, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(server, "ensure_server", ensure_server)
    monkeypatch.setattr(openai_chat.OpenAIChatModel, "__init__", init)


def with_aided_explore(cfg: LabConfig) -> LabConfig:
    """``cfg`` with its explore profile on the `aided` scaffold fields: tests whose scripted turns
    make every call themselves, written before the profile shipped `retrieval-start` (the harness's
    own Find and Search before the first action, the symbol tools of the simple interface)."""
    explore = cfg.profiles["explore"].model_copy(update=cfg.scaffold("aided").resolved())
    return cfg.model_copy(update={"profiles": {**cfg.profiles, "explore": explore}})


@pytest.fixture
def config(tmp_path: Path) -> LabConfig:
    cfg = load_config(REPO / "profiles.yaml", env={})
    # Scripted tests answer whenever they like and call the full tools with any path; the
    # small-model scaffold (min_tool_calls, constrained paths, the simple tools) has its own tests.
    # The explore profile ships `retrieval-start` (the harness runs Find and Search before the first
    # action); these tests script every call themselves, so they start from the `aided` fields.
    loose = {
        "min_tool_calls": 0, "tool_interface": "full", "constrain_paths": False,
        "finish_after_stale": 0, "read_after_hits": False, "absence_check": False, "cite_anchors": False,
        "task_paths": False, "read_outline": 0, "read_on": 0, "finish_after_reads": 0,
    }  # fmt: skip
    # A model's own tuning (model_overrides) is applied after the profile: loosen it the same way.
    aided = cfg.scaffold("aided").resolved()
    profiles = {
        name: p.model_copy(
            update={
                **(aided if name == "explore" else {}),
                **loose,
                "model_overrides": {
                    choice: {k: loose.get(k, v) for k, v in tuned.items()}
                    for choice, tuned in p.model_overrides.items()
                },
            }
        )
        for name, p in cfg.profiles.items()
    }
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


@pytest.fixture
def config_path(tmp_path: Path) -> str:
    """The repository's profiles.yaml copied to ``tmp_path`` (prompt files made absolute, traces
    under ``tmp_path/runs``): a configuration file a sweep can take by path."""
    # Scripted sweeps answer without the harness's opening retrieval: the explore profile as `aided`.
    aided = load_config(REPO / "profiles.yaml", env={}).scaffold("aided").resolved()
    return str(copy_profiles(tmp_path / "profiles.yaml", tmp_path / "runs", explore=aided))


@pytest.fixture
def rg_list_calls(monkeypatch: pytest.MonkeyPatch) -> list[tuple[object, ...]]:
    """Every ``rg --files`` a directory Grep starts (``tools.rg.listing._rg_list``), recorded as its
    arguments; rg still runs."""
    from subagent_lab.tools.rg import listing as rg_listing

    calls: list[tuple[object, ...]] = []
    real = rg_listing._rg_list

    def counted(*args: Any) -> tuple[list[str], bool]:
        calls.append(args)
        return real(*args)

    monkeypatch.setattr(rg_listing, "_rg_list", counted)
    return calls
