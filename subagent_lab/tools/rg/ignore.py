"""Ignore files evaluated exactly as ripgrep's walk evaluates them, for a subset of gitignore
syntax, so that a directory Grep can list a tree from its own descriptor walk (``rg_listing``).

What rg (the ``ignore`` crate, rg 14 with ``--no-ignore-parent --no-ignore-global
--no-require-git --hidden``) does, and this module reproduces:

- **One file.** Each line is a glob matched against an entry's path relative to the file's
  directory (``.git/info/exclude``: relative to the directory holding ``.git``). A line with no
  slash except a trailing one matches the entry's name at any depth; any other slash anchors the
  glob to the whole relative path (a leading slash only anchors). ``*`` matches any bytes of one
  component, ``?`` and a class ``[a-z0-9_]`` one byte of one component (``?`` does not match a
  two-byte ``é``); a component that is ``**`` matches zero or more components, and a trailing
  ``/**`` everything below the directory but not the directory. A trailing ``/`` matches
  directories only; ``!`` re-includes; the last line matching the entry decides. Matching is
  case-sensitive. ``#`` starts a comment; trailing white space is dropped unless escaped
  (``\\ ``); ``\\x`` is ``x``.
- **Several files.** Per kind (``.rgignore``, ``.ignore``, ``.gitignore``, ``.git/info/exclude``)
  the deepest directory whose file of that kind has a line matching the entry decides; the kinds
  are asked in that order and the first with a verdict wins, whatever its depth (a root
  ``.rgignore`` line beats a deeper ``.gitignore`` line). A ``.git`` below does not cut off the
  rules above it (``--no-require-git``).
- **Directories.** An ignored directory is not entered: nothing below it can be re-included
  (the caller's walk does not descend).

Refused (``parse`` gives None and rg decides): a file that is not UTF-8 or starts with a
byte-order mark, alternation (``{a,b}``), ``**`` inside a component, a negated class (rg's can
match ``/``), a class holding anything but ASCII letters, digits, ``._`` and ranges, an empty
component (``a//b``), a line that is only ``!`` or ``/``, a trailing or escaping-``/`` backslash,
``]`` outside a class, and more than ``MAX_RULES`` wildcard or path lines.

Matching is linear in the path: a component is matched by fixed-length pieces cut at ``*`` and
found left to right (``rg_rules.Pieces``), the components by fixed-length runs cut at ``**``,
each found leftmost in order.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from subagent_lab.tools.rg.rules import Pieces, ignore_lines, ignore_text

MAX_RULES = 256
"""Lines other than plain names that one file may hold before rg is asked to list instead."""
KINDS = (".rgignore", ".ignore", ".gitignore", ".git")
"""The ignore files of a directory, most binding first (``.git``: its ``info/exclude``)."""
_TRIMMED = "".join(c for c in map(chr, range(0x3001)) if c.isspace() and c not in "\x1c\x1d\x1e\x1f")
"""Unicode White_Space, which Rust's ``trim_end`` drops: Python's white space but four separators."""
_CLASS = re.compile(rb"\[((?:[A-Za-z0-9._](?:-[A-Za-z0-9._])?)+)\]")
_PLAIN = re.compile(rb"[^*?\[\]\\{}]+")
_STAR_STAR = b"**"

Segment = bytes | Pieces
"""One component of a glob: a literal name, or pieces cut at its stars."""


class Refused(Exception):
    """A line outside the subset this module evaluates exactly."""


def _segment(text: bytes) -> tuple[Segment, bytes | None]:
    """The exact matcher of one glob component (not ``**``), and the bytes every name it matches
    ends with when the glob fixes them (a literal after the last ``*``)."""
    sources: list[bytes] = []
    sizes: list[int] = []
    source, size, literal, i = b"", 0, b"", 0
    plain, wild = True, False  # whether the current piece is literal bytes only; any wildcard yet
    while i < len(text):
        char = text[i : i + 1]
        if char == b"*":
            if text[i + 1 : i + 2] == b"*":
                raise Refused("** inside a component")
            sources.append(source)
            sizes.append(size)
            source, size, literal, plain, wild = b"", 0, b"", True, True
            i += 1
        elif char == b"?":  # any one byte (a name holds no /)
            source, size, plain, wild = source + b".", size + 1, False, True
            i += 1
        elif char == b"\\":
            if i + 1 == len(text):
                raise Refused("a trailing backslash")
            byte = text[i + 1 : i + 2]
            source, size, literal = source + re.escape(byte), size + 1, literal + byte
            i += 2
        elif char == b"[":
            klass = _CLASS.match(text, i)
            if klass is None:
                raise Refused("a class outside the subset")
            if any(r[0] > r[2] or r[0] <= ord("/") <= r[2] for r in re.findall(rb".-.", klass.group(1))):
                raise Refused("a reversed range, or one holding /")  # rg's class can match /
            source, size, plain, wild = source + klass.group(), size + 1, False, True
            i = klass.end()
        else:
            run = _PLAIN.match(text, i)
            if run is None:  # ], { or }
                raise Refused("alternation or a stray bracket")
            text_run = run.group()
            source, size, literal = source + re.escape(text_run), size + len(text_run), literal + text_run
            i = run.end()
    if not wild:
        return literal, literal
    sources.append(source)
    sizes.append(size)
    pieces = Pieces(tuple(re.compile(s, re.DOTALL) for s in sources), tuple(sizes))
    return pieces, literal if plain and literal and len(sources) > 1 else None


def _matches(segment: Segment, name: bytes) -> bool:
    return segment == name if isinstance(segment, bytes) else segment.match(name)


@dataclass(frozen=True)
class _Rule:
    """One line: runs of components separated by ``**`` (one run: no ``**``)."""

    index: int
    whitelist: bool
    dir_only: bool
    runs: tuple[tuple[Segment, ...], ...]
    tail: bytes | None

    def match(self, parts: list[bytes], base: int) -> bool:
        """Whether the path ``parts[base:]`` matches."""
        runs, end = self.runs, len(parts)
        first, last = runs[0], runs[-1]
        if len(runs) == 1:
            return end - base == len(first) and all(map(_matches, first, parts[base:]))
        if end - base < len(first) + len(last):
            return False
        if not all(map(_matches, first, parts[base:])):
            return False
        if not all(map(_matches, last, parts[end - len(last) :])):
            return False
        pos, stop = base + len(first), end - len(last)
        for run in runs[1:-1]:  # each found leftmost: a later ** absorbs whatever is skipped
            while pos + len(run) <= stop and not all(map(_matches, run, parts[pos : pos + len(run)])):
                pos += 1
            if pos + len(run) > stop:
                return False
            pos += len(run)
        return True


def _rule(line: str, index: int) -> _Rule | None:
    """One line as rg's gitignore reader takes it; None for a comment or a blank line."""
    if line.startswith("#"):
        return None
    if not line.endswith("\\ "):
        line = line.rstrip(_TRIMMED)
    if not line:
        return None
    whitelist = anchored = dir_only = False
    if line.startswith(("\\!", "\\#")):
        line = line[1:]
    else:
        if line.startswith("!"):
            whitelist, line = True, line[1:]
        if line.startswith("/"):
            anchored, line = True, line[1:]
    if line.endswith("/"):
        dir_only, line = True, line[:-1].removesuffix("\\")
    if not line:
        raise Refused("an empty glob")
    raw = line.encode("utf-8")
    segments = raw.split(b"/")
    if not anchored and len(segments) == 1 and raw != _STAR_STAR:
        segments.insert(0, _STAR_STAR)  # a name at any depth
    if len(segments) > 1 and segments[-1] == _STAR_STAR:
        segments.append(b"*")  # everything below, not the directory itself
    if not all(segments):
        raise Refused("an empty component")
    runs: list[list[Segment]] = [[]]
    tail: bytes | None = None
    for text in segments:
        if text == _STAR_STAR:
            runs.append([])
            tail = None
        else:
            segment, tail = _segment(text)
            runs[-1].append(segment)
    return _Rule(index, whitelist, dir_only, tuple(map(tuple, runs)), tail)


@dataclass
class IgnoreFile:
    """One ignore file's lines: ``matched`` gives the verdict of its last line matching a path."""

    names: dict[bytes, list[_Rule]] = field(default_factory=dict)
    """Lines that are a plain name at any depth, by name."""
    rules: list[_Rule] = field(default_factory=list)
    """The other lines, last first."""
    untailed: list[_Rule] = field(default_factory=list)
    """Those of ``rules`` with no fixed ending (``tail``), last first."""
    tails: tuple[bytes, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.names or self.rules)

    def matched(self, parts: list[bytes], base: int, is_dir: bool) -> bool | None:
        """True when ``parts[base:]`` (the path below this file's directory) is ignored, False
        when re-included (``!``), None when no line matches it."""
        name = parts[-1]
        best: _Rule | None = None
        for rule in reversed(self.names.get(name, ())):
            if is_dir or not rule.dir_only:
                best = rule
                break
        for rule in self.rules if name.endswith(self.tails) else self.untailed:
            if best is not None and rule.index < best.index:
                break
            if (is_dir or not rule.dir_only) and rule.match(parts, base):
                best = rule
                break
        return None if best is None else not best.whitelist


def parse(data: bytes) -> IgnoreFile | None:
    """An ignore file's rules from its bytes; None when it is outside the subset (module doc)."""
    text = ignore_text(data)
    if text is None:
        return None
    parsed = IgnoreFile()
    try:
        for index, line in enumerate(ignore_lines(text)):
            rule = _rule(line, index)
            if rule is None:
                continue
            runs = rule.runs
            if len(runs) == 2 and not runs[0] and len(runs[1]) == 1 and isinstance(runs[1][0], bytes):
                parsed.names.setdefault(runs[1][0], []).append(rule)
            else:
                parsed.rules.append(rule)
    except Refused:
        return None
    if len(parsed.rules) > MAX_RULES:
        return None
    parsed.rules.reverse()
    parsed.untailed = [rule for rule in parsed.rules if rule.tail is None]
    parsed.tails = tuple({rule.tail for rule in parsed.rules if rule.tail is not None})
    return parsed


Active = list[tuple[int, int, IgnoreFile]]
"""The ignore files above an entry: (kind's rank in ``KINDS``, depth of its directory, rules),
sorted by rank, deepest first within a rank."""


def ignored(active: Active, parts: list[bytes], is_dir: bool) -> bool:
    """Whether rg's ignore files exclude the entry at ``parts`` (components from the root)."""
    for _, base, rules in active:
        verdict = rules.matched(parts, base, is_dir)
        if verdict is not None:
            return verdict
    return False


def with_file(active: Active, kind: str, depth: int, rules: IgnoreFile) -> Active:
    """``active`` with one directory's file of ``kind`` (a name in ``KINDS``) added."""
    return sorted([*active, (KINDS.index(kind), depth, rules)], key=lambda each: (each[0], -each[1]))
