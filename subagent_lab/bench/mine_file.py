"""A repository's history into a task file: ``subagent-lab mine`` and ``sl.mine`` share this.

``bench.mine`` finds the tasks (commits, filters, gold units); this writes them where a sweep can
run them: each task in the repository at its parent commit (``{git, rev}``, the repository's path
written relative to the task file, wherever the two are), or, given a release's sdist and its
unpacked tree, in that sdist, with every gold unit found again by qualified name AND holding the
parent's code there (else the task is dropped and counted: ``not-in-sdist``, ``sdist-differs``),
and every identifier the request names present in the tree (``absent-name``).
"""

from __future__ import annotations

import os
import random
import re
import subprocess
from collections import Counter
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path
from typing import Any

from subagent_lab.bench import mine as mining
from subagent_lab.bench.commit_text import code_names
from subagent_lab.bench.gold_warnings import LONG_LINES, TASK_WARNINGS, TreeWords, count_warnings
from subagent_lab.core.redact import mask_url
from subagent_lab.core.types import ConfigError

DROPS = ("not-in-sdist", "sdist-differs", "absent-name")
"""Tasks dropped after mining, when they run in an sdist (counted in ``MinedFile.dropped``)."""


@dataclass(frozen=True)
class SdistTarget:
    """Run the mined tasks in this sdist: ``name==version``, its SHA-256, and its unpacked tree."""

    requirement: str
    sha256: str
    tree: Path


@dataclass
class MinedFile:
    """What ``mine_to_file`` wrote, and what it left out and why."""

    path: Path
    written: int
    commits: int
    removed: Counter[str] = field(default_factory=Counter)
    """Commits each filter removed (``mine.FILTERS`` order)."""
    dropped: Counter[str] = field(default_factory=Counter)
    """Tasks dropped after mining (``DROPS``): a gold unit not in the sdist, or not the parent's
    code there; an identifier of the request not in the sdist's tree."""
    kept: int = 0
    """Tasks that passed every filter (``written`` is fewer with ``sample``)."""
    warnings: Counter[str] = field(default_factory=Counter)
    """Written tasks per gold warning (``gold_warnings.TASK_WARNINGS``: ``leak`` is a request that
    names a gold unit)."""

    @property
    def not_in_sdist(self) -> int:
        """Tasks dropped because a gold unit is not in the sdist tree."""
        return self.dropped["not-in-sdist"]

    def summary(self) -> str:
        """What was read, what each filter removed, what was written and its gold warnings."""
        removed = ", ".join(f"{n} {self.removed[n]}" for n in mining.FILTERS if self.removed[n]) or "none"
        dropped = "".join(f"; {self.dropped[n]} {n}" for n in DROPS if self.dropped[n])
        sampled = f" (a sample of {self.kept})" if self.kept != self.written else ""
        warned = ", ".join(f"{n} {self.warnings[n]}" for n in TASK_WARNINGS)
        return (
            f"{self.commits} commits; removed: {removed}{dropped}\n"
            f"{self.written} tasks written to {self.path}{sampled}; gold warnings: {warned} "
            f"(leak: the request names a gold unit; long: a span over {LONG_LINES} lines)"
        )


def mine_to_file(
    repo: str | Path,
    out: str | Path,
    *,
    revs: str | None = None,
    name: str | None = None,
    split: str = "dev",
    sdist: SdistTarget | None = None,
    since: str | None = None,
    max_commits: int | None = None,
    sample: int | None = None,
    seed: int = 0,
) -> MinedFile:
    """Mine ``repo``'s commits in ``revs`` (default: all of ``HEAD``) into the task file ``out``.

    ``since`` (``YYYY-MM-DD``): only commits from that day on; ``max_commits``: only the newest N
    commits; ``sample``: write N of the kept tasks, drawn with ``seed`` (same input, same file).
    Without ``sdist`` each task runs in the repository at its parent commit, written relative to
    the task file. ConfigError for a repository git cannot read, a malformed SHA-256, date or count.
    """
    repo, out = Path(repo), Path(out)
    if sdist is not None and not re.fullmatch(r"[0-9a-f]{64}", sdist.sha256):
        raise ConfigError(f"sdist {sdist.requirement}: sha256 must be 64 hex digits, got {sdist.sha256!r}")
    if since is not None:
        try:
            date.fromisoformat(since)
        except ValueError as exc:
            raise ConfigError(f"--since must be a date YYYY-MM-DD, got {since!r}") from exc
    for flag, value in (("--max", max_commits), ("--sample", sample)):
        if value is not None and value < 1:
            raise ConfigError(f"{flag} must be at least 1, got {value}")
    result = mining.mine(repo, revs, name=name, since=since, max_commits=max_commits)
    # Relative even when neither folder holds the other: an absolute path names one machine.
    repo_ref = Path(os.path.relpath(repo.resolve(), out.resolve().parent)).as_posix()
    origin = _origin(repo) or repo_ref
    tasks: list[dict[str, Any]] = []
    dropped: Counter[str] = Counter()
    words = TreeWords(sdist.tree) if sdist is not None else None
    for task in result.tasks:
        if sdist is None or words is None:
            tasks.append(task.to_dict({"git": repo_ref, "rev": task.commit.parents[0]}, origin))
            continue
        mapped = mining.remap(task, sdist.tree)
        if mapped is None:
            dropped["not-in-sdist"] += 1
        elif mining.drifted(repo, task, sdist.tree):
            dropped["sdist-differs"] += 1
        elif any(not words.has(n) for n in code_names(task.request) if n not in task.introduced):
            dropped["absent-name"] += 1
        else:
            tasks.append(mapped.to_dict({"sdist": sdist.requirement, "sha256": sdist.sha256}, origin))
    kept = len(tasks)
    if sample is not None and sample < kept:
        tasks = random.Random(seed).sample(sorted(tasks, key=lambda t: t["id"]), sample)
    suite = re.sub(r"[^a-z0-9._-]+", "-", out.stem.lower()).strip("-._") or "mined"
    mining.write_tasks(out, tasks, suite=suite, split=split)
    warnings = count_warnings((t, None) for t in tasks)
    return MinedFile(out, len(tasks), result.commits, result.removed, dropped, kept, warnings)


def _origin(repo: Path) -> str | None:
    """The repository's ``origin`` URL (a password in it masked), when it has one."""
    proc = subprocess.run(
        ["git", "-C", str(repo), "config", "--get", "remote.origin.url"],
        capture_output=True,
        text=True,
        check=False,
    )
    url = proc.stdout.strip()
    if proc.returncode != 0 or not ("://" in url or re.match(r"[\w.-]+@[\w.-]+:", url)):
        return None
    return mask_url(url)
