"""A repository's history into a task file: ``subagent-lab mine`` and ``sl.mine`` share this.

``bench.mine`` finds the tasks (commits, filters, gold units); this writes them where a sweep can
run them: each task in the repository at its parent commit (``{git, rev}``), or, given a release's
sdist and its unpacked tree, in that sdist with every gold unit found again by qualified name.
"""

from __future__ import annotations

import os
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from subagent_lab.bench import mine as mining
from subagent_lab.core.types import ConfigError


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
    not_in_sdist: int = 0
    """Tasks dropped because a gold unit is not in the sdist tree."""

    def summary(self) -> str:
        """One paragraph: commits read, what each filter removed, tasks written."""
        removed = ", ".join(f"{n} {self.removed[n]}" for n in mining.FILTERS if self.removed[n]) or "none"
        dropped = f"; {self.not_in_sdist} not in the sdist" if self.not_in_sdist else ""
        written = f"{self.written} tasks written to {self.path}"
        return f"{self.commits} commits; removed: {removed}{dropped}; {written}"


def mine_to_file(
    repo: str | Path,
    out: str | Path,
    *,
    revs: str | None = None,
    name: str | None = None,
    split: str = "dev",
    sdist: SdistTarget | None = None,
) -> MinedFile:
    """Mine ``repo``'s commits in ``revs`` (default: all of ``HEAD``) into the task file ``out``.

    Without ``sdist`` each task runs in the repository at its parent commit; the path is written
    relative to the task file when one holds the other, absolute otherwise. ConfigError for a
    repository git cannot read, or a malformed SHA-256.
    """
    repo, out = Path(repo), Path(out)
    if sdist is not None and not re.fullmatch(r"[0-9a-f]{64}", sdist.sha256):
        raise ConfigError(f"sdist {sdist.requirement}: sha256 must be 64 hex digits, got {sdist.sha256!r}")
    result = mining.mine(repo, revs, name=name)
    repo_ref = os.path.relpath(repo.resolve(), out.resolve().parent)
    if ".." in Path(repo_ref).parts and set(Path(repo_ref).parts) != {".."}:
        repo_ref = str(repo.resolve())  # neither holds the other: relative would only be fragile
    tasks, missing = [], 0
    for task in result.tasks:
        if sdist is None:
            tasks.append(task.to_dict({"git": repo_ref, "rev": task.commit.parents[0]}, str(repo)))
            continue
        mapped = mining.remap(task, sdist.tree)
        if mapped is None:
            missing += 1
            continue
        tasks.append(mapped.to_dict({"sdist": sdist.requirement, "sha256": sdist.sha256}, str(repo)))
    mining.write_tasks(out, tasks, suite=out.stem, split=split)
    return MinedFile(out, len(tasks), result.commits, result.removed, missing)
