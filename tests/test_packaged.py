"""The defaults inside the package: the shipped profiles.yaml and prompts as package data, the
configuration found from the working directory, a user's file extending the packaged one, traces
under the working directory's runs/, and the built wheel running the README's lines elsewhere."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import venv
from pathlib import Path

import pytest
import yaml
from conftest import REPO, write_files

import subagent_lab as sl
from subagent_lab.config.packaged import DEFAULTS_DIR, PACKAGED_CONFIG
from subagent_lab.config.parsed import parsed_config
from subagent_lab.config.profiles import config_json_schema, load_config
from subagent_lab.core.types import ConfigError

CODE = {"app/auth.py": "def login(user, password):\n    return check_password(user, password)\n"}


def test_the_repository_copies_equal_the_packaged_defaults() -> None:
    """The top-level profiles.yaml and prompts/ are the user-facing copies of the package's."""
    sync = "copy the edited file over the other: the packaged defaults and the repository's differ"
    assert (REPO / "profiles.yaml").read_text() == PACKAGED_CONFIG.read_text(), sync
    packaged = sorted(p.name for p in (DEFAULTS_DIR / "prompts").glob("*.md"))
    assert packaged == sorted(p.name for p in (REPO / "prompts").glob("*.md")) and packaged
    for name in packaged:
        assert (REPO / "prompts" / name).read_text() == (DEFAULTS_DIR / "prompts" / name).read_text(), sync


def test_without_a_file_of_its_own_a_folder_reads_the_packaged_defaults(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    lab = load_config()
    assert lab.source == str(PACKAGED_CONFIG) and "JSON" in lab.profile("explore").system_prompt
    assert lab.trace_root() == tmp_path / "runs"  # never the install's or the clone's runs/
    assert parsed_config() is parsed_config()  # the sweeps' cached parse finds the same file


def test_traces_go_to_the_working_directory_whatever_file_configures(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The repository's own file, named explicitly, still sends traces to the working directory."""
    work = write_files(tmp_path / "work", CODE)
    monkeypatch.chdir(work)
    result = sl.explore("Where is login?", ".", "none", config=REPO / "profiles.yaml", max_steps=3)
    assert Path(result.trace_path).is_relative_to(work / "runs"), result.trace_path
    monkeypatch.setenv("SUBAGENT_LAB_RUNS", str(tmp_path / "elsewhere"))
    result = sl.explore("Where is login?", ".", "none", max_steps=3)
    assert Path(result.trace_path).is_relative_to(tmp_path / "elsewhere"), result.trace_path


def test_a_users_file_extends_and_overrides_the_defaults(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "prompts").mkdir()
    (tmp_path / "prompts" / "scout.md").write_text("You scout. Answer with one JSON object.\n")
    explore = yaml.safe_load(PACKAGED_CONFIG.read_text())["profiles"]["explore"]
    own = {
        "extends": "defaults",
        "models": {"light": None},  # replaced: light falls back to main
        "server": {"port": 9999},  # field by field: the packaged host stays
        "profiles": {
            "explore": {**explore, "max_steps": 5},  # replaced; its prompt file: the packaged one
            "scout": {**explore, "system_prompt_file": "prompts/scout.md", "max_steps": 4},
        },
    }
    (tmp_path / "profiles.yaml").write_text(yaml.safe_dump(own))
    monkeypatch.chdir(tmp_path)
    lab = load_config()
    packaged = load_config(PACKAGED_CONFIG)
    assert lab.source == str(tmp_path / "profiles.yaml")
    assert lab.models["light"] is None and lab.models["main"] == packaged.models["main"]
    assert (lab.server.port, lab.server.host) == (9999, packaged.server.host)
    assert lab.profile("explore").max_steps == 5
    assert lab.profile("explore").system_prompt == packaged.profile("explore").system_prompt
    assert lab.profile("scout").system_prompt.startswith("You scout.")
    assert lab.profile("plan") == packaged.profile("plan") and lab.agents == packaged.agents
    assert set(lab.scaffolds) == set(packaged.scaffolds)


def test_a_partial_file_without_extends_says_how_to_extend(tmp_path: Path) -> None:
    path = tmp_path / "profiles.yaml"
    path.write_text("server: {port: 9999}\n")
    with pytest.raises(ConfigError, match=r"start the file with `extends: defaults`"):
        load_config(path, env={})
    path.write_text("extends: mine.yaml\n")
    with pytest.raises(ConfigError, match=r"extends: only 'defaults'"):
        load_config(path, env={})
    assert config_json_schema()["properties"]["extends"]["const"] == "defaults"


def test_a_missing_configuration_names_every_place_looked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    for given, env in (
        (tmp_path / "gone.yaml", {}),
        (None, {"SUBAGENT_LAB_CONFIG": str(tmp_path / "gone.yaml")}),
    ):
        with pytest.raises(ConfigError) as err:
            load_config(given, env=env)
        message = str(err.value)
        for place in (
            "config=",
            "$SUBAGENT_LAB_CONFIG",
            str(tmp_path / "profiles.yaml"),
            str(PACKAGED_CONFIG),
        ):
            assert place in message, message
        assert str(tmp_path / "gone.yaml") in message and "\n" not in message


def test_a_prompt_file_not_beside_the_file_is_the_packaged_one(tmp_path: Path) -> None:
    path = tmp_path / "profiles.yaml"
    shutil.copy(REPO / "profiles.yaml", path)  # names prompts/*.md; none beside it here
    lab = load_config(path, env={})
    assert lab.profile("explore").system_prompt == (DEFAULTS_DIR / "prompts" / "explore.md").read_text()
    assert (
        lab.agents["main"].resolve_system_prompt(lab.source)
        == (DEFAULTS_DIR / "prompts" / "main.md").read_text()
    )
    (tmp_path / "prompts").mkdir()
    (tmp_path / "prompts" / "explore.md").write_text("Mine. JSON only.\n")
    assert load_config(path, env={}).profile("explore").system_prompt == "Mine. JSON only.\n"


FIVE_LINES = """\
import subagent_lab as sl

result = sl.explore("Find every place that touches authentication", workspace=".", max_steps=6, model="none")
print(result.terminal_reason, result.summary)
sl.inspect(result)
print("MODULE", sl.__file__)
print("TRACE", result.trace_path)
"""
"""The README's "Five lines of Python" with ``model="none"``, and where things came from."""


def _build_wheel(tmp_path: Path) -> Path:
    """The project's wheel, built from a copy of its sources (the worktree gets no build/)."""
    src = tmp_path / "src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO / name, src / name)
    shutil.copytree(REPO / "subagent_lab", src / "subagent_lab", ignore=shutil.ignore_patterns("__pycache__"))
    dist = tmp_path / "dist"
    base = [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(dist), str(src)]
    # The project's own setuptools when it is recent enough (offline); else pip's isolated build,
    # which fetches setuptools>=77 from the package index the set-up installed from.
    for extra in (["--no-build-isolation"], []):
        done = subprocess.run([*base[:5], *extra, *base[5:]], capture_output=True, text=True, timeout=120)
        wheels = list(dist.glob("subagent_lab-*.whl"))
        if done.returncode == 0 and wheels:
            return wheels[0]
    raise AssertionError(f"pip wheel failed:\n{done.stdout}\n{done.stderr}")


def test_the_wheel_runs_the_readme_lines_in_a_users_folder(tmp_path: Path) -> None:
    """Installed from its wheel (not editable) into a fresh venv, the package runs the README's
    lines from a folder of the user's: the configuration and prompts come from the package, the
    trace lands in that folder's runs/."""
    wheel = _build_wheel(tmp_path)
    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=False)
    python = env_dir / "bin" / "python"
    install = [
        sys.executable,
        "-m",
        "pip",
        "--python",
        str(python),
        "install",
        "-q",
        "--no-deps",
        "--no-index",
    ]
    subprocess.run([*install, str(wheel)], check=True, capture_output=True, timeout=120)
    site = Path(
        subprocess.check_output(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], text=True
        ).strip()
    )
    # The dependencies: this environment's site-packages as a plain path entry, after the venv's
    # own (so the wheel's subagent_lab wins; the .pth files there, the editable finder among
    # them, are not run for a plain entry).
    (site / "zz_project_dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    rg = Path(sys.executable).parent / "rg"  # the ripgrep package's binary, beside the interpreter
    if rg.exists():
        (env_dir / "bin" / "rg").symlink_to(rg)
    user = write_files(tmp_path / "user", CODE)
    (user / "five.py").write_text(FIVE_LINES)
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("PYTHONPATH", "SUBAGENT_LAB_CONFIG", "SUBAGENT_LAB_RUNS")
    }
    done = subprocess.run(
        [str(python), "five.py"], cwd=user, env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    lines = dict(
        line.split(" ", 1) for line in done.stdout.splitlines() if line.startswith(("MODULE", "TRACE"))
    )
    assert Path(lines["MODULE"]).is_relative_to(site), lines  # the installed copy, not the clone
    assert Path(lines["TRACE"]).is_relative_to(user / "runs") and Path(lines["TRACE"]).is_file(), lines
    assert done.stdout.startswith("completed"), done.stdout

    # Then as a new user goes on: a task file of their own, checked by the installed command, swept
    # over the floors and exported for ``inspect view``, everything under their folder.
    (user / "tasks.yaml").write_text(NEW_USER_TASKS)
    (user / "new_user.py").write_text(NEW_USER)
    check = subprocess.run(
        [str(env_dir / "bin" / "subagent-lab"), "tasks", "tasks.yaml"],
        cwd=user, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert check.returncode == 0, check.stdout + check.stderr
    done = subprocess.run(
        [str(python), "new_user.py"], cwd=user, env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    out = dict(line.split(" ", 1) for line in done.stdout.splitlines() if line.startswith(("SWEEP", "EVAL")))
    assert Path(out["SWEEP"]).is_relative_to(user / "runs"), out
    assert out["EVAL"].split() == ["4", "app/auth.py:1-2"], out  # 2 tasks x (none, retrieval), its own gold
    assert str(REPO) not in (Path(out["SWEEP"]) / "results.jsonl").read_text()


NEW_USER_TASKS = """\
suite: mine
workspace: {dir: .}
tasks:
  - {id: login, prompt: 'Where is login implemented?', kind: locate,
     gold: [{path: app/auth.py, start: 1, end: 2, anchor: 'def login('}]}
  - {id: salted, prompt: 'Where are passwords salted?', kind: absent, probes: [salt]}
"""
NEW_USER = """\
import subagent_lab as sl
from inspect_ai.log import read_eval_log

df = sl.sweep("tasks.yaml", ["none", "retrieval"], progress=False)
print("SWEEP", df.attrs["sweep_dir"])
log = read_eval_log(str(sl.to_inspect(df, "runs.eval")))
gold = {str(s.target) for s in log.samples if s.metadata["task_id"] == "login"}
print("EVAL", len(log.samples), *sorted(t.strip("[]'") for t in gold))
"""
"""A new user's next steps after the five lines: a task file of their own, the floors swept over it
and exported for ``inspect view``, from the installed package."""
