"""The two gold warnings that need a task's git history (issue 48), for any mined task file.

``comment-only``: a gold unit whose code is the same at the commit as at its parent once comments,
``# type: ignore`` and docstrings are set aside (its AST without docstrings): the commit changed
no code of it. ``sdist!=parent``: a gold span whose lines in the task's workspace tree are not a
block of the same unit's lines at the commit's parent (or whose file or unit the parent lacks): the
workspace does not hold the code the commit changed. The miner of issue 48 filters both while
mining; this module reads them back from a written task (``meta.commit``, ``meta.parent``,
``meta.units`` and the gold spans), so files mined before the fix can be counted too.
"""

from __future__ import annotations

import ast
import copy
import subprocess
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from subagent_lab.bench.units import module_name, parse_tree, unit_nodes

HISTORY_WARNINGS = ("comment-only", "sdist!=parent")
_Node = ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef
_WITH_DOC = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


class History:
    """File lists and file texts of one bare repository, read once each."""

    def __init__(self, repo: Path, keep: Callable[[str], bool]) -> None:
        self.repo, self.keep = repo, keep
        self._files: dict[str, list[str]] = {}
        self._texts: dict[tuple[str, str], str | None] = {}

    def files(self, rev: str) -> list[str]:
        """The source files of ``rev``'s tree."""
        if rev not in self._files:
            out = self._git("ls-tree", "-r", "--name-only", rev) or ""
            self._files[rev] = [p for p in out.splitlines() if p.endswith(".py") and self.keep(p)]
        return self._files[rev]

    def text(self, rev: str, path: str) -> str | None:
        """The text of ``path`` at ``rev``; None when it is not there."""
        if (rev, path) not in self._texts:
            self._texts[rev, path] = self._git("show", f"{rev}:{path}")
        return self._texts[rev, path]

    def path_of(self, rev: str, path: str) -> str | None:
        """``path`` at ``rev``, else the one source file there with the same module name."""
        files = self.files(rev)
        if path in files:
            return path
        same = [p for p in files if module_name(p) == module_name(path)]
        return same[0] if len(same) == 1 else None

    def _git(self, *args: str) -> str | None:
        proc = subprocess.run(
            ["git", "-C", str(self.repo), "-c", "core.quotepath=off", *args],
            capture_output=True, text=True, encoding="utf-8", errors="replace", check=False,
        )  # fmt: skip
        return proc.stdout if proc.returncode == 0 else None


def history_warnings(task: Mapping[str, Any], tree: Path | None, history: History) -> list[str]:
    """The history warnings of one task (a task file's mapping); ``sdist!=parent`` only with its
    workspace ``tree`` (an unpacked sdist)."""
    meta = task["meta"]
    found: set[str] = set()
    for span, qualified in zip(task["gold"], meta["units"], strict=True):
        module = module_name(str(span["path"]))
        qualname = str(qualified).removeprefix(f"{module}.") if module else str(qualified)
        path = history.path_of(meta["parent"], str(span["path"]))
        before = history.text(meta["parent"], path) if path else None
        nodes = _nodes(before, qualname)
        lines = (before or "").splitlines()
        spans = [lines[n.lineno - 1 - _decorators(n) : n.end_lineno] for n in nodes]
        if tree is not None:  # the parent's definitions (of that name) that hold the sdist's span
            block = _read_lines(tree / str(span["path"]))[int(span["start"]) - 1 : int(span["end"])]
            held = [i for i, unit in enumerate(spans) if block and _holds(unit, block)]
            if not held:
                found.add("sdist!=parent")
        else:  # the span's lines are the parent's
            start = int(span["start"])
            held = [
                i for i, n in enumerate(nodes) if n.lineno - _decorators(n) <= start <= (n.end_lineno or 0)
            ]
        after = history.text(meta["commit"], path) if path else None
        later = _nodes(after, qualname)
        chosen = held or list(range(len(nodes)))  # overloads, setters: the one the span is, by ordinal
        if nodes and len(nodes) == len(later) and all(_code(nodes[i]) == _code(later[i]) for i in chosen):
            found.add("comment-only")
    return [w for w in HISTORY_WARNINGS if w in found]


def _nodes(text: str | None, qualname: str) -> list[_Node]:
    tree = parse_tree(text) if text is not None else None
    return [] if tree is None else [node for unit, node in unit_nodes(tree) if unit.qualname == qualname]


def _decorators(node: _Node) -> int:
    return node.lineno - min((d.lineno for d in node.decorator_list), default=node.lineno)


def _holds(lines: list[str], block: list[str]) -> bool:
    """Whether ``block`` is a run of consecutive lines of ``lines``."""
    return any(lines[i : i + len(block)] == block for i in range(len(lines) - len(block) + 1))


def _code(node: _Node) -> str:
    """The node's AST without positions and docstrings (comments are not in an AST)."""
    bare = copy.deepcopy(node)
    for inner in ast.walk(bare):
        if isinstance(inner, _WITH_DOC) and inner.body and _is_doc(inner.body[0]):
            inner.body = inner.body[1:] or [ast.Pass()]
    return ast.dump(bare, include_attributes=False)


def _is_doc(stmt: ast.stmt) -> bool:
    return (
        isinstance(stmt, ast.Expr)
        and isinstance(stmt.value, ast.Constant)
        and isinstance(stmt.value.value, str)
    )


def _read_lines(path: Path) -> list[str]:
    try:
        return path.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return []
