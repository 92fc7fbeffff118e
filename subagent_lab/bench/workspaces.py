"""Source-tree workspaces: pinned sdists from PyPI, fetched once and unpacked outside the repository.

A user explores a checkout (library code, tests, docs, examples), not an installed package
directory. The ``test`` split and the ``dev-tree`` variant of the dev tasks therefore run in the
unpacked source distribution of each pinned package, under
``${SUBAGENT_LAB_CACHE:-~/.cache/subagent_lab}/workspaces/<name>-<version>/``.

``python -m subagent_lab.bench.workspaces fetch`` (run by ``scripts/setup.sh``) downloads each
sdist from the index by its pinned digest (``sdist_index``: the index's JSON or HTML project page,
never pip), checks its SHA-256 against the pin below before reading it, and unpacks it as plain
data (``safe_tar``) with an atomic rename, so a tree is either complete or absent. Nothing in an
sdist runs: no build backend, no ``setup.py``. A second run does nothing. Offline, put the ``.tar.gz`` files
in ``<cache>/workspaces/downloads/`` first; they are used when their hash matches.

A task file's ``{sdist: name==version, sha256: ...}`` workspace goes through the same machinery
(``sdist_root``): any ``Sdist``, not only the six pinned below.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import sys
import tarfile
import tempfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from subagent_lab.bench.safe_tar import unpack
from subagent_lab.bench.sdist_index import (
    download,
    is_sdist_of,
    project_files,
    shown_index,
    without_credentials,
)
from subagent_lab.core.types import ConfigError
from subagent_lab.local_models.weights import cache_root


@dataclass(frozen=True)
class Sdist:
    """One pinned source distribution and where its import package lives inside the tree."""

    dist: str
    """The PyPI distribution name, as pip is asked for it."""
    version: str
    sha256: str
    """Of the ``.tar.gz`` file PyPI serves for ``dist==version``."""
    package_dir: str | None = None
    """The import package's directory relative to the tree root (``src/jinja2``), checked when
    unpacking; None for a task file's sdist, whose layout is not known in advance."""

    @property
    def tree_name(self) -> str:
        """The unpacked tree's directory name: ``<name>-<version>``."""
        return f"{self.dist.lower()}-{self.version}"

    @property
    def requirement(self) -> str:
        """The pin as pip reads it."""
        return f"{self.dist}=={self.version}"


SDISTS: dict[str, Sdist] = {
    # dev: the packages of tasks.yaml; their sdists' Python sources equal the installed wheels'.
    "jinja2": Sdist(
        "jinja2",
        "3.1.6",
        package_dir="src/jinja2",
        sha256="0137fb05990d35f1275a587e9aee6d56da821fc83491a0fb838183be43f66d6d",
    ),
    "yaml": Sdist(
        "pyyaml",
        "6.0.3",
        package_dir="lib/yaml",
        sha256="d76623373421df22fb4cf8817020cbb7ef15c725b9d5e45f17e189bfc384190f",
    ),
    "tqdm": Sdist(
        "tqdm",
        "4.67.1",
        package_dir="tqdm",
        sha256="f8aef9c52c08c13a65f30ea34f4e5aac3fd1a34959879d7e59e63027286627f2",
    ),
    # test: held out, never used to tune anything.
    "marshmallow": Sdist(
        "marshmallow",
        "3.26.1",
        package_dir="src/marshmallow",
        sha256="e6d8affb6cb61d39d26402096dc0aee12d5a26d490a121f118d2e81dc0719dc6",
    ),
    "attrs": Sdist(
        "attrs",
        "25.4.0",
        package_dir="src/attr",
        sha256="16d5969b87f0859ef33a48b35d55ac1be6e42ae49d5e853b597db70c35c57e11",
    ),
    "markdown": Sdist(
        "markdown",
        "3.9",
        package_dir="markdown",
        sha256="d2900fe1782bd33bdbbd56859defef70c2e78fc46668f8eb9df3128138f2cb6a",
    ),
}
"""Benchmark package (the ``package`` of a task) -> its pinned sdist."""

MARKER_SUFFIX = ".sdist"
"""``<name>-<version>.sdist`` beside a finished tree holds the sdist's requirement and SHA-256; it
lives outside the tree so that the workspace holds exactly what the sdist holds."""

FETCH_COMMAND = "python -m subagent_lab.bench.workspaces fetch"


class FieldError(ConfigError):
    """A ConfigError about one field of a workspace (``sha256``, ``rev``, ...): a task file's
    loader names the file, the task and ``workspace.<field>``."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


def workspaces_dir() -> Path:
    """Where the trees live: ``<cache_root>/workspaces``."""
    return cache_root() / "workspaces"


def tree_path(package: str) -> Path:
    """Where ``package``'s tree is (or would be) unpacked; ConfigError for an unknown package."""
    return sdist_path(_sdist(package))


def sdist_path(sdist: Sdist) -> Path:
    """Where ``sdist``'s tree is (or would be) unpacked: ``<workspaces_dir>/<name>-<version>``."""
    return workspaces_dir() / sdist.tree_name


def is_fetched(package: str) -> bool:
    """Whether ``package``'s tree is unpacked and was made from the pinned sdist."""
    return sdist_fetched(_sdist(package))


def sdist_fetched(sdist: Sdist) -> bool:
    """Whether ``sdist``'s tree is unpacked and was made from exactly that file (its SHA-256)."""
    if not sdist_path(sdist).is_dir():
        return False
    try:
        return _marker(sdist).read_text(encoding="utf-8").split() == [sdist.requirement, sdist.sha256]
    except OSError:
        return False


def tree_root(package: str) -> Path:
    """The unpacked source tree of ``package``: the workspace root of its tree tasks.

    Raises ConfigError naming the fetch command when it has not been fetched.
    """
    return sdist_root(_sdist(package), fetch=False)


def sdist_root(sdist: Sdist, *, fetch: bool = False, log: Callable[[str], None] = print) -> Path:
    """The unpacked tree of ``sdist``; with ``fetch``, downloaded, verified and unpacked first.

    Without ``fetch`` a missing tree is a ConfigError naming the command that fetches it.
    """
    if fetch:
        return _fetch_one(sdist, log)
    if not sdist_fetched(sdist):
        how = (
            f"run `{FETCH_COMMAND}` (scripts/setup.sh does)"
            if sdist in SDISTS.values()
            else "run `subagent-lab tasks FILE`, which fetches a task file's workspaces"
        )
        raise ConfigError(
            f"the source tree of {sdist.requirement} is not fetched (expected {sdist_path(sdist)}); {how}"
        )
    return sdist_path(sdist)


def sha256_of(path: Path) -> str:
    """The SHA-256 of a file, read in chunks."""
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def fetch(packages: Iterable[str] | None = None, *, log: Callable[[str], None] = print) -> list[Path]:
    """Fetch, verify and unpack each package's sdist (all pinned ones by default); the trees' paths.

    Idempotent: a tree already made from the pinned sdist is left alone. Raises ConfigError when a
    download fails (naming what is missing) or a file's hash differs from the pin.
    """
    names = list(packages) if packages is not None else list(SDISTS)
    sdists = [_sdist(name) for name in names]  # every name is checked before anything is downloaded
    return [_fetch_one(sdist, log) for sdist in sdists]


def _marker(sdist: Sdist) -> Path:
    return workspaces_dir() / (sdist.tree_name + MARKER_SUFFIX)


def _sdist(package: str) -> Sdist:
    if package not in SDISTS:
        raise ConfigError(f"unknown benchmark package {package!r}; known: {sorted(SDISTS)}")
    return SDISTS[package]


def _fetch_one(sdist: Sdist, log: Callable[[str], None]) -> Path:
    final = sdist_path(sdist)
    if sdist_fetched(sdist):
        return final
    base = workspaces_dir()
    base.mkdir(parents=True, exist_ok=True)
    archive = _archive(sdist, base / "downloads", log)
    with tempfile.TemporaryDirectory(dir=base, prefix=f".unpack-{sdist.tree_name}-") as tmp:
        unpacked = Path(tmp) / "x"
        try:
            unpack(archive, unpacked)  # plain data only: nothing lands outside, no links out, no devices
        except (tarfile.TarError, OSError, ValueError) as exc:
            raise ConfigError(f"{archive}: cannot unpack the sdist: {exc}") from exc
        tops = list(unpacked.iterdir())
        if len(tops) != 1 or not tops[0].is_dir():
            raise ConfigError(f"{archive}: expected one top-level directory, found {[p.name for p in tops]}")
        tree = tops[0]
        if sdist.package_dir is not None and not (tree / sdist.package_dir / "__init__.py").is_file():
            raise ConfigError(f"{archive}: no package directory {sdist.package_dir}/ in the sdist")
        _marker(sdist).unlink(missing_ok=True)
        if final.exists():  # a stale or partial tree from another pin: replace it whole
            shutil.rmtree(final)
        os.replace(tree, final)  # same filesystem: the tree appears complete or not at all
        note = Path(tmp) / "marker"
        note.write_text(f"{sdist.requirement} {sdist.sha256}\n", encoding="utf-8")
        os.replace(note, _marker(sdist))  # written last: a tree without it is fetched again
    log(f"[workspaces] {sdist.requirement}: unpacked to {final}")
    return final


def _archive(sdist: Sdist, downloads: Path, log: Callable[[str], None]) -> Path:
    """The verified ``.tar.gz`` of ``sdist``: one already in ``downloads`` or one downloaded there
    from the index. Its SHA-256 is checked before anything reads it; nothing in it is run."""
    downloads.mkdir(parents=True, exist_ok=True)
    for candidate in _candidates(sdist, downloads):
        if sha256_of(candidate) == sdist.sha256:
            return candidate
    offline = (
        f"on an offline machine copy {sdist.tree_name}.tar.gz (sha256 {sdist.sha256}) into {downloads} "
        f"and run `{FETCH_COMMAND}` again"
    )
    try:
        listed = project_files(sdist.dist)
    except (OSError, ValueError) as exc:
        raise FieldError(
            "sdist", f"could not read the index {shown_index()} for {sdist.requirement}: {exc}; {offline}"
        ) from exc
    pinned = [f for f in listed if f.sha256 == sdist.sha256 and f.name.endswith(".tar.gz")]
    ours = [f for f in listed if is_sdist_of(f.name, sdist.dist, sdist.version)]
    unstated = [f for f in ours if f.sha256 is None]  # an index that states no digest: hashed on arrival
    if not pinned and not unstated:
        if ours:
            raise FieldError(
                "sha256", f"the index's sdist {ours[0].name} of {sdist.requirement} has SHA-256 "
                f"{ours[0].sha256}, which differs from the pinned {sdist.sha256}"
            )  # fmt: skip
        raise FieldError("sdist", f"the index {shown_index()} has no sdist of {sdist.requirement}; {offline}")
    chosen = (pinned or unstated)[0]
    with tempfile.TemporaryDirectory(dir=downloads, prefix=".index-") as tmp:
        fetched = Path(tmp) / chosen.name
        try:
            got = download(chosen.url, fetched)
        except (OSError, ValueError) as exc:
            raise FieldError(
                "sdist", f"could not download {without_credentials(chosen.url)}: {exc}; {offline}"
            ) from exc
        if got != sdist.sha256:  # checked before the archive is opened
            raise FieldError(
                "sha256",
                f"{chosen.name}: SHA-256 {got} differs from the pinned {sdist.sha256} of {sdist.requirement}",
            )  # fmt: skip
        log(f"[workspaces] downloaded {sdist.requirement} (sdist) from {shown_index()}")
        target = downloads / chosen.name
        os.replace(fetched, target)
    return target


def _candidates(sdist: Sdist, downloads: Path) -> list[Path]:
    """Archives in ``downloads`` that may be ``sdist`` (names are normalised differently by tools)."""
    wanted = {sdist.tree_name, f"{sdist.dist.lower().replace('-', '_')}-{sdist.version}"}
    return [p for p in sorted(downloads.glob("*.tar.gz")) if p.name[: -len(".tar.gz")].lower() in wanted]


def main(argv: list[str] | None = None) -> int:
    """``fetch [PACKAGE ...]`` unpacks the trees; ``status`` prints each tree's path and state."""
    parser = argparse.ArgumentParser(prog="python -m subagent_lab.bench.workspaces", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    fetch_cmd = sub.add_parser("fetch", help="download, verify and unpack the pinned sdists")
    fetch_cmd.add_argument("packages", nargs="*", help=f"default: all of {', '.join(SDISTS)}")
    sub.add_parser("status", help="where each tree is and whether it is fetched")
    args = parser.parse_args(argv)
    try:
        if args.command == "fetch":
            fetch(args.packages or None)
        else:
            for name, sdist in SDISTS.items():
                state = "fetched" if is_fetched(name) else "missing"
                print(f"{name:12} {sdist.requirement:22} {state:8} {tree_path(name)}")
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
