"""The explore benchmark suite: task models, loading the splits, and gold checking.

Three suites, each a list of tasks over pinned third-party packages:

- ``dev`` (``tasks.yaml``, the default): 30 tasks over jinja2, PyYAML and tqdm. The workspace root
  is the *installed* package directory (the pinned ``bench`` extra), found through importlib. The
  scaffold was tuned on these tasks.
- ``dev-tree``: the same 30 tasks, ids and prompts in the unpacked source distribution of each
  package (library code with its tests and docs, as a user's checkout looks); the gold paths are
  mapped into the tree (``loaders.py`` -> ``src/jinja2/loaders.py``).
- ``test`` (``tasks_test.yaml``): held out, over other packages (marshmallow, attrs, Markdown) in
  their source trees; written from the source before any model run and frozen by a hash.

Source trees are fetched by ``bench.workspaces`` outside the repository. Every gold span carries an
``anchor`` string so that a version drift fails loudly instead of scoring against the wrong lines.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
from pathlib import Path
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from subagent_lab.core.types import ConfigError

TaskKind = Literal["locate", "trace", "enumerate", "explain", "absent"]
Package = Literal["jinja2", "yaml", "tqdm", "marshmallow", "attrs", "markdown"]
Difficulty = Literal["easy", "medium", "hard"]
Split = Literal["dev", "test"]
Workspace = Literal["installed", "tree"]
"""``installed``: the package's installed directory; ``tree``: its unpacked sdist (bench.workspaces)."""
SuiteName = Literal["dev", "dev-tree", "test"]
SUITES: tuple[SuiteName, ...] = ("dev", "dev-tree", "test")
"""The names ``load_suite`` accepts."""

SPLIT_PACKAGES: dict[Split, frozenset[str]] = {
    "dev": frozenset({"jinja2", "yaml", "tqdm"}),
    "test": frozenset({"marshmallow", "attrs", "markdown"}),
}
"""The packages of each split; no package is in two (a test task never shares a tree with dev)."""

PINNED_VERSIONS: dict[str, tuple[str, str]] = {
    "jinja2": ("jinja2", "3.1.6"),
    "yaml": ("pyyaml", "6.0.3"),
    "tqdm": ("tqdm", "4.67.1"),
}
"""Import name -> (distribution name, pinned version); mirrors the ``bench`` extra."""

DEFAULT_SUITE_PATH = Path(__file__).with_name("tasks.yaml")
TEST_SUITE_PATH = Path(__file__).with_name("tasks_test.yaml")


class GoldSpan(BaseModel):
    """A range of lines that a correct answer should cite (1-based, inclusive)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    path: str = Field(min_length=1)
    """Path relative to the task's workspace root (the package directory, or the source tree)."""
    start: int = Field(ge=1)
    end: int = Field(ge=1)
    anchor: str = Field(min_length=1)
    """Text that must occur within lines ``start..end``; catches version drift."""

    @model_validator(mode="after")
    def _ordered(self) -> GoldSpan:
        if self.end < self.start:
            raise ValueError(f"end ({self.end}) is before start ({self.start})")
        if self.path.startswith("/") or ".." in Path(self.path).parts:
            raise ValueError(f"gold path must be relative to the package root: {self.path!r}")
        return self

    @property
    def label(self) -> str:
        """The span written as an evidence item: ``path:start-end``."""
        return f"{self.path}:{self.start}-{self.end}"


class BenchTask(BaseModel):
    """One explore task: the prompt a user would give and what a good answer contains."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str = Field(min_length=1, pattern=r"^[a-z0-9][a-z0-9-]*$")
    kind: TaskKind
    package: Package
    prompt: str = Field(min_length=10)
    gold: tuple[GoldSpan, ...] = ()
    keywords: tuple[str, ...] = ()
    """Words a good summary/findings should mention (matched case-insensitively)."""
    difficulty: Difficulty
    smoke: bool = False
    """Easy locate tasks used for the quick real-model sweep."""
    split: Split = "dev"
    workspace: Workspace = "installed"
    probes: tuple[str, ...] = ()
    """Absent tasks of a source tree: strings that occur in no file of the tree (case-insensitive),
    which backs the gold answer "not there"."""

    @model_validator(mode="after")
    def _gold_matches_kind(self) -> BenchTask:
        if self.kind == "absent" and self.gold:
            raise ValueError(f"task {self.id}: an 'absent' task must have no gold spans")
        if self.kind != "absent" and not self.gold:
            raise ValueError(f"task {self.id}: a '{self.kind}' task needs at least one gold span")
        if self.smoke and self.kind != "locate":
            raise ValueError(f"task {self.id}: only locate tasks can be smoke tasks")
        if self.package not in SPLIT_PACKAGES[self.split]:
            raise ValueError(f"task {self.id}: package {self.package!r} is not in the {self.split} split")
        if self.split == "test" and self.workspace != "tree":
            raise ValueError(f"task {self.id}: test tasks run in a source tree (workspace: tree)")
        if self.probes and self.kind != "absent":
            raise ValueError(f"task {self.id}: only absent tasks have probes")
        return self

    def workspace_root(self) -> Path:
        """The directory this task explores: the installed package or the unpacked source tree.

        Raises ConfigError when it is missing (naming the install or fetch command to run).
        """
        if self.workspace == "installed":
            return package_root(self.package)
        # Imported here: `python -m subagent_lab.bench.workspaces` then runs a module not yet imported.
        from subagent_lab.bench.workspaces import tree_root

        return tree_root(self.package)

    def in_tree(self) -> BenchTask:
        """This task in its package's source tree: the same id and prompt, gold paths mapped into
        the tree (``loaders.py`` -> ``src/jinja2/loaders.py``). A tree task is returned as it is."""
        from subagent_lab.bench.workspaces import SDISTS

        if self.workspace == "tree":
            return self
        prefix = SDISTS[self.package].package_dir
        gold = tuple(span.model_copy(update={"path": f"{prefix}/{span.path}"}) for span in self.gold)
        return self.model_copy(update={"workspace": "tree", "gold": gold})


class _SuiteFile(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    split: Split = "dev"
    """The default ``split`` of the file's tasks."""
    workspace: Workspace = "installed"
    """The default ``workspace`` of the file's tasks."""
    tasks: tuple[BenchTask, ...]


def load_suite(split: SuiteName | Path | str = "dev", *, path: Path | str | None = None) -> list[BenchTask]:
    """Load and validate a suite: ``dev`` (the default), ``dev-tree`` or ``test``, or a YAML file.

    ``split`` may also be a path (a ``Path``, or a string that is not a suite name), as may
    ``path``. Raises ConfigError naming the file and the offending field, or a duplicated id.
    """
    if path is not None or isinstance(split, Path) or split not in SUITES:
        return _load_file(Path(path if path is not None else split))
    if split == "test":
        tasks = _load_file(TEST_SUITE_PATH)
        wrong = [t.id for t in tasks if t.split != "test"]
        if wrong:
            raise ConfigError(f"{TEST_SUITE_PATH}: tasks not in the test split: {wrong}")
        return tasks
    dev = _load_file(DEFAULT_SUITE_PATH)
    return [t.in_tree() for t in dev] if split == "dev-tree" else dev


def _load_file(suite_path: Path) -> list[BenchTask]:
    try:
        raw = yaml.safe_load(suite_path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        raise ConfigError(f"{suite_path}: cannot read the suite: {exc}") from exc
    if isinstance(raw, dict) and isinstance(raw.get("tasks"), list):
        # The file's split/workspace are its tasks' defaults (a task may still say otherwise).
        defaults = {k: raw[k] for k in ("split", "workspace") if k in raw}
        raw = {**raw, "tasks": [{**defaults, **t} if isinstance(t, dict) else t for t in raw["tasks"]]}
    try:
        suite = _SuiteFile.model_validate(raw)
    except ValidationError as exc:
        details = "; ".join(f"{'.'.join(str(p) for p in err['loc'])}: {err['msg']}" for err in exc.errors())
        raise ConfigError(f"{suite_path}: invalid suite: {details}") from exc
    seen: set[str] = set()
    for task in suite.tasks:
        if task.id in seen:
            raise ConfigError(f"{suite_path}: duplicate task id {task.id!r}")
        seen.add(task.id)
    return list(suite.tasks)


def installed_version(package: str) -> str | None:
    """The installed version of a benchmark package's distribution, or None if absent."""
    dist, _ = PINNED_VERSIONS[package]
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def package_root(package: str) -> Path:
    """The installed directory of a benchmark package: the workspace root of its tasks.

    Located via importlib without importing the package. Raises ConfigError when the
    package is missing or its version differs from the pinned one, since the gold spans
    are only valid for the pinned version.
    """
    if package not in PINNED_VERSIONS:
        raise ConfigError(f"unknown benchmark package {package!r}; known: {sorted(PINNED_VERSIONS)}")
    dist, pinned = PINNED_VERSIONS[package]
    version = installed_version(package)
    if version is None:
        raise ConfigError(
            f"benchmark package {dist}=={pinned} is not installed; install the bench extra "
            f"(pip install -e '.[bench]')"
        )
    if version != pinned:
        raise ConfigError(
            f"benchmark package {dist} is version {version}, but the gold evidence is pinned "
            f"to {dist}=={pinned}; install exactly that version (pip install -e '.[bench]')"
        )
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise ConfigError(f"cannot locate the installed package directory of {package!r}")
    return Path(next(iter(spec.submodule_search_locations))).resolve()


def check_gold(task: BenchTask, root: Path | None = None) -> list[str]:
    """Problems with a task's gold spans against its sources; empty when sound.

    Reports a missing file, a span beyond the end of the file, and an anchor that does not
    occur within the span's lines. ``root`` defaults to ``task.workspace_root()``.
    """
    base = root if root is not None else task.workspace_root()
    problems: list[str] = []
    cache: dict[str, list[str]] = {}
    for span in task.gold:
        if span.path not in cache:
            file = base / span.path
            if not file.is_file():
                problems.append(f"{task.id}: {span.path}: no such file under {base}")
                continue
            cache[span.path] = file.read_text(encoding="utf-8").splitlines()
        lines = cache[span.path]
        if span.end > len(lines):
            problems.append(f"{task.id}: {span.label}: beyond end of file ({len(lines)} lines)")
            continue
        text = "\n".join(lines[span.start - 1 : span.end])
        if span.anchor not in text:
            problems.append(f"{task.id}: {span.label}: anchor {span.anchor!r} not found in the span")
    return problems


def check_absent(task: BenchTask, root: Path | None = None) -> list[str]:
    """The files of the tree that hold one of an absent task's ``probes`` (case-insensitive).

    Every file under the root counts (code, tests, docs): the answer "not there" must hold for
    the whole checkout. Empty when sound. ``root`` defaults to ``task.workspace_root()``.
    """
    base = root if root is not None else task.workspace_root()
    probes = [p.lower() for p in task.probes]
    hits: list[str] = []
    for file in sorted(base.rglob("*")):
        if not file.is_file():
            continue
        text = file.read_bytes().decode("utf-8", errors="replace").lower()
        hits += [f"{task.id}: {file.relative_to(base)} holds {p!r}" for p in probes if p in text]
    return hits


def split_table() -> str:
    """Tasks per split and package by kind, and how many cite several files (docs/benchmarks.md)."""
    kinds: tuple[TaskKind, ...] = ("locate", "trace", "enumerate", "explain", "absent")
    rows = [
        f"{'split':9} {'package':12} "
        + " ".join(f"{k:>9}" for k in kinds)
        + f" {'multi-file':>10} {'all':>4}"
    ]
    for split in SUITES:
        tasks = load_suite(split)
        for package in [*sorted({t.package for t in tasks}), "all"]:
            part = [t for t in tasks if package in ("all", t.package)]
            counts = " ".join(f"{sum(t.kind == k for t in part):>9}" for k in kinds)
            multi = sum(len({g.path for g in t.gold}) > 1 for t in part)
            rows.append(f"{split:9} {package:12} {counts} {multi:>10} {len(part):>4}")
    return "\n".join(rows)
