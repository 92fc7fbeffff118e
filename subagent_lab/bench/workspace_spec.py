"""Where a benchmark task runs: the four kinds of workspace a task file can name.

- ``{dir: path}``: a local directory, as it is (relative to the task file);
- ``{git: repo, rev: <sha>}``: a clean, read-only checkout of that commit in the cache
  (``bench.git_checkout``); ``repo`` a local path (relative to the task file) or a URL;
- ``{sdist: name==version, sha256: <hex>}``: a PyPI sdist, downloaded from the index by its
  SHA-256, checked, unpacked as plain data in the cache; nothing of it runs (``bench.workspaces``);
- ``{installed: name}``: the directory of an installed import package (importlib), its
  distribution's version checked when ``version`` is given.

``root(fetch=...)`` resolves a spec to its directory. Without ``fetch`` nothing is written or
downloaded (a missing checkout or tree is a ConfigError saying how to make it); with it, the
checkout or tree is made first. Errors about one field are ``FieldError`` naming that field.
"""

from __future__ import annotations

import functools
import importlib.machinery
import importlib.metadata
import importlib.util
import sys
from pathlib import Path
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Discriminator, Field, Tag, ValidationInfo, field_validator

from subagent_lab.bench.git_checkout import checkout_root, is_url
from subagent_lab.bench.workspaces import SDISTS, FieldError, Sdist, sdist_root
from subagent_lab.core.types import ConfigError

PINNED_VERSIONS: dict[str, tuple[str, str]] = {
    "jinja2": ("jinja2", "3.1.6"),
    "yaml": ("pyyaml", "6.0.3"),
    "tqdm": ("tqdm", "4.67.1"),
}
"""Import name -> (distribution name, pinned version) of the legacy dev suite; mirrors the
``bench`` extra. ``{installed: name}`` of one of these is checked against its pin."""


def _relative_to_file(value: str, info: ValidationInfo) -> str:
    """A relative path made absolute against the task file's directory (``context["base"]``)."""
    base = (info.context or {}).get("base")
    path = Path(value).expanduser()
    return str((Path(base) / path).resolve()) if base is not None and not path.is_absolute() else str(path)


def _hex_digits(value: Any, width: int) -> Any:
    """A hash that YAML read as an integer (all digits, unquoted) back as its hex text."""
    return str(value).zfill(width) if isinstance(value, int) and not isinstance(value, bool) else value


class _Spec(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)


class DirWorkspace(_Spec):
    """A local directory, explored as it is."""

    dir: str = Field(min_length=1)
    """The directory; relative to the task file when written relative in one."""

    @field_validator("dir")
    @classmethod
    def _absolute(cls, value: str, info: ValidationInfo) -> str:
        return _relative_to_file(value, info)

    def root(self, *, fetch: bool = False) -> Path:
        """The directory; FieldError on ``dir`` when it is not one."""
        path = Path(self.dir).resolve()
        if not path.is_dir():
            raise FieldError("dir", f"no such directory: {path}")
        return path

    @property
    def label(self) -> str:
        return f"dir:{self.dir}"


class GitWorkspace(_Spec):
    """A clean, read-only checkout of one commit of a git repository."""

    git: str = Field(min_length=1)
    """A local repository (relative to the task file when written relative) or a URL."""
    rev: str = Field(pattern=r"^[0-9a-f]{40}([0-9a-f]{24})?$")
    """The full commit id (40 hex digits; 64 in a SHA-256 repository)."""

    @field_validator("git")
    @classmethod
    def _absolute(cls, value: str, info: ValidationInfo) -> str:
        return value if is_url(value) else _relative_to_file(value, info)

    @field_validator("rev", mode="before")
    @classmethod
    def _digits(cls, value: Any) -> Any:
        return _hex_digits(value, 40)

    def root(self, *, fetch: bool = False) -> Path:
        """The checkout of ``rev``; made first with ``fetch`` (FieldError on ``git`` or ``rev``)."""
        return checkout_root(self.git, self.rev, fetch=fetch)

    @property
    def label(self) -> str:
        return f"git:{self.git}@{self.rev[:12]}"


class SdistWorkspace(_Spec):
    """A PyPI source distribution, pinned by its SHA-256, unpacked in the cache."""

    sdist: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*==[A-Za-z0-9][A-Za-z0-9.+!_-]*$")
    """``name==version``, as pip reads it."""
    sha256: str = Field(pattern=r"^[0-9a-f]{64}$")
    """Of the ``.tar.gz`` file PyPI serves for it."""

    @field_validator("sha256", mode="before")
    @classmethod
    def _digits(cls, value: Any) -> Any:
        return _hex_digits(value, 64)

    def as_sdist(self) -> Sdist:
        """The ``bench.workspaces`` pin of this spec (a built-in pin's, package directory included)."""
        name, _, version = self.sdist.partition("==")
        ours = Sdist(name, version, self.sha256)
        return next(
            (
                pin
                for pin in SDISTS.values()
                if (pin.requirement, pin.sha256) == (ours.requirement, ours.sha256)
            ),
            ours,
        )

    def root(self, *, fetch: bool = False) -> Path:
        """The unpacked tree; fetched first with ``fetch`` (FieldError on ``sdist`` or ``sha256``)."""
        return sdist_root(self.as_sdist(), fetch=fetch)

    @property
    def label(self) -> str:
        return f"sdist:{self.sdist}"


class InstalledWorkspace(_Spec):
    """The directory of an installed import package (found without importing it)."""

    installed: str = Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")
    """The import name (``jinja2``, ``yaml``)."""
    version: str | None = None
    """The version its distribution must have, checked when given (the pinned one for the legacy
    dev packages)."""

    def root(self, *, fetch: bool = False) -> Path:
        """The package's directory; ConfigError when it is missing or of another version."""
        if self.installed in PINNED_VERSIONS and self.version in (None, PINNED_VERSIONS[self.installed][1]):
            return _pinned_root(self.installed, tuple(sys.path))
        if self.version is not None:
            dists = importlib.metadata.packages_distributions().get(self.installed.split(".")[0], [])
            found = {importlib.metadata.version(d) for d in dists}
            if self.version not in found:
                raise FieldError(
                    "version", f"{self.installed} is installed as version {sorted(found) or 'none'}, "
                    f"not {self.version}"
                )  # fmt: skip
        return _import_dir(self.installed)

    @property
    def label(self) -> str:
        return f"installed:{self.installed}"


SPEC_KINDS = ("dir", "git", "sdist", "installed")
"""The key that tells each kind of workspace apart."""


def spec_kind(raw: Any) -> str | None:
    """Which kind a workspace (a mapping or a spec) is: ``dir``, ``git``, ``sdist``, ``installed``."""
    if isinstance(raw, BaseModel):
        raw = raw.model_dump()
    if not isinstance(raw, dict):
        return None
    return next((k for k in SPEC_KINDS if k in raw), None)


WorkspaceSpec = Annotated[
    Annotated[DirWorkspace, Tag("dir")]
    | Annotated[GitWorkspace, Tag("git")]
    | Annotated[SdistWorkspace, Tag("sdist")]
    | Annotated[InstalledWorkspace, Tag("installed")],
    Discriminator(
        spec_kind,
        custom_error_type="workspace_kind",
        custom_error_message="a workspace is one of {dir}, {git, rev}, {sdist, sha256} or {installed}",
    ),
]
"""One workspace of a task file, told apart by its one required key."""


def installed_version(package: str) -> str | None:
    """The installed version of a legacy benchmark package's distribution, or None if absent."""
    dist, _ = PINNED_VERSIONS[package]
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def package_root(package: str) -> Path:
    """The installed directory of a legacy benchmark package: the workspace root of its tasks.

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
    return _import_dir(package)


@functools.lru_cache(maxsize=16)
def _pinned_root(package: str, search_path: tuple[str, ...]) -> Path:
    """``package_root(package)``, found and checked once per process and import path: a task's
    workspace is asked for on every run, and reading the distribution's metadata is most of a
    lookup's cost. (A failed lookup is not kept: it is made again, and raises again, next time.)"""
    return package_root(package)


def _import_dir(name: str) -> Path:
    """The directory of import package ``name``, found without running any of its code (looked up
    once per process and import path; a failed lookup is made again next time)."""
    return _located(name, tuple(sys.path))


@functools.lru_cache(maxsize=64)
def _located(name: str, search_path: tuple[str, ...]) -> Path:
    """``_import_dir(name)`` for the import path ``search_path``.

    ``importlib.util.find_spec("a.b")`` imports ``a`` (its ``__init__`` runs) to learn where
    ``a.b`` is; here only the top-level name goes to the finders (which import nothing for it) and
    each further part is looked up in its parent's directories by ``PathFinder``.
    """
    top, *rest = name.split(".")
    try:
        spec = importlib.util.find_spec(top)
        for i in range(len(rest)):
            if spec is None or not spec.submodule_search_locations:
                break
            locations = list(spec.submodule_search_locations)
            spec = importlib.machinery.PathFinder.find_spec(".".join([top, *rest[: i + 1]]), locations)
    except (ImportError, ValueError) as exc:
        raise FieldError("installed", f"cannot locate the installed package {name!r}: {exc}") from exc
    if spec is None or not spec.submodule_search_locations:
        raise FieldError("installed", f"cannot locate the installed package directory of {name!r}")
    return Path(next(iter(spec.submodule_search_locations))).resolve()
