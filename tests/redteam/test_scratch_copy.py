"""Issue 11: the scratch copy is safe to write, and Bash without a sandbox is disabled unless opted in."""

from __future__ import annotations

import os
import socket
import stat
from pathlib import Path

import pytest

from redteam.support import tree_digest
from subagent_lab.agents.parent import MainAgent
from subagent_lab.config.profiles import LabConfig
from subagent_lab.models.scripted import ScriptedModel, final, tool_call
from subagent_lab.workspace.bwrap import BashSandbox
from subagent_lab.workspace.scratch import make_scratch

PEM = "-----BEGIN EC PRIVATE KEY-----\nMHcCAQEEIBkg\n-----END EC PRIVATE KEY-----\n"


@pytest.fixture
def tricky(tmp_path: Path, canary: tuple[Path, str]) -> Path:
    """A target with every kind of entry a copy can get wrong."""
    outside, _ = canary
    root = tmp_path / "tricky"
    (root / "pkg" / "sub").mkdir(parents=True)
    (root / "pkg" / "mod.py").write_text("X = 1\n")
    (root / "pkg" / "sub" / "deep.py").write_text("Y = 2\n")
    (root / "credentials").mkdir()  # a package named like a secret file: not a secret directory
    (root / "credentials" / "__init__.py").write_text("def load(): ...\n")
    (root / ".git").mkdir()
    (root / ".git" / "config").write_text("[core]\n")
    (root / ".ssh").mkdir()
    (root / ".ssh" / "config").write_text("Host x\n")
    (root / ".env").write_text("TOKEN=abc\n")
    (root / "#.env#").write_text("TOKEN=abc\n")
    (root / "docs.md").write_text("# a key pasted into the docs\n" + PEM)
    links = {
        "abs_file": root / "pkg" / "mod.py",
        "abs_dir": root / "pkg" / "sub",
        "rel_file": Path("pkg/mod.py"),
        "pkg/sub/up": Path("../mod.py"),
        "abs_out": outside / "canary.txt",
        "rel_out": Path(os.path.relpath(outside / "canary.txt", root)),
        "to_git": root / ".git" / "config",
        "to_env": Path(".env"),
        "loop_a": Path("loop_b"),
        "loop_b": Path("loop_a"),
        "dangling": Path("pkg/missing.py"),
    }
    for name, dest in links.items():
        (root / name).symlink_to(dest)
    os.mkfifo(root / "fifo")
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(root / "sock"))
    sock.close()
    if os.geteuid() == 0:
        os.mknod(root / "zero", stat.S_IFCHR | 0o666, os.makedev(1, 5))
    return root


def test_the_copy_has_no_way_out(tricky: Path, tmp_path: Path) -> None:
    before = tree_digest(tricky)
    copy = make_scratch(tricky, tmp_path)
    root = copy.root
    real_root = os.path.realpath(root)
    assert tree_digest(tricky) == before
    for dirpath, dirnames, filenames in os.walk(root):
        for name in [*dirnames, *filenames]:
            path = os.path.join(dirpath, name)
            info = os.lstat(path)
            kind = stat.S_IFMT(info.st_mode)
            assert kind in (stat.S_IFREG, stat.S_IFDIR, stat.S_IFLNK), path
            if stat.S_ISLNK(info.st_mode):
                assert not os.path.isabs(os.readlink(path)), path
                resolved = os.path.realpath(path)
                assert resolved == real_root or resolved.startswith(real_root + os.sep), path
    assert os.readlink(root / "abs_file") == "pkg/mod.py" and (root / "abs_file").read_text() == "X = 1\n"
    assert os.readlink(root / "abs_dir") == "pkg/sub" and (root / "abs_dir" / "deep.py").is_file()
    assert os.readlink(root / "pkg" / "sub" / "up") == "../mod.py" and os.readlink(root / "dangling")
    present = {p.relative_to(root).as_posix() for p in root.rglob("*")}
    for gone in ("abs_out", "rel_out", "to_git", "to_env", "loop_a", "loop_b", "fifo", "sock", "zero",
                 ".git", ".ssh", ".env", "#.env#", "docs.md"):  # fmt: skip
        assert gone not in present, gone
    assert "credentials/__init__.py" in present
    notes = "\n".join(copy.notes)
    for expected in ("'abs_out': it points outside", "'rel_out': it points outside", "'to_git': it points at",
                     "'to_env': it points at", "'loop_a': a symlink loop", "'fifo': a FIFO",
                     "'sock': a socket", "'.ssh': a secret", "'.env': a secret", "'#.env#': a secret",
                     "'docs.md': it holds a private key", "rewrote absolute link 'abs_file'"):  # fmt: skip
        assert expected in notes, (expected, notes)
    if os.geteuid() == 0:
        assert "'zero': a device file" in notes
    assert copy.changed_files() == []


def test_changed_files_come_from_the_copy_alone(tricky: Path, tmp_path: Path) -> None:
    copy = make_scratch(tricky, tmp_path)
    root = copy.root
    # the target changing afterwards is not a change of the copy
    (tricky / "pkg" / "mod.py").write_text("X = 'changed in the target'\n")
    (tricky / "new_in_target.py").write_text("")
    assert copy.changed_files() == []
    (root / "pkg" / "mod.py").write_text("X = 3\n")  # modified
    (root / "pkg" / "sub" / "deep.py").unlink()  # removed
    (root / "added.txt").write_text("new\n")  # added
    (root / "credentials" / "__init__.py").write_text("def load(): ...\n")  # rewritten, same bytes
    (root / "rel_file").unlink()
    (root / "rel_file").symlink_to("pkg/sub")  # a link re-pointed
    (root / "__pycache__").mkdir()
    (root / "__pycache__" / "x.pyc").write_bytes(b"\0")  # never counted
    assert copy.changed_files() == ["added.txt", "pkg/mod.py", "pkg/sub/deep.py", "rel_file"]


def _with_main(config: LabConfig, **fields: object) -> LabConfig:
    main = config.agents["main"].model_copy(update=fields)
    return config.model_copy(update={"agents": {**config.agents, "main": main}})


def test_without_bwrap_bash_is_disabled_naming_the_package(
    config: LabConfig, workspace: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(BashSandbox, "executable", lambda self: None)
    model = ScriptedModel([tool_call("Bash", command="ls"), final("done")])
    agent = MainAgent(config, workspace, model_factory=lambda c, m: model, scratch_dir=tmp_path)
    result = agent.run("List the files")
    observation = model.requests[1].messages[-1].content
    assert observation.startswith("Denied: Bash is disabled") and "'bubblewrap'" in observation
    assert result.bash_sandbox.startswith("disabled:") and "bubblewrap" in result.bash_sandbox
    assert "Bash is disabled" in model.requests[0].messages[1].content  # told up front, in the trace too
    assert result.tool_usage["Bash"] == {"denied": 1}


def test_a_bwrap_that_cannot_create_namespaces_disables_bash(tmp_path: Path) -> None:
    fake = tmp_path / "bwrap"
    fake.write_text("#!/bin/sh\necho 'bwrap: No permissions to creating new namespace' >&2\nexit 1\n")
    fake.chmod(0o755)
    problem = BashSandbox(binary=str(fake)).problem()
    assert problem is not None and "cannot create its namespaces" in problem and "No permissions" in problem
    assert "bubblewrap" in problem and BashSandbox(binary=str(fake)).status() == f"disabled: {problem}"


def test_unsandboxed_bash_is_an_explicit_opt_in_and_recorded(
    config: LabConfig, workspace: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert config.agents["main"].bash_sandbox == "bwrap"  # the default
    monkeypatch.setenv("SOME_SERVICE_TOKEN", "token-value-never-shown")
    cfg = _with_main(config, bash_sandbox="none")
    model = ScriptedModel([tool_call("Bash", command="pwd; cat {/proc,x}/self/environ"), final("done")])
    result = MainAgent(cfg, workspace, model_factory=lambda c, m: model, scratch_dir=tmp_path).run("Where?")
    observation = model.requests[1].messages[-1].content
    assert observation.startswith("[exit code 1]") and result.workspace in observation  # x/self: missing
    assert "PYTHONNOUSERSITE=1" in observation  # the command's own, allow-listed environment
    assert "token-value-never-shown" not in observation and f"HOME={result.workspace}" not in observation
    assert result.bash_sandbox.startswith("none: unsandboxed")
    assert "without an OS sandbox" in model.requests[0].messages[1].content
