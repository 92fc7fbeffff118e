"""Workspace containment, secret and ignore policy."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from subagent_lab.core.tool import ToolDeniedError, ToolError
from subagent_lab.workspace.sandbox import Workspace


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    root = tmp_path / "root"
    outside = tmp_path / "outside"
    (root / "src" / "pkg").mkdir(parents=True)
    outside.mkdir()
    (outside / "secret.txt").write_text("outside secret\n")
    (root / "src" / "pkg" / "mod.py").write_text("x = 1\n")
    (root / "README.md").write_text("hello\n")
    (root / ".env").write_text("TOKEN=abc\n")
    (root / "file_out").symlink_to(outside / "secret.txt")
    (root / "dir_out").symlink_to(outside)
    (root / "rel_out").symlink_to("../outside/secret.txt")
    (root / "inside_link").symlink_to("src/pkg/mod.py")
    (root / "env_link").symlink_to(".env")
    (root / "loop_a").symlink_to("loop_b")
    (root / "loop_b").symlink_to("loop_a")
    (root / "dev_link").symlink_to("/dev/zero")
    return root


def test_resolve_inside_paths(tree: Path) -> None:
    ws = Workspace(tree)
    assert ws.resolve("src/pkg/mod.py") == tree.resolve() / "src" / "pkg" / "mod.py"
    assert ws.resolve(str(tree / "README.md")) == tree.resolve() / "README.md"
    assert ws.rel(ws.resolve("src/../src/pkg/./mod.py")) == "src/pkg/mod.py"
    assert ws.rel(ws.resolve("inside_link")) == "src/pkg/mod.py"
    assert ws.rel(ws.resolve(".")) == "."
    assert ws.rel(ws.resolve("")) == "."


@pytest.mark.parametrize(
    ("path", "fragment"),
    [
        ("/etc/passwd", "outside the workspace"),
        ("../outside/secret.txt", "outside the workspace"),
        ("src/../../outside/secret.txt", "outside the workspace"),
        ("file_out", "symlink"),
        ("rel_out", "symlink"),
        ("dir_out/secret.txt", "symlink"),
        ("dir_out", "symlink"),
        ("loop_a", "loop"),
        ("loop_a/child", "loop"),
        ("dev_link", "symlink"),
        ("/dev/zero", "outside"),
        ("/proc/self/environ", "/proc"),
        ("a\x00b", "NUL"),
        (".env", "secret"),
        ("env_link", "secret"),
    ],
)
def test_resolve_denies(tree: Path, path: str, fragment: str) -> None:
    with pytest.raises(ToolDeniedError, match=fragment):
        Workspace(tree).resolve(path)


def test_fifo_is_denied_without_blocking(tree: Path) -> None:
    if not hasattr(os, "mkfifo"):
        pytest.skip("no FIFOs on this platform")
    os.mkfifo(tree / "pipe")
    with pytest.raises(ToolDeniedError, match="FIFO"):
        Workspace(tree).resolve("pipe")


def test_missing_path(tree: Path) -> None:
    ws = Workspace(tree)
    with pytest.raises(ToolError, match="does not exist") as info:
        ws.resolve("nope.py")
    assert not isinstance(info.value, ToolDeniedError)
    assert ws.resolve("new/file.py", must_exist=False) == tree.resolve() / "new" / "file.py"
    with pytest.raises(ToolDeniedError):
        ws.resolve("dir_out/new.txt", must_exist=False)


@pytest.mark.parametrize(
    "rel",
    [
        ".env", ".env.local", "config/.env.production", "server.pem", "tls/server.key", "id_rsa",
        "home/.ssh/id_ed25519", ".ssh/config", ".aws/credentials", ".netrc", ".pgpass",
        "credentials.json", "cert.p12", "ID_RSA.pub",
    ],
)  # fmt: skip
def test_is_secret(tmp_path: Path, rel: str) -> None:
    assert Workspace(tmp_path).is_secret(rel)
    assert not Workspace(tmp_path, allow_secrets=True).is_secret(rel)


@pytest.mark.parametrize("rel", ["README.md", "src/env.py", "environment.yml", "keys.py", "docs/ssh.md"])
def test_is_not_secret(tmp_path: Path, rel: str) -> None:
    assert not Workspace(tmp_path).is_secret(rel)


def test_allow_secrets(tree: Path) -> None:
    ws = Workspace(tree, allow_secrets=True)
    assert ws.rel(ws.resolve(".env")) == ".env"
    with pytest.raises(ToolDeniedError):
        ws.resolve("file_out")  # containment still applies


def test_is_ignored(tmp_path: Path) -> None:
    (tmp_path / ".gitignore").write_text("*.log\nbuild/\n/only_root.txt\n!keep.log\n")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / ".gitignore").write_text("generated/\n*.tmp\n")
    ws = Workspace(tmp_path)
    assert ws.is_ignored("app.log")
    assert not ws.is_ignored("keep.log")
    assert ws.is_ignored("a/b/trace.log")
    assert ws.is_ignored("build", is_dir=True)
    assert ws.is_ignored("src/build/out.py")
    assert ws.is_ignored("only_root.txt")
    assert not ws.is_ignored("sub/only_root.txt")
    assert ws.is_ignored("sub/generated/x.py")
    assert ws.is_ignored("sub/x.tmp")
    assert not ws.is_ignored("x.tmp")  # the nested .gitignore does not apply above its directory
    assert ws.is_ignored("node_modules/pkg/index.js")
    assert ws.is_ignored(".git", is_dir=True)
    assert not ws.is_ignored("src/main.py")
    relaxed = Workspace(tmp_path, honour_gitignore=False)
    assert not relaxed.is_ignored("app.log")
    assert relaxed.is_ignored("node_modules/pkg/index.js")


def test_root_must_be_a_directory(tmp_path: Path) -> None:
    (tmp_path / "f").write_text("x")
    with pytest.raises(ValueError):
        Workspace(tmp_path / "f")
