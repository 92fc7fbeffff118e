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
does not parse at the parent or at the commit. 12. ``too-deep``: a changed file nests deeper than
the parser (or the AST walk) can follow. 13. ``module-level``: no def or class changed. 14.
``added-only``: the only changed units are new ones. 15. ``too-many-units``: more than
``MAX_UNITS`` gold spans. 16. ``absent-name``: the request names an identifier (``code_names``)
that is nowhere in the parent's tree and that the commit does not introduce. 17.
``no-narrowing-word``: no token of the request narrows the search in the code's own terms
(``bench.narrowing``). 18. ``duplicate``: the subject and gold units of a task kept earlier.

Gold: ``bench.gold`` (the definitions whose own code the commit changed, at the parent).
Commit messages are masked by the project's redactor (``core.redact``) before anything is taken
from them: a token in a message never reaches a prompt.
"""

from __future__ import annotations

import dataclasses
import re
import subprocess
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

import yaml

from subagent_lab.bench.commit_text import PROMPT_TEMPLATE, code_names, reads_as_request, request_text
from subagent_lab.bench.gold import (
    MAX_UNITS,
    CommitGold,
    FileChange,
    GoldUnit,
    commit_gold,
    parse_side,
    same_code,
)
from subagent_lab.bench.narrowing import narrows_at
from subagent_lab.bench.units import Unit, find_unit, module_name, names_symbol, parse_units
from subagent_lab.core.redact import Redactor
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
FILTERS = tuple([
    "root", "merge", "bot", "revert", "version", "not-a-request", "no-source", "too-many-files",
    "rename-only", "formatting-only", "docstring-only", "unparsable", "too-deep", "module-level",
    "added-only", "too-many-units", "absent-name", "no-narrowing-word", "duplicate"
])  # fmt: skip


__all__ = ["MAX_UNITS", "PROMPT_TEMPLATE", "GoldUnit", "MineResult", "MinedTask", "drifted", "mine",
           "reads_as_request", "remap", "request_text"]  # fmt: skip


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
class MinedTask:
    """One mined task before it is written: the commit, its request and its gold units."""

    id: str
    request: str
    commit: Commit
    units: tuple[GoldUnit, ...]
    added: tuple[str, ...] = ()
    """Units the commit added (qualified names): not gold, they are not in the parent."""
    introduced: tuple[str, ...] = ()
    """The request's ``code_names`` that the commit introduces (absent at the parent by design)."""

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
        meta: dict[str, Any] = {
            "repo": repo,
            "commit": self.commit.sha,
            "parent": self.commit.parents[0],
            "subject": self.commit.subject,
            "units": [g.qualified for g in self.units],
            "names_gold_symbol": self.names_gold_symbol,
        }
        if self.added:
            meta["added"] = list(self.added)
        return {
            "id": self.id,
            "kind": "localize",
            "prompt": self.prompt,
            "workspace": dict(workspace),
            "gold": [
                {"path": g.path, "start": g.lines[0], "end": g.lines[1], "anchor": g.anchor}
                for g in self.units
            ],
            "meta": meta,
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


def list_commits(
    repo: Path, revs: str | None = None, *, since: str | None = None, max_commits: int | None = None
) -> list[Commit]:
    """The commits of ``revs`` (default ``HEAD``), oldest first, ties by sha: with ``since`` (a date
    git reads, e.g. ``2024-01-01``) only those committed since, with ``max_commits`` the newest N."""
    if revs is not None and revs.startswith("-"):
        raise ConfigError(f"{repo}: a revision range cannot start with '-': {revs!r}")
    limits = [f"--since={since}"] if since else []
    limits += [f"--max-count={max_commits}"] if max_commits is not None else []
    out = git(repo, "log", "--format=%H%x1f%P%x1f%an%x1f%ae%x1f%ct%x1f%B%x1e", *limits, revs or "HEAD", "--")
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


def mine(
    repo: Path,
    revs: str | None = None,
    *,
    name: str | None = None,
    since: str | None = None,
    max_commits: int | None = None,
) -> MineResult:
    """Mine ``repo``'s commits in ``revs`` into tasks with ids ``<name>-<sha7>`` (name: the repo's);
    ``since``/``max_commits`` as ``list_commits``."""
    prefix = _id_prefix(name or _repo_name(repo))
    result = MineResult()
    redact = Redactor()
    seen: set[tuple[str, tuple[str, ...]]] = set()
    for commit in list_commits(repo, revs, since=since, max_commits=max_commits):
        result.commits += 1
        commit = dataclasses.replace(commit, message=redact(commit.message))
        reason, task = subject_filter(commit), None
        if reason is None:
            try:
                reason, task = _task(repo, commit)
            except (RecursionError, MemoryError):  # nested deeper than ast can follow: skip, count
                reason = "too-deep"
        if task is not None:
            key = (commit.subject, tuple(g.qualified for g in task.units))
            reason = "duplicate" if key in seen else None
            seen.add(key)
        if task is None or reason is not None:
            result.removed[reason or "too-deep"] += 1
            continue
        result.tasks.append(task)
    taken: set[str] = set()
    for i, task in enumerate(result.tasks):
        width = 7
        while f"{prefix}-{task.commit.sha[:width]}" in taken:
            width += 1
        task_id = f"{prefix}-{task.commit.sha[:width]}"
        taken.add(task_id)
        result.tasks[i] = dataclasses.replace(task, id=task_id)
    return result


def _repo_name(repo: Path) -> str:
    path = repo.resolve()
    base = path.name.removesuffix(".git")
    return path.parent.name.split("+")[-1] if base in ("repo", "") else base


def _id_prefix(name: str) -> str:
    return re.sub(r"[^a-z0-9._-]+", "-", name.lower()).strip("-._") or "repo"


def _task(repo: Path, commit: Commit) -> tuple[str | None, MinedTask | None]:
    """Filters 6-17 on the commit's diff, or the task when none removes it."""
    parent = commit.parents[0]
    changes = []
    for line in git(repo, "diff", "--name-status", "-M", "--no-color", parent, commit.sha).splitlines():
        status, *paths = line.split("\t")
        old, new = paths[0], paths[-1]
        if is_source(new) or is_source(old):
            changes.append((status, old, new))
    if not changes:
        return "no-source", None
    if len(changes) > MAX_FILES:
        return "too-many-files", None
    if all(s == "R100" for s, _, _ in changes):
        return "rename-only", None
    files = [
        FileChange(
            old,
            new,
            parse_side(None if status[0] == "A" else git(repo, "show", f"{parent}:{old}")),
            parse_side(None if status[0] == "D" else git(repo, "show", f"{commit.sha}:{new}")),
        )
        for status, old, new in changes
    ]
    edited = [
        (f.before, f.after) for (status, _, _), f in zip(changes, files, strict=True) if status[0] in "MR"
    ]
    pairs = [(b, a) for b, a in edited if b is not None and a is not None]
    if len(pairs) == len(changes):  # every file edited and parsed on both sides
        if all(same_code(b, a, docstrings=True) for b, a in pairs):
            return "formatting-only", None
        if all(same_code(b, a, docstrings=False) for b, a in pairs):
            return "docstring-only", None
    gold: CommitGold = commit_gold(files)
    if gold.reason is not None:
        return gold.reason, None
    request = request_text(commit.message)
    before = "\n".join(f.before.text for f in files if f.before is not None)
    after = "\n".join(f.after.text for f in files if f.after is not None)
    introduced, absent = [], []
    for word in code_names(request):
        if _has_word(after, word) and not _has_word(before, word):
            introduced.append(word)
        elif not _tree_has_word(repo, parent, word):
            absent.append(word)
    if absent:
        return "absent-name", None
    if not narrows_at(request, repo, parent, is_source):
        return "no-narrowing-word", None
    return None, MinedTask("", request, commit, gold.units, gold.added, tuple(introduced))


def _has_word(text: str, word: str) -> bool:
    return re.search(rf"(?<!\w){re.escape(word)}(?!\w)", text) is not None


def _tree_has_word(repo: Path, rev: str, word: str) -> bool:
    """Whether ``word`` occurs as a whole word in any file of ``rev``'s tree (``git grep``)."""
    proc = subprocess.run(
        ["git", "-C", str(repo), "grep", "-q", "-w", "-F", "-I", "-e", word, rev, "--"],
        capture_output=True,
        check=False,
    )
    if proc.returncode not in (0, 1):
        raise ConfigError(f"{repo}: git grep failed: {proc.stderr.decode(errors='replace').strip()[:300]}")
    return proc.returncode == 0


def remap(task: MinedTask, tree: Path) -> MinedTask | None:
    """``task`` with each gold unit found again BY QUALIFIED NAME in ``tree`` (another revision's
    files, e.g. an unpacked sdist), spans re-derived from that tree's AST; None when one is missing.

    A file is the one at the same path, else the one with the same module name; a unit must be
    defined as many times there as at the parent (``units.find_unit``). A partial span (a class's
    own statements) moves with its class; ``drifted`` says whether the code there is the parent's.
    """
    mapped = []
    for gold in task.units:
        found = _locate(tree, gold)
        if found is None:
            return None
        path, unit, lines = found
        mapped.append(gold.moved(path, unit, lines))
    units = tuple(sorted(mapped, key=lambda g: (g.path, g.lines[0], -g.lines[1])))
    return dataclasses.replace(task, units=units)


def drifted(repo: Path, task: MinedTask, tree: Path) -> list[str]:
    """The gold units of ``task`` (qualified names) whose text in ``tree`` is not their text at the
    commit's parent, or that ``tree`` lacks: there the workspace does not hold the code the commit
    changed."""
    parent_files: dict[str, list[str]] = {}
    differ = set()
    for gold in task.units:
        if gold.path not in parent_files:
            parent_files[gold.path] = git(repo, "show", f"{task.commit.parents[0]}:{gold.path}").splitlines()
        found = _locate(tree, gold)
        before = parent_files[gold.path][gold.unit.start - 1 : gold.unit.end]
        if found is None or found[2][found[1].start - 1 : found[1].end] != before:
            differ.add(gold.qualified)
    return sorted(differ)


def _locate(tree: Path, gold: GoldUnit) -> tuple[str, Unit, list[str]] | None:
    """The file, unit and lines of ``gold``'s unit in ``tree``, or None."""
    path = _same_module(tree, gold.path)
    if path is None:
        return None
    text = (tree / path).read_text(encoding="utf-8", errors="replace")
    unit = find_unit(parse_units(text) or [], gold.unit.qualname, gold.unit.ordinal, gold.count)
    return None if unit is None else (path, unit, text.splitlines())


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
