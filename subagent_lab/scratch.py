"""Scratch copies: the main agent works on a copy of the target, and reports what it changed."""

from __future__ import annotations

import filecmp
import os
import shutil
import tempfile
from pathlib import Path

SCRATCH_SKIP: frozenset[str] = frozenset(
    {".git", ".venv", "node_modules", "__pycache__", ".mypy_cache", ".pytest_cache", ".ruff_cache", ".tox"}
)
"""Directory names not copied into the scratch workspace."""


def _escapes(path: str, real_root: str) -> bool:
    """A symlink whose destination lies outside ``real_root``."""
    if not os.path.islink(path):
        return False
    dest = os.path.realpath(path)
    return not (dest == real_root or dest.startswith(real_root + os.sep))


def copy_to_scratch(target: Path, base: str | Path | None = None) -> Path:
    """Copy ``target`` into a new temporary directory; VCS, venvs, caches and escaping links stay behind.

    Returns the copy's root, ``<tempdir>/<target name>``; ``remove_scratch`` deletes it again.
    """
    real_target = os.path.realpath(target)

    def ignore(directory: str, names: list[str]) -> set[str]:
        # A link out of the repository would leak what it points at into the workspace.
        return {n for n in names if n in SCRATCH_SKIP or _escapes(os.path.join(directory, n), real_target)}

    root = Path(tempfile.mkdtemp(prefix="subagent-main-", dir=base)) / target.name
    shutil.copytree(target, root, symlinks=True, ignore=ignore)
    return root


def changed_files(target: Path, scratch: Path) -> list[str]:
    """Relative paths added, removed or modified in ``scratch`` compared with ``target``."""

    def files(root: Path) -> set[str]:
        found: set[str] = set()
        real_root = os.path.realpath(root)
        for directory, dirs, names in os.walk(root):
            dirs[:] = [d for d in dirs if d not in SCRATCH_SKIP]
            for name in names:
                path = os.path.join(directory, name)
                if not _escapes(path, real_root):  # never copied, so never a change
                    found.add(os.path.relpath(path, root))
        return found

    before, after = files(target), files(scratch)
    changed = before ^ after
    for rel in before & after:
        a, b = target / rel, scratch / rel
        if a.is_file() and b.is_file() and not filecmp.cmp(a, b, shallow=False):
            changed.add(rel)
    return sorted(changed)


def remove_scratch(scratch: str | Path) -> None:
    """Delete a scratch copy made by ``copy_to_scratch`` (its temporary parent directory included)."""
    path = Path(scratch)
    parent = path.parent
    if not parent.name.startswith("subagent-main-"):
        raise ValueError(f"{scratch} is not a scratch copy made by copy_to_scratch")
    shutil.rmtree(parent)
