"""Clean, read-only checkouts of one git commit, made once in the cache.

A task file's ``{git: repo, rev: <sha>}`` workspace is the tree of that commit and nothing else:
not the repository's working copy (which may hold edits, build outputs or another branch), so a
gold span means the same lines on every machine. The checkout goes to
``<cache>/workspaces/git-<sha>``: written into a temporary directory, its files read-only, then
renamed into place, so a checkout is complete or absent. ``repo`` is a local path or a URL; a URL
is cloned bare once into ``<cache>/workspaces/repos/``.

The repository is data (issue 52): none of its configuration, hooks, attributes or replace refs
is read. Git runs in a throw-away empty repository of ours that borrows the task repository's
object store (``objects/info/alternates``), with no system or global configuration, so
no filter, ``core.fsmonitor`` or hook of the task repository's can run. Only ``git cat-file
--batch`` reads objects (raw bytes; no filter or attribute applies), and every object is checked
against its id here, commit, trees and blobs, so a planted object or a replace ref cannot pass a
hostile tree off as the commit. A record ``git-<sha>.checked`` (the commit and tree ids, written
after the tree) says the checkout was made this way; a tree without it is made again.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from subagent_lab.bench.git_objects import ObjectReader, write_tree
from subagent_lab.bench.workspaces import FieldError, workspaces_dir

RECORD_SUFFIX = ".checked"
RECORD_FORMAT = "verified-v1"
"""The record's last word: the scheme a checkout was verified by (older checkouts have none)."""
ALLOWED_PROTOCOLS = "https:http:ssh:git:file"
"""What a URL ``repo`` may be cloned over (not ``ext::`` or other command-running transports)."""


def is_url(repo: str) -> bool:
    """Whether ``repo`` names a remote repository rather than a local path."""
    return "://" in repo or repo.startswith("git@")


def checkout_path(rev: str) -> Path:
    """Where the checkout of commit ``rev`` is (or would be): ``<workspaces_dir>/git-<rev>``."""
    return workspaces_dir() / f"git-{rev}"


def record_path(rev: str) -> Path:
    """The record of a verified checkout of ``rev``: ``git-<rev>.checked`` beside it."""
    return workspaces_dir() / f"git-{rev}{RECORD_SUFFIX}"


def checkout_root(repo: str, rev: str, *, fetch: bool = False) -> Path:
    """The read-only checkout of commit ``rev`` of ``repo``; with ``fetch``, made first if absent.

    Raises ``FieldError`` (a ConfigError) on field ``git`` when the repository cannot be read and
    on ``rev`` when it holds no such commit; without ``fetch``, a missing checkout is one too.
    """
    final = checkout_path(rev)
    # One stat on the hot path: the record is written only after the verified tree is in place
    # and removed before it (``remove_checkout``), so it stands for both.
    if os.path.isfile(f"{final}{RECORD_SUFFIX}"):
        return final
    record = record_path(rev)
    if not fetch:
        raise FieldError(
            "rev", f"commit {rev} of {repo} is not checked out (expected {final}); run "
            "`subagent-lab tasks FILE`, which makes a task file's checkouts"
        )  # fmt: skip
    objects = _object_dir(_local_repo(repo), repo)
    base = workspaces_dir()
    base.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=base, prefix=f".checkout-{rev[:12]}-") as tmp:
        probe = _empty_repo(Path(tmp) / "probe.git", sha256=len(rev) == 64)
        tree = Path(tmp) / "tree"
        (probe / "objects" / "info").mkdir(parents=True, exist_ok=True)
        (probe / "objects" / "info" / "alternates").write_text(f"{objects}\n", encoding="utf-8")
        env = {**git_env(), "GIT_DIR": str(probe)}
        try:
            with ObjectReader(env) as reader:
                tree_id = write_tree(reader, rev, tree)
        except LookupError as exc:
            raise FieldError("rev", f"{repo} has no commit {rev} ({exc})") from exc
        except ValueError as exc:
            raise FieldError("rev", f"commit {rev} of {repo} cannot be checked out: {exc}") from exc
        except OSError as exc:
            raise FieldError("git", f"cannot read {repo} with git: {exc}") from exc
        if final.exists():  # an unrecorded (older, unverified) tree: set aside, removed with tmp
            os.replace(final, Path(tmp) / "stale")
        try:
            os.replace(tree, final)  # same filesystem: the checkout appears complete or not at all
        except OSError:
            if not final.is_dir():  # another process made it meanwhile: verified, the same tree
                raise
        note = Path(tmp) / "record"
        note.write_text(f"{rev} {tree_id} {RECORD_FORMAT}\n", encoding="utf-8")
        os.replace(note, record)  # written last: a tree without it is made again
        shutil.rmtree(Path(tmp) / "stale", ignore_errors=True)
    return final


def git_env() -> dict[str, str]:
    """The environment git runs in: the caller's, less every ``GIT_*`` variable, with no system
    or global configuration or attributes and no replace objects."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update(
        GIT_CONFIG_NOSYSTEM="1", GIT_CONFIG_GLOBAL=os.devnull, GIT_ATTR_NOSYSTEM="1",
        GIT_NO_REPLACE_OBJECTS="1", GIT_TERMINAL_PROMPT="0", GIT_ALLOW_PROTOCOL=ALLOWED_PROTOCOLS,
    )  # fmt: skip
    return env


def _empty_repo(path: Path, *, sha256: bool) -> Path:
    """A new bare repository with no hooks (an empty template): git's own, not the task's."""
    fmt = ["--object-format=sha256"] if sha256 else []
    try:
        proc = subprocess.run(
            ["git", "init", "--bare", "--quiet", "--template=", *fmt, str(path)],
            capture_output=True, text=True, check=False, env=git_env(),
        )  # fmt: skip
    except OSError as exc:  # no git at all
        raise FieldError("git", f"cannot run git: {exc}") from exc
    if proc.returncode != 0:
        raise FieldError("git", f"git init failed: {proc.stderr.strip()[-300:]}")
    return path


def _object_dir(git_dir: Path, repo: str) -> Path:
    """The object store of the repository at or above ``git_dir``, found by reading its layout
    (``.git`` directory, ``gitdir:`` file, ``commondir``, bare), never by running git in it."""
    start = git_dir.expanduser().resolve()
    for path in (start, *start.parents):
        dot = path / ".git"
        if dot.is_file():
            text = dot.read_text(encoding="utf-8", errors="replace").strip()
            if not text.startswith("gitdir:"):
                break
            dot = (path / text.removeprefix("gitdir:").strip()).resolve()
        candidates = [dot] if dot.is_dir() else []
        candidates += [path] if path == start else []  # a bare repository is named itself
        for gitdir in candidates:
            common = gitdir
            if (gitdir / "commondir").is_file():
                common = (gitdir / (gitdir / "commondir").read_text(encoding="utf-8").strip()).resolve()
            if (common / "objects").is_dir() and (gitdir / "HEAD").is_file():
                return common / "objects"
    raise FieldError("git", f"{repo} is not a git repository")


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
            # The user's own configuration stays (proxies, credentials); the remote sends only
            # objects and refs. "--" keeps a URL that starts with "-" from being read as an option.
            env = {**os.environ, "GIT_ALLOW_PROTOCOL": ALLOWED_PROTOCOLS, "GIT_TERMINAL_PROMPT": "0"}
            cmd = ["git", "-c", "core.hooksPath=/dev/null", "-c", "core.fsmonitor=false", "clone", "--bare"]
            cmd += ["--quiet", "--template=", "--", repo, str(Path(tmp) / "r.git")]
            proc = subprocess.run(cmd, capture_output=True, text=True, check=False, env=env)
            if proc.returncode != 0:
                raise FieldError("git", f"cannot clone {repo}: {proc.stderr.strip()[-300:]}")
            os.replace(Path(tmp) / "r.git", clone)
    return clone


def remove_checkout(rev: str) -> None:
    """Delete the checkout of ``rev`` and its record (its files are read-only, its directories are not)."""
    record_path(rev).unlink(missing_ok=True)
    shutil.rmtree(checkout_path(rev), ignore_errors=True)
