"""The workspace a read-only sub-agent may look at, and the one gate every path goes through.

``Workspace.resolve`` turns a model-supplied path into a real path inside the root or raises
``ToolDeniedError``: absolute paths elsewhere, ``..`` escapes, symlinks (anywhere in the chain)
that leave the root, symlink loops, ``/proc``, NUL bytes, device files, FIFOs, sockets and
secret files are refused. ``is_secret`` and ``is_ignored`` let the search tools filter what they
enumerate (secret names, default ignored directories, ``.gitignore`` rules);
``hidden_from_search`` is the whole filter for one search hit.

The secret policy (names and content) lives in ``subagent_lab.core.secret_policy``.
"""

from __future__ import annotations

import os
import re
import stat
import threading
from pathlib import Path, PurePosixPath

import pathspec

# Re-exported: the search tools and older callers import the policy from here.
from subagent_lab.core.secret_policy import (
    SECRET_DIRS,
    SECRET_NAME_GLOBS,
    holds_private_key,
    holds_private_key_fd,
    is_secret_file,
    is_secret_name,
)
from subagent_lab.core.tool import ToolDeniedError, ToolError
from subagent_lab.workspace.fdwalk import PathChanged, PathEscape, PathLoop, Walked, WalkError, reopen, walk

__all__ = [
    "DEFAULT_IGNORED_DIRS", "SECRET_DIRS", "SECRET_NAME_GLOBS", "Workspace", "holds_private_key",
    "is_secret_file", "is_secret_name",
]  # fmt: skip

DEFAULT_IGNORED_DIRS: frozenset[str] = frozenset(
    {
        ".git", ".hg", ".svn", "node_modules", "__pycache__", ".venv", "venv", ".mypy_cache",
        ".pytest_cache", ".tox", ".nox", "dist", "build", ".idea", ".vscode", ".ruff_cache",
        ".eggs", ".cache", "target", ".gradle", ".next", ".terraform", "site-packages",
    }
)  # fmt: skip
"""Directory names skipped by Grep and Glob (Read may still open files inside them)."""


IGNORE_COST_CHEAP = 7
IGNORE_COST_MAX = 11
MAX_COSTLY_IGNORE_LINES = 32
"""Bounds on .gitignore lines, which pathspec matches with backtracking regexes.

A line's cost is 4 per gap that can span directories (``**``, and the implicit ``**/`` of a
pattern without a slash) plus 3 per ``*`` run inside a segment. Up to 7 (``*.pyc``,
``**/build``) matching is cheap; up to 11 (``**/a/**/b``, ``*.tar.*``) one adversarial path can
take ~0.1 s, so at most 32 such lines are applied per workspace; above 11 (``**/d/**/d/**/x``,
``*a*a*a*b``) one path can take minutes, and the line is not applied. A line that is not
applied only lets Glob list a few more paths."""


def _ignore_cost(line: str) -> int:
    body = re.sub(r"\\.", "x", line.strip().removeprefix("!")).rstrip("/")  # escapes are literals
    cost = 0 if "/" in body else 4
    segments = body.split("/")
    if len(segments) > 1 and segments[-1] == "**":
        segments.pop()  # a trailing /** matches everything below: no search
    for segment in segments:
        cost += 4 if segment == "**" else 3 * len(re.findall(r"\*+", segment))
    return cost


def _parts(rel: str) -> list[str]:
    # Plain string splitting: pathlib parsing dominated the cost of walking 100k entries.
    return [part for part in rel.replace(os.sep, "/").split("/") if part not in ("", ".")]


def _inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


class Workspace:
    """A directory tree that tools may read, with containment, secret and ignore policy.

    Args:
        root: The workspace root directory (it is resolved once, symlinks included).
        allow_secrets: Let Read/Grep/Glob see secret files (``.env``, keys, ...).
        honour_gitignore: Skip paths matched by ``.gitignore`` files when enumerating.
    """

    def __init__(self, root: Path, *, allow_secrets: bool = False, honour_gitignore: bool = True) -> None:
        real = os.path.realpath(root)
        if not os.path.isdir(real):
            raise ValueError(f"workspace root {root} is not a directory")
        self.root = Path(real)
        self._root_real = real
        self._root_given = os.path.abspath(root)  # the spelling the model may see in absolute paths
        self.allow_secrets = allow_secrets
        self.honour_gitignore = honour_gitignore
        self._specs: dict[str, pathspec.PathSpec | None] = {}
        self._lock = threading.Lock()  # tools may run on threads; the spec cache is shared
        self._costly_ignore_lines = 0
        self._key_files: dict[tuple[int, int, int, int], bool] = {}  # stat signature -> holds a key

    def __repr__(self) -> str:
        return f"Workspace({str(self.root)!r}, allow_secrets={self.allow_secrets})"

    # --- paths -------------------------------------------------------------------------------

    def rel(self, path: Path | str) -> str:
        """The workspace-relative POSIX form of a path inside the root (``.`` for the root)."""
        text = os.path.abspath(path)
        for base in (self._root_real, self._root_given):
            if _inside(text, base):
                rel = os.path.relpath(text, base)
                return PurePosixPath(*Path(rel).parts).as_posix() if rel != "." else "."
        raise ToolDeniedError(f"'{path}' is outside the workspace")

    def resolve(self, path: str, *, must_exist: bool = True) -> Path:
        """The real path inside the root that ``path`` names, or ToolDeniedError / ToolError.

        A name only: a caller that then opens it by name again races a concurrent rename; tools
        that read or write use ``open_path`` / ``open_file`` and keep the descriptors instead.

        Args:
            path: Relative to the root, or absolute (then it must lie inside the root).
            must_exist: Raise ToolError when the path does not exist.
        """
        with self.open_path(path, must_exist=must_exist) as walked:
            return Path(os.path.join(self._root_real, *walked.parts)) if walked.parts else self.root

    def open_path(self, path: str, *, must_exist: bool = True) -> Walked:
        """Resolve ``path`` by descriptor (``fdwalk.walk``) and apply the whole policy to what was
        found: the caller gets the descriptors (and must close them), never a name to re-open.

        Raises ToolDeniedError for what policy refuses and ToolError otherwise, including a
        path that changed while it was being resolved; never anything else.
        """
        if not isinstance(path, str):
            raise ToolError("path must be a string")
        if "\x00" in path:
            raise ToolDeniedError("path contains a NUL byte")
        try:
            os.fsencode(path)  # a lone surrogate outside the surrogateescape range cannot name a file
        except UnicodeEncodeError:
            raise ToolError("path is not valid text (it holds a lone UTF-16 surrogate)") from None
        path = path.strip() or "."
        candidate = path if os.path.isabs(path) else os.path.join(self._root_real, path)
        lexical = os.path.normpath(candidate)
        if lexical == "/proc" or lexical.startswith("/proc/"):
            raise ToolDeniedError(f"'{path}': /proc is never readable")
        base = next((b for b in (self._root_real, self._root_given) if _inside(lexical, b)), None)
        if base is None:
            how = "is an absolute path" if os.path.isabs(path) else "escapes it with '..'"
            raise ToolDeniedError(
                f"'{path}' is outside the workspace ({how}); use a path relative to the workspace root"
            )
        # Walk the path as written, not its normalised form: a '..' after a symlink applies to
        # where the link led, as the kernel (and realpath) would resolve it.
        relative = os.path.relpath(candidate, base) if os.path.isabs(path) else path
        try:
            root_fd = os.open(self._root_real, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
        except OSError as exc:
            raise ToolError(f"the workspace root cannot be opened: {exc.strerror}") from None
        try:
            walked = walk(root_fd, relative, (self._root_real, self._root_given))
        except PathLoop:
            raise ToolDeniedError(f"'{path}' goes through a symlink loop") from None
        except PathEscape:
            raise ToolDeniedError(
                f"'{path}' is (or goes through) a symlink that points outside the workspace"
            ) from None
        except PathChanged as exc:
            raise ToolError(
                f"'{path}' changed while it was being resolved ({exc}); nothing was opened"
            ) from None
        finally:
            os.close(root_fd)
        try:
            self._check_walked(path, lexical, walked, must_exist)
        except BaseException:
            walked.close()
            raise
        return walked

    def _check_walked(self, path: str, lexical: str, walked: Walked, must_exist: bool) -> None:
        real = os.path.join(self._root_real, *walked.parts)
        if real.startswith("/proc/") or real == "/proc":
            raise ToolDeniedError(f"'{path}': /proc is never readable")
        self._check_secret(path, lexical, real)
        if walked.info is None:
            if must_exist:
                raise ToolError(
                    f"'{path}' does not exist (paths are relative to the workspace root); "
                    "find files with Glob or Grep instead of guessing paths"
                )
            return
        mode = walked.info.st_mode
        if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
            kind = (
                "a FIFO" if stat.S_ISFIFO(mode)
                else "a socket" if stat.S_ISSOCK(mode)
                else "a device file" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode)
                else "not a regular file"
            )  # fmt: skip
            raise ToolDeniedError(f"'{path}' is {kind}; only regular files and directories can be read")
        if stat.S_ISREG(mode) and self._key_in(walked):
            raise ToolDeniedError(f"'{path}' holds a private key and is not readable")
        if stat.S_ISREG(mode) and walked.info.st_nlink > 1 and not self.allow_secrets:
            # Another name of the same file may lie outside the workspace or be a secret: a link
            # cannot tell where its other names are, so none is read (git never makes them).
            raise ToolDeniedError(
                f"'{path}' is a hard link ({walked.info.st_nlink} names for one file) and is not readable"
            )

    def open_file(self, path: str) -> tuple[int, str, os.stat_result]:
        """``(descriptor open for reading, workspace-relative path, stat)`` of a regular file.

        The descriptor is of the very file that was resolved and checked (``O_NOFOLLOW``,
        non-blocking, compared by device and inode); the caller closes it.
        """
        with self.open_path(path) as walked:
            if walked.info is not None and stat.S_ISDIR(walked.info.st_mode):
                rel = walked.rel
                raise ToolError(
                    f"'{rel}' is a directory; use Glob (e.g. pattern='*' path='{rel}') to list it"
                )
            try:
                fd = reopen(walked, os.O_RDONLY | os.O_NONBLOCK)
            except PathChanged as exc:
                raise ToolError(
                    f"'{path}' changed while it was being opened ({exc}); nothing was read"
                ) from None
            return fd, walked.rel, os.fstat(fd)

    def open_dir(self, rel: str) -> int | None:
        """A descriptor for listing the directory ``rel`` (workspace-relative, no policy applied:
        the caller filters entries), resolved by descriptor; None when it is not a directory
        inside the root any more."""
        try:
            root_fd = os.open(self._root_real, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
        except OSError:
            return None
        try:
            with walk(root_fd, rel, (self._root_real, self._root_given)) as walked:
                if walked.info is None or not stat.S_ISDIR(walked.info.st_mode):
                    return None
                return reopen(walked, os.O_RDONLY | os.O_DIRECTORY)
        except (WalkError, OSError):
            return None
        finally:
            os.close(root_fd)

    def _key_in(self, walked: Walked) -> bool:
        """Whether the walked regular file holds a private key (cached by its stat signature)."""
        if self.allow_secrets or walked.info is None:
            return False
        info = walked.info
        signature = (info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns)
        with self._lock:
            known = self._key_files.get(signature)
        if known is None:
            try:
                fd = reopen(walked, os.O_RDONLY | os.O_NONBLOCK)
            except PathChanged:
                return True  # cannot tell: refuse rather than show it
            try:
                known = holds_private_key_fd(fd)
            finally:
                os.close(fd)
            with self._lock:
                self._key_files[signature] = known
        return known

    def _check_secret(self, given: str, lexical: str, real: str) -> None:
        if self.allow_secrets:
            return
        for form in (lexical, real):
            try:
                rel = self.rel(form)
            except ToolDeniedError:
                continue
            if self.is_secret(rel):
                raise ToolDeniedError(
                    f"'{given}' looks like a secret (credentials, keys, .env) and is not readable"
                )

    # --- policy ------------------------------------------------------------------------------

    def is_secret(self, rel: str) -> bool:
        """Whether a workspace-relative path names a secret file or lies in a secret directory."""
        return not self.allow_secrets and is_secret_name(rel)

    def is_secret_content(self, path: str | Path) -> bool:
        """Whether the regular file at ``path`` (workspace-relative or absolute) holds a private key."""
        if self.allow_secrets:
            return False
        full = os.path.join(self._root_real, path)
        try:
            info = os.lstat(full)
        except OSError:
            return False
        if not stat.S_ISREG(info.st_mode):
            return False
        if info.st_nlink > 1:
            return True  # a hard link: its other names may be secret or outside (see _check_walked)
        signature = (info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns)
        with self._lock:
            known = self._key_files.get(signature)
        if known is None:
            known = holds_private_key(full)
            with self._lock:
                self._key_files[signature] = known
        return known

    def hidden_from_search(self, rel: str, *, glob: str | None = None) -> bool:
        """Whether a search hit at ``rel`` must not be shown: a secret (name or content), or, when
        the search had a caller's ``glob`` (rg's globs override ignore rules), an ignored path."""
        if self.is_secret(rel) or self.is_secret_content(rel):
            return True
        # Only then: matching a large .gitignore in Python costs what rg has already done.
        return glob is not None and not glob.startswith("!") and self.is_ignored(rel)

    def is_ignored(self, rel: str, *, is_dir: bool = False, parents_checked: bool = False) -> bool:
        """Whether Grep/Glob should skip the path: a default ignored directory or a gitignore match.

        Args:
            rel: Workspace-relative path.
            is_dir: The path is a directory (``build/`` style rules then apply to it).
            parents_checked: The caller (a tree walk) already pruned ignored ancestors, so only
                the last component needs checking.
        """
        parts = _parts(rel)
        if not parts:
            return False
        if not parents_checked:
            for end in range(1, len(parts)):
                if self._ignored_self(parts[:end], is_dir=True):
                    return True
        return self._ignored_self(parts, is_dir=is_dir)

    def _ignored_self(self, parts: list[str], *, is_dir: bool) -> bool:
        if is_dir and parts[-1] in DEFAULT_IGNORED_DIRS:
            return True
        if not self.honour_gitignore:
            return False
        # A .gitignore in directory D applies to paths below D, matched relative to D.
        for depth in range(len(parts)):
            spec = self._spec("/".join(parts[:depth]))
            if spec is not None:
                sub = "/".join(parts[depth:])
                if spec.match_file(sub + "/" if is_dir else sub):
                    return True
        return False

    def _affordable(self, lines: list[str]) -> list[str]:
        """The ignore lines whose matching cost is bounded (see ``IGNORE_COST_MAX``)."""
        kept: list[str] = []
        for line in lines:
            if not line.strip() or line.startswith("#"):
                continue
            cost = _ignore_cost(line)
            if cost > IGNORE_COST_MAX:
                continue
            if cost > IGNORE_COST_CHEAP:
                with self._lock:
                    if self._costly_ignore_lines >= MAX_COSTLY_IGNORE_LINES:
                        continue
                    self._costly_ignore_lines += 1
            kept.append(line)
        return kept

    def _spec(self, dir_rel: str) -> pathspec.PathSpec | None:
        with self._lock:
            if dir_rel in self._specs:
                return self._specs[dir_rel]
        lines: list[str] = []
        base = os.path.join(self._root_real, dir_rel) if dir_rel else self._root_real
        sources = [os.path.join(base, ".gitignore")]
        if not dir_rel:
            sources.append(os.path.join(base, ".git", "info", "exclude"))
        for source in sources:
            try:
                if not stat.S_ISREG(os.lstat(source).st_mode):
                    continue  # never follow a symlinked .gitignore or open a FIFO
                with open(source, encoding="utf-8", errors="replace") as handle:
                    lines.extend(handle.read(1_000_000).splitlines())
            except OSError:
                continue
        lines = self._affordable(lines)
        spec = pathspec.GitIgnoreSpec.from_lines(lines) if lines else None
        with self._lock:
            self._specs[dir_rel] = spec
        return spec
