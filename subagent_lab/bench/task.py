"""The task model of a task file (docs/task-files.md): ``BenchTask``, its ``GoldSpan`` s, the file.

A task needs an id, a prompt and a workspace (``bench.workspace_spec``); kind, difficulty, gold
spans (each with an optional anchor), keywords and a free ``meta`` mapping are optional. A task
without gold is run and tabulated but not scored (``BenchTask.scored``).

The hand-written suites (``tasks.yaml``, ``tasks_test.yaml``) are task files too: their tasks name
a ``package`` and ``workspace: installed`` or ``tree``, which map to ``{installed: package}`` and
to the package's pinned sdist (``bench.workspaces.SDISTS``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from subagent_lab.bench.workspace_spec import InstalledWorkspace, SdistWorkspace, WorkspaceSpec
from subagent_lab.bench.workspaces import SDISTS

TaskKind = Literal["locate", "trace", "enumerate", "explain", "absent", "localize"]
"""``localize``: mined from a real change, gold = the definitions it modified; ``absent``: the
honest answer is "not there"."""
Difficulty = Literal["easy", "medium", "hard"]
Split = Literal["dev", "test"]
LegacyWorkspace = Literal["installed", "tree"]
"""The hand-written suites' workspaces: ``installed`` (the package's installed directory) or
``tree`` (its pinned, unpacked sdist)."""

SPLIT_PACKAGES: dict[Split, frozenset[str]] = {
    "dev": frozenset({"jinja2", "yaml", "tqdm"}),
    "test": frozenset({"marshmallow", "attrs", "markdown"}),
}
"""The legacy suites' packages per split; no package is in two (a test task never shares a tree
with dev). A task naming one of these is held to its split."""
LEGACY_PACKAGES = SPLIT_PACKAGES["dev"] | SPLIT_PACKAGES["test"]


class GoldSpan(BaseModel):
    """A range of lines that a correct answer should cite (1-based, inclusive)."""

    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)

    path: str = Field(min_length=1)
    """Path relative to the task's workspace root."""
    start: int = Field(ge=1)
    end: int = Field(ge=1)
    anchor: str | None = Field(default=None, min_length=1)
    """Text that must occur within lines ``start..end`` (checked when given); catches drift."""

    @model_validator(mode="after")
    def _ordered(self) -> GoldSpan:
        if self.end < self.start:
            raise ValueError(f"end ({self.end}) is before start ({self.start})")
        if self.path.startswith("/") or ".." in Path(self.path).parts:
            raise ValueError(f"gold path must be relative to the workspace root: {self.path!r}")
        return self

    @property
    def label(self) -> str:
        """The span written as an evidence item: ``path:start-end``."""
        return f"{self.path}:{self.start}-{self.end}"


class BenchTask(BaseModel):
    """One explore task: the prompt a user would give, where it runs, what a good answer contains."""

    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)

    id: str = Field(min_length=1, pattern=r"^[a-z0-9][a-z0-9._-]*$")
    prompt: str = Field(min_length=10)
    workspace: WorkspaceSpec
    """Where it runs: ``{dir}``, ``{git, rev}``, ``{sdist, sha256}`` or ``{installed}``."""
    kind: TaskKind = "localize"
    package: str | None = None
    """The package it is about (the legacy suites name one; a table groups by it)."""
    difficulty: Difficulty | None = None
    gold: tuple[GoldSpan, ...] = ()
    """Without gold (and not ``absent``), the task is run and tabulated but not scored."""
    keywords: tuple[str, ...] = ()
    """Words a good summary/findings should mention (matched case-insensitively)."""
    smoke: bool = False
    """Easy locate tasks used for the quick real-model sweep."""
    split: Split = "dev"
    probes: tuple[str, ...] = ()
    """Absent tasks: strings that occur in no file of the workspace (case-insensitive), which
    backs the gold answer "not there"."""
    meta: dict[str, Any] = Field(default_factory=dict)
    """Free-form facts about the task (repository, commit, ...), carried to rows as JSON."""

    @model_validator(mode="before")
    @classmethod
    def _legacy_workspace(cls, data: Any) -> Any:
        """``workspace: installed | tree`` (or none) of a task naming a package -> its spec."""
        if not isinstance(data, dict):
            return data
        workspace, package = data.get("workspace", "installed"), data.get("package")
        if not isinstance(workspace, str) or not isinstance(package, str):
            return data
        if workspace == "installed":
            return {**data, "workspace": {"installed": package}}
        if workspace == "tree" and package in SDISTS:
            pin = SDISTS[package]
            return {**data, "workspace": {"sdist": pin.requirement, "sha256": pin.sha256}}
        return data

    @model_validator(mode="after")
    def _consistent(self) -> BenchTask:
        if self.kind == "absent" and self.gold:
            raise ValueError(f"task {self.id}: an 'absent' task must have no gold spans")
        if self.smoke and self.kind != "locate":
            raise ValueError(f"task {self.id}: only locate tasks can be smoke tasks")
        if self.probes and self.kind != "absent":
            raise ValueError(f"task {self.id}: only absent tasks have probes")
        if self.package in LEGACY_PACKAGES:  # the hand-written suites keep their splits apart
            if self.package not in SPLIT_PACKAGES[self.split]:
                raise ValueError(f"task {self.id}: package {self.package!r} is not in the {self.split} split")
            if self.split == "test" and not isinstance(self.workspace, SdistWorkspace):
                raise ValueError(f"task {self.id}: test tasks run in a source tree (workspace: tree)")
        return self

    @property
    def scored(self) -> bool:
        """Whether an answer can be scored: gold spans, or an ``absent`` task (gold: "not there")."""
        return bool(self.gold) or self.kind == "absent"

    @property
    def legacy_workspace(self) -> LegacyWorkspace | None:
        """``installed`` or ``tree`` for a legacy package's task in such a workspace, else None."""
        if self.package in SDISTS and isinstance(self.workspace, SdistWorkspace):
            return "tree" if self.workspace.as_sdist() == SDISTS[self.package] else None
        if isinstance(self.workspace, InstalledWorkspace) and self.workspace.installed == self.package:
            return "installed"
        return None

    def workspace_root(self, *, fetch: bool = False) -> Path:
        """The directory this task explores.

        With ``fetch``, a git checkout or sdist tree missing from the cache is made first; without
        it nothing is written, and a missing one is a ConfigError naming the command that makes it.
        """
        return self.workspace.root(fetch=fetch)

    def in_tree(self) -> BenchTask:
        """A legacy task in its package's source tree: the same id and prompt, gold paths mapped
        into the tree (``loaders.py`` -> ``src/jinja2/loaders.py``). A tree task is returned as it is."""
        if isinstance(self.workspace, SdistWorkspace):
            return self
        if self.package not in SDISTS or SDISTS[self.package].package_dir is None:
            raise ValueError(f"task {self.id}: no pinned source tree for package {self.package!r}")
        pin = SDISTS[self.package]
        gold = tuple(span.model_copy(update={"path": f"{pin.package_dir}/{span.path}"}) for span in self.gold)
        workspace = SdistWorkspace(sdist=pin.requirement, sha256=pin.sha256)
        return self.model_copy(update={"workspace": workspace, "gold": gold})


class TaskFile(BaseModel):
    """A task file (YAML): optional defaults for its tasks, then the tasks.

    ``split`` and ``workspace`` are every task's defaults (a task may say otherwise). A JSONL task
    file holds one task object per line and no defaults.
    """

    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)

    suite: str | None = Field(default=None, pattern=r"^[a-z0-9][a-z0-9._-]*$")
    """The suite's name (default: the file's stem)."""
    split: Split = "dev"
    workspace: WorkspaceSpec | LegacyWorkspace | None = None
    tasks: tuple[BenchTask, ...]
