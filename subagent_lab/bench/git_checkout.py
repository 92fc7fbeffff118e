"""Clean, read-only checkouts of one git commit, made once in the cache.

A task file's ``{git: repo, rev: <sha>}`` workspace is the tree of that commit and nothing else:
not the repository's working copy (which may hold edits, build outputs or another branch), so a
gold span means the same lines on every machine. The checkout goes to
``<cache>/workspaces/git-<sha>``: written into a temporary directory with a throw-away index
(``git read-tree`` + ``git checkout-index``, so ``export-ignore`` attributes drop nothing), its
files made read-only, then renamed into place, so a checkout is complete or absent. ``repo`` is a
local path or a URL; a URL is cloned bare once into ``<cache>/workspaces/repos/``.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import stat
import subprocess
import tempfile
from pathlib import Path

from subagent_lab.bench.workspaces import FieldError, workspaces_dir


def is_url(repo: str) -> bool:
    """Whether ``repo`` names a remote repository rather than a local path."""
    return "://" in repo or repo.startswith("git@")


def checkout_path(rev: str) -> Path:
    """Where the checkout of commit ``rev`` is (or would be): ``<workspaces_dir>/git-<rev>``."""
    return workspaces_dir() / f"git-{rev}"


def checkout_root(repo: str, rev: str, *, fetch: bool = False) -> Path:
    """The read-only checkout of commit ``rev`` of ``repo``; with ``fetch``, made first if absent.

    Raises ``FieldError`` (a ConfigError) on field ``git`` when the repository cannot be read and
    on ``rev`` when it holds no such commit; without ``fetch``, a missing checkout is one too.
    """
    final = checkout_path(rev)
    if final.is_dir():
        return final
    if not fetch:
        raise FieldError(
            "rev", f"commit {rev} of {repo} is not checked out (expected {final}); run "
            "`subagent-lab tasks FILE`, which makes a task file's checkouts"
        )  # fmt: skip
    git_dir = _local_repo(repo)
    _verify_commit(git_dir, repo, rev)
    base = workspaces_dir()
    base.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=base, prefix=f".checkout-{rev[:12]}-") as tmp:
        tree = Path(tmp) / "tree"
        tree.mkdir()
        env = {**os.environ, "GIT_INDEX_FILE": str(Path(tmp) / "index")}
        # An explicit work tree: a bare clone has none, and a user's own must not be touched.
        for args in (["read-tree", rev], ["checkout-index", "--all", "--force"]):
            _git(git_dir, repo, [f"--work-tree={tree}", *args], env=env)
        _read_only(tree)
        try:
            os.replace(tree, final)  # same filesystem: the checkout appears complete or not at all
        except OSError:
            if not final.is_dir():  # another process made it meanwhile: that one is the same tree
                raise
    return final


def _local_repo(repo: str) -> Path:
    """The git directory to read ``repo`` from: the path itself, or a bare clone of a URL."""
    if not is_url(repo):
        path = Path(repo).expanduser()
        if not path.exists():
            raise FieldError("git", f"no repository at {path}")
        return path
    clone = workspaces_dir() / "repos" / (hashlib.sha256(repo.encode()).hexdigest()[:16] + ".git")
    if not clone.is_dir():
        clone.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=clone.parent, prefix=".clone-") as tmp:
            proc = subprocess.run(
                ["git", "clone", "--bare", "--quiet", repo, str(Path(tmp) / "r.git")],
                capture_output=True, text=True, check=False,
            )  # fmt: skip
            if proc.returncode != 0:
                raise FieldError("git", f"cannot clone {repo}: {proc.stderr.strip()[-300:]}")
            os.replace(Path(tmp) / "r.git", clone)
    return clone


def _verify_commit(git_dir: Path, repo: str, rev: str) -> None:
    """``rev`` must name a commit of the repository, exactly (``git rev-parse``)."""
    proc = subprocess.run(
        ["git", "-C", str(git_dir), "rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    if proc.returncode == 128 and "not a git repository" in proc.stderr:
        raise FieldError("git", f"{repo} is not a git repository")
    if proc.returncode != 0 or proc.stdout.strip() != rev:
        raise FieldError("rev", f"{repo} has no commit {rev}")


def _git(git_dir: Path, repo: str, args: list[str], env: dict[str, str]) -> None:
    proc = subprocess.run(
        ["git", "-C", str(git_dir), *args], capture_output=True, text=True, check=False, env=env
    )
    if proc.returncode != 0:
        raise FieldError("rev", f"git {args[1]} of {repo} failed: {proc.stderr.strip()[-300:]}")


def _read_only(tree: Path) -> None:
    """Clear every write bit of the checkout's files (directories stay removable by their owner)."""
    writable = stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH
    for path in tree.rglob("*"):
        if path.is_file() and not path.is_symlink():
            path.chmod(path.stat().st_mode & ~writable)


def remove_checkout(rev: str) -> None:
    """Delete the checkout of ``rev`` (its files are read-only, its directories are not)."""
    shutil.rmtree(checkout_path(rev), ignore_errors=True)
