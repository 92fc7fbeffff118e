"""The miner: ``localize`` tasks from a git repository's history, with no model.

Each non-merge commit of the range is kept or removed by the first filter, in this order, that
removes it (``FILTERS``; docs/benchmarks-mined.md states each rule):

0. ``root``: no parent. 1. ``merge``: more than one parent. 2. ``bot``: author name or e-mail
looks like a bot (``BOT``).
3. ``revert``: ``Revert ...`` or "This reverts commit". 4. ``version``: a release or version bump
(``VERSION``). 5. ``not-a-request``: the subject, after a ``component:`` or ``[tag]`` prefix is cut,
does not start with one of ``commit_text.VERBS``, or fewer than three words are left once issue references are
stripped. 6. ``no-source``: no changed source file (``is_source``). 7. ``too-many-files``: more than
four source files. 8. ``rename-only``: every source change is a pure rename. 9. ``formatting-only``:
every changed source file has the same AST before and after (comments, layout). 10.
``docstring-only``: the same AST once docstrings are removed. 11. ``unparsable``: a changed file
does not parse at the parent. 12. ``module-level``: no changed line lies inside a def or class.
13. ``too-many-units``: more than ``MAX_UNITS`` gold units.

Gold: the innermost def/class at the PARENT around each deleted or modified line of
``git diff -U0 parent commit``; lines inserted after line L belong to the innermost unit holding
both L and L+1 (so a new def beside others belongs to none). Changed lines at module level
(imports, constants) add nothing. Each unit's whole span at the parent, decorators included.
"""

from __future__ import annotations

import ast
import re
import subprocess
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

import yaml

from subagent_lab.bench.commit_text import PROMPT_TEMPLATE, reads_as_request, request_text
from subagent_lab.bench.units import (
    Unit,
    enclosing_insertion,
    find_unit,
    innermost,
    module_name,
    names_symbol,
    parse_units,
)
from subagent_lab.core.types import ConfigError

BOT = re.compile(
    r"\[bot\]|(^|[^a-z])bot@|dependabot|renovate|pre-commit-ci|github-actions|greenkeeper|pyup|"
    r"allcontributors|imgbot|snyk",
    re.I,
)
VERSION = re.compile(
    r"^(v?\d+(\.\d+)+\b|release\b|releasing\b|bump\b|prepare\b.*\b(release|\d+\.\d+)|(update|set|"
    r"increase|change) (the )?version|version\b|changelog\b)",
    re.I,
)
REVERT = re.compile(r"^revert\b|this reverts commit", re.I | re.M)
SKIP_PARTS = frozenset([
    "tests", "test", "testing", "docs", "doc", "examples", "example", "benchmarks", "benchmark",
    "scripts", "tools", ".github", "ci", "changelog.d"
])  # fmt: skip
SKIP_FILES = frozenset({"setup.py", "conftest.py", "noxfile.py", "tasks.py", "fabfile.py", "conf.py"})
MAX_FILES = 4
MAX_UNITS = 6
FILTERS = tuple([
    "root", "merge", "bot", "revert", "version", "not-a-request", "no-source", "too-many-files",
    "rename-only", "formatting-only", "docstring-only", "unparsable", "module-level", "too-many-units"
])  # fmt: skip


__all__ = ["PROMPT_TEMPLATE", "MineResult", "MinedTask", "mine", "reads_as_request", "remap", "request_text"]


@dataclass(frozen=True)
class Commit:
    """One commit as ``git log`` prints it."""

    sha: str
    parents: tuple[str, ...]
    author: str
    email: str
    time: int
    message: str

    @property
    def subject(self) -> str:
        """The first line of the message."""
        return self.message.strip().split("\n", 1)[0].strip()


@dataclass(frozen=True)
class GoldUnit:
    """A unit a commit changed: its file and span at the parent (or at the tree it was mapped to)."""

    path: str
    unit: Unit
    count: int
    """How many units of that file share its qualname (see ``units.find_unit``)."""

    @property
    def qualified(self) -> str:
        """``package.module.Qual.name``."""
        module = module_name(self.path)
        return f"{module}.{self.unit.qualname}" if module else self.unit.qualname


@dataclass(frozen=True)
class MinedTask:
    """One mined task before it is written: the commit, its request and its gold units."""

    id: str
    request: str
    commit: Commit
    units: tuple[GoldUnit, ...]

    @property
    def prompt(self) -> str:
        """The prompt, by ``PROMPT_TEMPLATE``."""
        return PROMPT_TEMPLATE.format(request=self.request)

    @property
    def names_gold_symbol(self) -> bool:
        """Whether the request names one of its gold units (flagged, not hidden)."""
        return names_symbol(self.request, [g.unit.name for g in self.units])

    def to_dict(self, workspace: dict[str, str], repo: str) -> dict[str, Any]:
        """The task as the task file holds it (see TASKFILE: ``kind: localize``)."""
        return {
            "id": self.id,
            "kind": "localize",
            "prompt": self.prompt,
            "workspace": dict(workspace),
            "gold": [
                {"path": g.path, "start": g.unit.start, "end": g.unit.end, "anchor": g.unit.anchor}
                for g in self.units
            ],
            "meta": {
                "repo": repo,
                "commit": self.commit.sha,
                "parent": self.commit.parents[0],
                "subject": self.commit.subject,
                "units": [g.qualified for g in self.units],
                "names_gold_symbol": self.names_gold_symbol,
            },
        }


@dataclass
class MineResult:
    """What ``mine`` kept, and how many commits each filter removed."""

    tasks: list[MinedTask] = field(default_factory=list)
    removed: Counter[str] = field(default_factory=Counter)
    commits: int = 0


def git(repo: Path, *args: str) -> str:
    """Run git in ``repo`` (a work tree or a bare git directory); its stdout. ConfigError on failure."""
    proc = subprocess.run(
        ["git", "-C", str(repo), "-c", "core.quotepath=off", *args],
        capture_output=True,
        text=True,
        encoding="utf-8",
        errors="replace",
        check=False,
    )
    if proc.returncode != 0:
        raise ConfigError(f"{repo}: git {' '.join(args[:3])} failed: {proc.stderr.strip()[:300]}")
    return proc.stdout


def list_commits(repo: Path, revs: str | None = None) -> list[Commit]:
    """The commits of ``revs`` (default ``HEAD``), oldest first, ties by sha."""
    out = git(repo, "log", "--format=%H%x1f%P%x1f%an%x1f%ae%x1f%ct%x1f%B%x1e", revs or "HEAD", "--")
    commits = []
    for record in out.split("\x1e"):
        if not record.strip():
            continue
        sha, parents, author, email, time, message = record.strip("\n").split("\x1f", 5)
        commits.append(Commit(sha, tuple(parents.split()), author, email, int(time), message))
    return sorted(commits, key=lambda c: (c.time, c.sha))


def is_source(path: str) -> bool:
    """A library source file: ``.py``, not under tests/docs/examples/..., not setup/conftest/test_*."""
    p = PurePosixPath(path)
    name = p.name
    if p.suffix != ".py" or name in SKIP_FILES or name.startswith("test_") or name.endswith("_test.py"):
        return False
    return not any(part.lower() in SKIP_PARTS for part in p.parts[:-1])


def subject_filter(commit: Commit) -> str | None:
    """The first message/author filter that removes ``commit`` (filters 0-5), or None."""
    if not commit.parents:
        return "root"
    if len(commit.parents) > 1:
        return "merge"
    if BOT.search(commit.author) or BOT.search(commit.email):
        return "bot"
    if REVERT.search(commit.message):
        return "revert"
    if VERSION.search(commit.subject):
        return "version"
    if not reads_as_request(request_text(commit.message)):
        return "not-a-request"
    return None


def mine(repo: Path, revs: str | None = None, *, name: str | None = None) -> MineResult:
    """Mine ``repo``'s commits in ``revs`` into tasks with ids ``<name>-<sha7>`` (name: the repo's)."""
    prefix = _id_prefix(name or _repo_name(repo))
    result = MineResult()
    for commit in list_commits(repo, revs):
        result.commits += 1
        reason = subject_filter(commit)
        units: tuple[GoldUnit, ...] = ()
        if reason is None:
            reason, units = _gold(repo, commit)
        if reason is not None:
            result.removed[reason] += 1
            continue
        result.tasks.append(MinedTask("", request_text(commit.message), commit, units))
    taken: set[str] = set()
    for i, task in enumerate(result.tasks):
        width = 7
        while f"{prefix}-{task.commit.sha[:width]}" in taken:
            width += 1
        task_id = f"{prefix}-{task.commit.sha[:width]}"
        taken.add(task_id)
        result.tasks[i] = MinedTask(task_id, task.request, task.commit, task.units)
    return result


def _repo_name(repo: Path) -> str:
    path = repo.resolve()
    base = path.name.removesuffix(".git")
    return path.parent.name.split("+")[-1] if base in ("repo", "") else base


def _id_prefix(name: str) -> str:
    return re.sub(r"[^a-z0-9._-]+", "-", name.lower()).strip("-._") or "repo"


def _gold(repo: Path, commit: Commit) -> tuple[str | None, tuple[GoldUnit, ...]]:
    """Filters 6-12 on the commit's diff, or the gold units when none removes it."""
    parent = commit.parents[0]
    changes = []
    for line in git(repo, "diff", "--name-status", "-M", "--no-color", parent, commit.sha).splitlines():
        status, *paths = line.split("\t")
        old, new = paths[0], paths[-1]
        if is_source(new) or is_source(old):
            changes.append((status, old, new))
    if not changes:
        return "no-source", ()
    if len(changes) > MAX_FILES:
        return "too-many-files", ()
    if all(s == "R100" for s, _, _ in changes):
        return "rename-only", ()
    edited = [(old, new) for s, old, new in changes if s[0] in "MR"]
    if len(edited) == len(changes):
        if all(_same_code(repo, parent, old, commit.sha, new, docstrings=True) for old, new in edited):
            return "formatting-only", ()
        if all(_same_code(repo, parent, old, commit.sha, new, docstrings=False) for old, new in edited):
            return "docstring-only", ()
    hunks = _hunks(repo, parent, commit.sha, sorted({p for _, old, new in changes for p in (old, new)}))
    found: dict[tuple[str, str, int], GoldUnit] = {}
    for path, spans in hunks.items():
        units = parse_units(git(repo, "show", f"{parent}:{path}"))
        if units is None:
            return "unparsable", ()
        for start, count in spans:
            hits = (
                [innermost(units, n) for n in range(start, start + count)]
                if count
                else [enclosing_insertion(units, start)]
            )
            for unit in hits:
                if unit is not None:
                    total = sum(u.qualname == unit.qualname for u in units)
                    found[(path, unit.qualname, unit.ordinal)] = GoldUnit(path, unit, total)
    if not found:
        return "module-level", ()
    if len(found) > MAX_UNITS:
        return "too-many-units", ()
    return None, tuple(sorted(found.values(), key=lambda g: (g.path, g.unit.start)))


def _same_code(repo: Path, parent: str, old: str, sha: str, new: str, *, docstrings: bool) -> bool:
    """Whether both versions have the same AST (``docstrings=False``: once docstrings are removed)."""
    try:
        before = ast.parse(git(repo, "show", f"{parent}:{old}"))
        after = ast.parse(git(repo, "show", f"{sha}:{new}"))
    except (SyntaxError, ValueError):
        return False
    if not docstrings:
        before, after = _without_docstrings(before), _without_docstrings(after)
    return ast.dump(before) == ast.dump(after)


def _without_docstrings(tree: ast.Module) -> ast.Module:
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            first = body[0].value if body and isinstance(body[0], ast.Expr) else None
            if isinstance(first, ast.Constant) and isinstance(first.value, str):
                node.body = body[1:] or [ast.Pass()]
    return tree


def _hunks(repo: Path, parent: str, sha: str, paths: list[str]) -> dict[str, list[tuple[int, int]]]:
    """Per old path: the ``(start, count)`` of each hunk's old side (count 0: insertion after start)."""
    if not paths:
        return {}
    diff = git(repo, "diff", "-U0", "-M", "--no-color", "--no-ext-diff", "--src-prefix=a/",
               "--dst-prefix=b/", parent, sha, "--", *paths)  # fmt: skip
    hunks: dict[str, list[tuple[int, int]]] = {}
    current: str | None = None
    for line in diff.splitlines():
        if line.startswith("--- "):
            current = line[6:] if line.startswith("--- a/") else None
        elif line.startswith("@@ ") and current in paths:
            match = re.match(r"@@ -(\d+)(?:,(\d+))? ", line)
            if match:
                count = 1 if match.group(2) is None else int(match.group(2))
                hunks.setdefault(current, []).append((int(match.group(1)), count))
    return hunks


def remap(task: MinedTask, tree: Path) -> MinedTask | None:
    """``task`` with each gold unit found again BY QUALIFIED NAME in ``tree`` (another revision's
    files, e.g. an unpacked sdist), spans re-derived from that tree's AST; None when one is missing.

    A file is the one at the same path, else the one with the same module name; a unit must be
    defined as many times there as at the parent (``units.find_unit``).
    """
    mapped = []
    for gold in task.units:
        path = _same_module(tree, gold.path)
        if path is None:
            return None
        units = parse_units((tree / path).read_text(encoding="utf-8", errors="replace"))
        unit = find_unit(units or [], gold.unit.qualname, gold.unit.ordinal, gold.count)
        if unit is None:
            return None
        mapped.append(GoldUnit(path, unit, gold.count))
    return MinedTask(
        task.id, task.request, task.commit, tuple(sorted(mapped, key=lambda g: (g.path, g.unit.start)))
    )


def _same_module(tree: Path, path: str) -> str | None:
    if (tree / path).is_file():
        return path
    module = module_name(path)
    hits = sorted(
        p.relative_to(tree).as_posix()
        for p in tree.rglob(PurePosixPath(path).name)
        if is_source(p.relative_to(tree).as_posix()) and module_name(p.relative_to(tree).as_posix()) == module
    )
    return hits[0] if len(hits) == 1 else None


def write_tasks(path: Path, tasks: list[dict[str, Any]], *, suite: str, split: str, header: str = "") -> None:
    """Write ``tasks`` (``MinedTask.to_dict``) as a task file, sorted by id: same input, same bytes."""
    body = {"suite": suite, "split": split, "tasks": sorted(tasks, key=lambda t: t["id"])}
    comment = "".join(f"# {line}".rstrip() + "\n" for line in header.splitlines())
    text = yaml.safe_dump(body, sort_keys=False, allow_unicode=True, width=100)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(comment + text, encoding="utf-8")
