"""Several task files into one: ``subagent-lab tasks merge A B -o C`` and ``sweep --tasks A B``.

Each task is taken once: a later task with an id, or a ``meta.commit``, already taken is left out
and counted. Workspace paths written relative to their file (``{git: ../repo}``, ``{dir: src}``)
are rewritten relative to the merged file, so it runs wherever it is written; each file's
``split`` and ``workspace`` defaults are carried into its tasks. The merged file is loaded back
(``load_suite``) before this returns, so an invalid merge fails here, naming the file.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from subagent_lab.bench.git_checkout import is_url
from subagent_lab.bench.mine import write_tasks
from subagent_lab.bench.suite import load_suite
from subagent_lab.core.types import ConfigError


@dataclass(frozen=True)
class MergedFile:
    """What ``merge_task_files`` wrote."""

    path: Path
    written: int
    duplicates: int
    """Tasks left out: their id or their ``meta.commit`` was taken from an earlier file or task."""
    sources: int

    def summary(self) -> str:
        """One line."""
        return (
            f"{self.written} tasks from {self.sources} files written to {self.path}; "
            f"{self.duplicates} duplicates (same id or commit) left out"
        )


def merge_task_files(files: list[Path], out: Path) -> MergedFile:
    """Merge ``files`` (YAML or JSONL task files) into ``out``, sorted by id. ConfigError for a
    file that cannot be read or a merge that is not a valid task file."""
    tasks: list[dict[str, Any]] = []
    ids: set[str] = set()
    commits: set[str] = set()
    duplicates = 0
    for file in files:
        for task in _tasks(file):
            commit = str((task.get("meta") or {}).get("commit") or "")
            if str(task.get("id")) in ids or (commit and commit in commits):
                duplicates += 1
                continue
            ids.add(str(task.get("id")))
            if commit:
                commits.add(commit)
            tasks.append(_rebased(task, file.resolve().parent, out.resolve().parent))
    splits = {str(t.get("split", "dev")) for t in tasks}
    split = splits.pop() if len(splits) == 1 else "dev"
    for task in tasks:
        if task.get("split") == split:
            del task["split"]
    suite = re.sub(r"[^a-z0-9._-]+", "-", out.stem.lower()).strip("-._") or "merged"
    write_tasks(out, tasks, suite=suite, split=split)
    load_suite(out)
    return MergedFile(out, len(tasks), duplicates, len(files))


def _tasks(file: Path) -> list[dict[str, Any]]:
    try:
        text = file.read_text(encoding="utf-8")
        if file.suffix == ".jsonl":
            return [json.loads(line) for line in text.splitlines() if line.strip()]
        raw = yaml.safe_load(text)
    except (OSError, yaml.YAMLError, json.JSONDecodeError) as exc:
        raise ConfigError(f"{file}: cannot read the task file: {exc}") from exc
    if not isinstance(raw, dict) or not isinstance(raw.get("tasks"), list):
        raise ConfigError(f"{file}: a task file is a mapping with a 'tasks' list (or JSONL)")
    defaults = {k: raw[k] for k in ("split", "workspace") if raw.get(k) is not None}
    if not all(isinstance(t, dict) for t in raw["tasks"]):
        raise ConfigError(f"{file}: tasks: each task is a mapping")
    return [{**defaults, **t} for t in raw["tasks"]]


def _rebased(task: dict[str, Any], base: Path, out_dir: Path) -> dict[str, Any]:
    """``task`` with a relative ``git`` or ``dir`` workspace path made relative to ``out_dir``."""
    workspace = task.get("workspace")
    if not isinstance(workspace, dict):
        return dict(task)
    rebased = dict(workspace)
    for key in ("git", "dir"):
        value = rebased.get(key)
        if isinstance(value, str) and not is_url(value) and not Path(value).is_absolute():
            rebased[key] = Path(os.path.relpath((base / value).resolve(), out_dir)).as_posix()
    return {**task, "workspace": rebased}
