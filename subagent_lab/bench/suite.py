"""The explore benchmark suite: task models, loading ``tasks.yaml``, and gold checking.

Each task explores one installed third-party package (the pinned ``bench`` extra); its
workspace root is that package's directory, found at run time through importlib and never
copied into the repository. Gold spans are pinned to the exact installed versions, and
every span carries an ``anchor`` string so that a version drift fails loudly instead of
silently scoring against the wrong lines.
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
Package = Literal["jinja2", "yaml", "tqdm"]
Difficulty = Literal["easy", "medium", "hard"]

PINNED_VERSIONS: dict[str, tuple[str, str]] = {
    "jinja2": ("jinja2", "3.1.6"),
    "yaml": ("pyyaml", "6.0.3"),
    "tqdm": ("tqdm", "4.67.1"),
}
"""Import name -> (distribution name, pinned version); mirrors the ``bench`` extra."""

DEFAULT_SUITE_PATH = Path(__file__).with_name("tasks.yaml")


class GoldSpan(BaseModel):
    """A range of lines that a correct answer should cite (1-based, inclusive)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    path: str = Field(min_length=1)
    """Path relative to the package directory (the task's workspace root)."""
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

    @model_validator(mode="after")
    def _gold_matches_kind(self) -> BenchTask:
        if self.kind == "absent" and self.gold:
            raise ValueError(f"task {self.id}: an 'absent' task must have no gold spans")
        if self.kind != "absent" and not self.gold:
            raise ValueError(f"task {self.id}: a '{self.kind}' task needs at least one gold span")
        if self.smoke and self.kind != "locate":
            raise ValueError(f"task {self.id}: only locate tasks can be smoke tasks")
        return self


class _SuiteFile(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    tasks: tuple[BenchTask, ...]


def load_suite(path: Path | str | None = None) -> list[BenchTask]:
    """Load and validate the task suite (the packaged ``tasks.yaml`` by default).

    Raises ConfigError naming the file and the offending field, or a duplicated id.
    """
    suite_path = Path(path) if path is not None else DEFAULT_SUITE_PATH
    try:
        raw = yaml.safe_load(suite_path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        raise ConfigError(f"{suite_path}: cannot read the suite: {exc}") from exc
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
    """Problems with a task's gold spans against the installed sources; empty when sound.

    Reports a missing file, a span beyond the end of the file, and an anchor that does not
    occur within the span's lines. ``root`` defaults to ``package_root(task.package)``.
    """
    base = root if root is not None else package_root(task.package)
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
