"""The symbol index of a workspace: each code file's definitions and references, built once, cached.

``index_for(ws)`` lists the workspace's code files through the Workspace (Glob's bounded walk: the
ignore rules, secret names and symlink containment hold), and reads each one through the
descriptor ``Workspace.open_file`` checked (secret content, FIFOs and links out of the root are
refused there).

The cache is in memory, per process (nothing is written to disk, so no secret can outlive a
run in a cache file): a file whose size and mtime_ns are unchanged since the last build of the
same root is not read again; a changed one is read and hashed (SHA-1 of its bytes), and parsed
only if no file with those bytes was parsed before (a fresh copy of a repository reuses every
parse). When nothing changed, ``index_for`` returns the very same ``SymbolIndex`` object, so the
search index built on it is reused too.
"""

from __future__ import annotations

import hashlib
import os
import re
import stat
import threading
import time
from array import array
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any, Literal, NamedTuple

from subagent_lab.core.tool import ToolError
from subagent_lab.tools.glob import find_paths
from subagent_lab.tools.symbols.parse import (
    LANGUAGES,
    REF_KINDS,
    Definition,
    FileParse,
    RefKind,
    parse_source,
)
from subagent_lab.workspace.sandbox import Workspace

Role = Literal["library", "test", "doc", "example"]
MAX_FILE_BYTES = 1_500_000
"""Larger code files are not indexed (generated or vendored bundles, not code one reads)."""
CACHED_PARSES = 50_000
"""Parsed files kept in memory across builds (least recently used ones are dropped)."""
CODE_PATTERN = "**/*{" + ",".join(sorted(LANGUAGES)) + "}"
_TEST_DIRS = frozenset({"tests", "test", "testing", "__tests__"})
_DOC_DIRS = frozenset({"docs", "doc"})
_EXAMPLE_DIRS = frozenset({"examples", "example"})
_TEST_FILE = re.compile(r"^(test_.*\.py|.*_test\.(py|go)|conftest\.py|.*\.(test|spec)\.[jt]sx?)$")


def file_role(rel: str) -> Role:
    """Whether a file is library code or a test, doc or example, by its path alone."""
    parts = rel.lower().split("/")
    dirs = set(parts[:-1])
    if dirs & _TEST_DIRS or _TEST_FILE.match(parts[-1]):
        return "test"
    if dirs & _DOC_DIRS:
        return "doc"
    if dirs & _EXAMPLE_DIRS:
        return "example"
    return "library"


def module_name(rel: str) -> str:
    """The dotted module a file is (``jinja2/loaders.py`` -> ``jinja2.loaders``)."""
    stem = rel.rsplit(".", 1)[0]
    if stem.endswith("/__init__") or stem == "__init__":
        stem = stem[: -len("__init__")].rstrip("/")
    return stem.replace("/", ".")


@dataclass(frozen=True, slots=True)
class IndexedFile:
    """One code file of the index."""

    rel: str
    role: Role
    size: int
    mtime_ns: int
    sha: str
    parse: FileParse


class RefHit(NamedTuple):
    """One reference: ``line`` of ``rel`` refers to the name as ``kind``."""

    rel: str
    line: int
    kind: RefKind


@dataclass
class BuildStats:
    """What one build did."""

    files: int = 0
    lines: int = 0
    definitions: int = 0
    references: int = 0
    parsed: int = 0
    """Files parsed in this build (the others came from the cache)."""
    hashed: int = 0
    """Files read and hashed (stat changed or first seen)."""
    skipped: int = 0
    """Code files left out: too large, unreadable, refused by the workspace."""
    seconds: float = 0.0
    notes: list[str] = field(default_factory=list)


class SymbolIndex:
    """The definitions and references of a workspace's code files, with lookups by name."""

    def __init__(self, files: dict[str, IndexedFile], stats: BuildStats, root_name: str = "") -> None:
        self.files = files
        self.stats = stats
        self.root_name = root_name
        """The workspace root's directory name (a package's own absolute imports start with it)."""
        self.by_name: dict[str, list[tuple[str, Definition]]] = {}
        for rel, entry in files.items():
            for definition in entry.parse.definitions:
                self.by_name.setdefault(definition.name, []).append((rel, definition))
        self.derived: dict[str, Any] = {}
        """Structures built on the index once and kept with it (the search index, the map's graph)."""
        self._lock = threading.Lock()

    def role(self, rel: str) -> Role:
        return self.files[rel].role

    def derive(self, key: str, build: Any) -> Any:
        """``build(self)`` once per index, under a lock (tools may run on threads)."""
        with self._lock:
            if key not in self.derived:
                self.derived[key] = build(self)
            return self.derived[key]

    def units(self) -> list[tuple[str, Definition]]:
        """Every definition of every file, file by file in path order."""
        return [(rel, d) for rel in sorted(self.files) for d in self.files[rel].parse.definitions]

    def find(self, name: str) -> tuple[list[tuple[str, Definition]], int]:
        """The definitions a (possibly dotted) name names, library code first, and how many
        trailing parts of the name they matched (0: none matched, even ignoring case).

        ``Environment.get_template`` or ``jinja2.environment.Environment.get_template`` resolve to
        the member; when no definition matches every part, those matching the most trailing
        parts are returned, with that count.
        """
        parts = name_parts(name)
        if not parts:
            return [], 0
        member = parts[-1]
        found = list(self.by_name.get(member, []))
        if not found:
            lowered = member.lower()
            found = [hit for key, hits in self.by_name.items() if key.lower() == lowered for hit in hits]
        if not found:
            return [], 0

        wanted = [p.lower() for p in parts]

        def matched(hit: tuple[str, Definition]) -> int:
            # Trailing parts of the name found in order in root.module.qualname, modules skipped
            # (``jinja2.Environment`` is ``jinja2/environment.py``'s, re-exported by the package).
            full = f"{self.root_name}.{module_name(hit[0])}.{hit[1].qualname}".lower().split(".")
            count, at = 0, len(full) - 1
            for part in reversed(wanted):
                while at >= 0 and full[at] != part:
                    at -= 1
                if at < 0:
                    break
                count, at = count + 1, at - 1
            return count

        scored = [(matched(hit), hit) for hit in found]
        best = max(score for score, _ in scored)
        kept = [hit for score, hit in scored if score == best] if len(parts) > 1 else found
        kept.sort(
            key=lambda hit: (self.role(hit[0]) != "library", hit[1].kind == "constant", hit[0], hit[1].start)
        )
        return kept, max(best, 1)

    def refs(self, name: str) -> list[RefHit]:
        """Every reference to the last part of a (dotted) name, library files first, in line order."""
        member = name_parts(name)[-1:]
        if not member:
            return []
        hits: list[RefHit] = []
        for rel in sorted(self.files, key=lambda r: (self.role(r) != "library", r)):
            codes = self.files[rel].parse.refs.get(member[0])
            if codes:
                hits.extend(RefHit(rel, code >> 3, REF_KINDS[code & 7]) for code in sorted(codes))
        return hits

    def enclosing(self, rel: str, line: int) -> Definition | None:
        """The innermost function or class of ``rel`` that holds ``line`` (None at module level)."""
        best: Definition | None = None
        for definition in self.files[rel].parse.definitions:
            if definition.start > line:
                break
            if definition.kind != "constant" and definition.end >= line:
                best = definition  # sorted by start: a later one that holds the line is inner
        return best

    def own_modules(self) -> set[str]:
        """The workspace's top-level module names and the root's own name: an import from any
        other is another package's."""
        return {module_name(rel).split(".")[0] for rel in self.files} | {self.root_name}


def symbol_name(name: str) -> str:
    """A name as a model may write it, as the code spells it: quotes, backticks and a call's
    argument list dropped (``Environment.get_template(name)`` -> ``Environment.get_template``;
    models copy the call from the task)."""
    return name.strip().strip("`'\"").split("(", 1)[0].strip().strip("`'\"")


NAME = re.compile(r"[A-Za-z_$][\w$]*(?:(?:\.|::|#)[A-Za-z_$][\w$]*)*")
"""A name Find and Refs look up: identifiers joined by ``.`` (``::``, ``#`` in other languages).
Anything else is words, which Search ranks instead."""


def is_name(text: str) -> bool:
    """Whether ``text``, as a model wrote it (``symbol_name``), is a name, not words."""
    return NAME.fullmatch(symbol_name(text)) is not None


def name_parts(name: str) -> list[str]:
    """The parts of a (qualified) name as a model wrote it: ``Environment.get_template(name)`` ->
    ``Environment``, ``get_template``."""
    return [p for p in re.split(r"\.|::|#", symbol_name(name)) if p]


MEMBER_KINDS = frozenset({"attribute", "method call"})
"""References made as ``x.name``: which ``name`` they mean depends on ``x``, which is not resolved."""


def foreign(dotted: str, own: set[str]) -> bool:
    """Whether an import's dotted source lies outside the workspace (not relative, and its first
    part is none of ``own``, the workspace's top-level modules and the root's own name)."""
    return not dotted.startswith(".") and dotted.split(".")[0] not in own


def own_counts(entry: IndexedFile, name: str, codes: array[int], own: set[str]) -> tuple[int, int]:
    """(plain-name, member) references of ``name`` in a file that can mean the workspace's own
    definition: not its import, not one bound to another package's name, nor made as
    ``other_package.name``. A name imported and never used counts once, for the import."""
    imported = entry.parse.imports.get(name)
    if imported is not None and foreign(imported, own):
        return 0, 0
    kinds = [REF_KINDS[code & 7] for code in codes]
    members = sum(1 for kind in kinds if kind in MEMBER_KINDS)
    named = sum(1 for kind in kinds if kind != "import" and kind not in MEMBER_KINDS)
    through = sum(n.get(name, 0) for module, n in entry.parse.module_attrs.items() if foreign(module, own))
    members = max(members - through, 0)
    if not named and not members and imported is not None:
        named = 1
    return named, members


_cache_lock = threading.Lock()
_parses: OrderedDict[str, FileParse] = OrderedDict()
_roots: dict[tuple[str, bool, bool], SymbolIndex] = {}


def clear_cache() -> None:
    """Forget every cached parse and index (tests and cold-cache benchmarks)."""
    with _cache_lock:
        _parses.clear()
        _roots.clear()


def read_code(ws: Workspace, rel: str) -> tuple[bytes, os.stat_result]:
    """A code file's bytes, read through the descriptor the workspace checked (containment, the
    secret policy, regular files only); ToolError when it cannot be indexed."""
    fd, shown, info = ws.open_file(rel)
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(info.st_mode) or info.st_size > MAX_FILE_BYTES:
            raise ToolError(f"'{shown}' is not a regular file of at most {MAX_FILE_BYTES} bytes")
        return handle.read(MAX_FILE_BYTES + 1), info


def _parse(data: bytes, language: str, sha: str) -> tuple[FileParse, bool]:
    with _cache_lock:
        cached = _parses.get(sha)
        if cached is not None:
            _parses.move_to_end(sha)
            return cached, False
    parsed = parse_source(data, language)
    with _cache_lock:
        _parses[sha] = parsed
        while len(_parses) > CACHED_PARSES:
            _parses.popitem(last=False)
    return parsed, True


def index_for(ws: Workspace) -> SymbolIndex:
    """The symbol index of ``ws``, rebuilt only for files that changed since the last call."""
    started = time.perf_counter()
    key = (str(ws.root), ws.allow_secrets, ws.honour_gitignore)
    with _cache_lock:
        previous = _roots.get(key)
    found = find_paths(ws, CODE_PATTERN)
    stats = BuildStats(notes=list(found.notes))
    files: dict[str, IndexedFile] = {}
    for rel in found.paths:
        if rel.endswith("/") or "\ufffd" in rel or rel.endswith(".min.js"):
            continue
        language = LANGUAGES[os.path.splitext(rel)[1]]
        old = previous.files.get(rel) if previous else None
        try:
            info = os.stat(ws.resolve(rel))
            if old is not None and (old.size, old.mtime_ns) == (info.st_size, info.st_mtime_ns):
                files[rel] = old
                continue
            data, info = read_code(ws, rel)
        except (OSError, ToolError):
            stats.skipped += 1
            continue
        if len(data) > MAX_FILE_BYTES:
            stats.skipped += 1
            continue
        sha = hashlib.sha1(data, usedforsecurity=False).hexdigest()
        stats.hashed += 1
        parsed, fresh = _parse(data, language, sha)
        stats.parsed += fresh
        files[rel] = IndexedFile(rel, file_role(rel), info.st_size, info.st_mtime_ns, sha, parsed)
    if (
        previous is not None
        and files.keys() == previous.files.keys()
        and all(files[rel] is previous.files[rel] for rel in files)
    ):
        return previous
    for entry in files.values():
        stats.files += 1
        stats.lines += entry.parse.lines
        stats.definitions += len(entry.parse.definitions)
        stats.references += sum(len(codes) for codes in entry.parse.refs.values())
    stats.seconds = time.perf_counter() - started
    index = SymbolIndex(files, stats, ws.root.name)
    with _cache_lock:
        _roots[key] = index
    return index
