"""What a directory Grep's descriptor walk (``rg_listing.walk_listing``) needs beyond the exact
ignore rules of ``rg_ignore``: a widened reading of the ignore files ``rg_ignore`` refuses, and a
caller's glob plain enough to apply exactly.

- **Widened rules** (``parse``, ``checker``): an ignore file outside ``rg_ignore``'s subset is
  read as wider rules that match at least every name its lines can match, whether they ignore
  or re-include (``!x`` is widened as ``x``): the glob's last segment, with ``?``, negated
  classes, escapes, trailing blanks and anything unusual widened to ``*``; the depth below the
  file's directory kept only for an anchored glob without ``**``; case folded. When none of them
  matches any entry the walk reaches below the file, the file decides nothing there and the
  other files' exact verdicts are rg's; when one does (or the file is not UTF-8, starts with a
  byte-order mark, or has too many wildcard lines to check cheaply), rg lists.
- **The caller's glob** (``glob_filter``): letters, digits, ``._+@%=,~-`` and single ``*``
  (``*.py``, ``test_*``), which rg matches against each entry's name at any depth, byte for byte.
  Other globs are left to rg.

Matching is linear in the name for every rule: a glob's segment is cut at each ``*`` into
fixed-length pieces found left to right (``Pieces``), each a regex without repetition.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field

MAX_WILDCARD_RULES = 256
"""Wildcard lines (not plain names) checked against a tree before rg is asked to list instead."""
_PLAIN_GLOB = re.compile(r"(?:[A-Za-z0-9._+@%=,~-]|\*(?!\*))+")
_CLASS = re.compile(rb"\[([A-Za-z0-9._-]+)\]")
"""A bracket class of plain characters (``[cod]``, ``[0-9]``): one byte of those."""
_LITERAL = re.compile(rb"[^*?\[\]\\{}]*")


@dataclass(frozen=True)
class Pieces:
    """A glob segment cut at its stars: ``pieces[0]`` starts the name, ``pieces[-1]`` ends it, the
    others come in order in between (one piece: the whole name). Each piece is a regex of fixed
    length ``sizes[i]`` (no repetition) or None for "any bytes" (an unparsed segment)."""

    pieces: tuple[re.Pattern[bytes], ...]
    sizes: tuple[int, ...]

    def match(self, name: bytes) -> bool:
        if len(self.pieces) == 1:
            return len(name) == self.sizes[0] and self.pieces[0].fullmatch(name) is not None
        first, last = self.sizes[0], self.sizes[-1]
        end = len(name) - last
        if end < first or not self.pieces[0].fullmatch(name, 0, first):
            return False
        if not self.pieces[-1].fullmatch(name, end):
            return False
        pos = first
        for piece in self.pieces[1:-1]:
            found = piece.search(name, pos, end)
            if found is None:
                return False
            pos = found.end()
        return True


_ANY = Pieces((re.compile(b""), re.compile(b"")), (0, 0))


def _segment(segment: bytes) -> Pieces:
    """The widened matcher of one glob segment (see the module doc)."""
    if b"**" in segment or b"{" in segment or b"}" in segment:
        return _ANY  # alternation, or a ** inside a segment: anything
    pieces: list[bytes] = []  # regex source, one per star-separated piece
    sizes: list[int] = []
    current, size, i = b"", 0, 0
    while i < len(segment):
        char = segment[i : i + 1]
        if char in (b"*", b"?"):  # ``?`` is one character: several bytes for UTF-8
            pieces.append(current)
            sizes.append(size)
            current, size = b"", 0
            i += 1
        elif char == b"\\":
            if i + 1 == len(segment):
                return _ANY
            current += re.escape(segment[i + 1 : i + 2])
            size += 1
            i += 2
        elif char == b"[":
            klass = _CLASS.match(segment, i)
            if klass is None or re.search(rb"[-.]-[^-.]", klass.group(1)):
                return _ANY  # negated, unusual, unclosed, or a range holding / (rg's class matches /)
            current += b"[" + klass.group(1) + b"]"
            size += 1
            i = klass.end()
        else:
            literal = _LITERAL.match(segment, i)
            assert literal is not None
            text = literal.group() or char  # a lone ] is a literal
            current += re.escape(text)
            size += len(text)
            i += len(text)
    pieces.append(current)
    sizes.append(size)
    try:
        compiled = tuple(re.compile(p, re.IGNORECASE | re.DOTALL) for p in pieces)
    except re.error:  # a range like [z-a]
        return _ANY
    return Pieces(compiled, tuple(sizes))


@dataclass
class Rules:
    """The widened rules of one directory's ignore files: ``matches(name, depth)`` for an entry
    ``depth`` levels below that directory."""

    names: set[bytes] = field(default_factory=set)
    """Plain names at any depth, lower-cased."""
    anchored: dict[int, set[bytes]] = field(default_factory=dict)
    """Plain names at one depth, lower-cased."""
    wild: list[tuple[int | None, Pieces]] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.names or self.anchored or self.wild)

    def at(self, depth: int) -> tuple[set[bytes], list[Pieces]]:
        """(the plain names, the wildcard segments) that apply to entries ``depth`` levels below."""
        names = self.names | self.anchored.get(depth, set())
        return names, [pieces for at, pieces in self.wild if at is None or at == depth]

    def add(self, line: str) -> None:
        """One ignore-file line, parsed as rg's gitignore reader does, then widened (a
        negation ``!x`` as ``x``: what it re-includes is decided by this file too)."""
        if line.startswith("#"):
            return
        negated = line.startswith("!")
        line = line.removeprefix("!")
        widened = False
        if not line.endswith("\\ "):
            trimmed = line.rstrip()  # Python's blanks are rg's and four separators (\x1c-\x1f)
            widened = any(c in "\x1c\x1d\x1e\x1f" for c in line[len(trimmed) :])
            line = trimmed
        if not line and not widened:
            if negated:  # rg reads a lone ``!`` as re-including everything
                self.wild.append((None, _ANY))
            return
        anchored = line.startswith("/")
        body = line.removeprefix("/")
        if body.endswith("/"):  # directories only: widened to any entry
            body = body[:-1].removesuffix("\\")
        if not body:  # ``/``, ``!/``: an empty glob, read as anything
            self.wild.append((None, _ANY))
            return
        anchored = anchored or "/" in body
        raw = body.encode("utf-8", "surrogateescape") + (b"*" if widened else b"")
        segments = raw.split(b"/")
        braced = b"{" in raw or b"}" in raw  # alternation may hold a slash: anything, anywhere
        depth = len(segments) if anchored and b"**" not in raw and not braced else None
        last = b"**" if braced or not segments[-1] else segments[-1]
        if _LITERAL.fullmatch(last) is not None:
            (self.names if depth is None else self.anchored.setdefault(depth, set())).add(last.lower())
        else:
            self.wild.append((depth, _segment(last)))


def checker(rules: list[tuple[Rules, int]], depth: int) -> Callable[[bytes], bool] | None:
    """Whether a name at ``depth`` may be ignored by any of ``rules`` (each with the depth of its
    directory); None when none applies there."""
    names: set[bytes] = set()
    wild: list[Pieces] = []
    for each, base in rules:
        more_names, more_wild = each.at(depth - base)
        names |= more_names
        wild += more_wild
    if not names and not wild:
        return None
    return lambda name: name.lower() in names or any(pieces.match(name) for pieces in wild)


def ignore_text(data: bytes) -> str | None:
    """An ignore file's text; None for one that is not UTF-8 or starts with a byte-order mark."""
    if data.startswith(b"\xef\xbb\xbf"):
        return None  # rg versions differ on whether the mark belongs to the first line
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def ignore_lines(text: str) -> list[str]:
    """An ignore file's lines as rg reads them (Rust's ``BufRead::lines``): a ``\\r`` is dropped
    only before a ``\\n``, so a CRLF file's last line, with no newline after it, keeps its ``\\r``
    (then trimmed as white space, unless the line ends in an escaped blank)."""
    lines = text.split("\n")
    return [line.removesuffix("\r") for line in lines[:-1]] + lines[-1:]


def parse(data: bytes) -> Rules | None:
    """The widened rules of one ignore file's bytes; None when they cannot be checked (not
    UTF-8, a byte-order mark, or over ``MAX_WILDCARD_RULES`` wildcard lines)."""
    text = ignore_text(data)
    if text is None:
        return None
    rules = Rules()
    for line in ignore_lines(text):
        rules.add(line)
        if len(rules.wild) > MAX_WILDCARD_RULES:
            return None
    return rules


def glob_filter(glob: str | None) -> Callable[[bytes], bool] | None:
    """Whether a file's name (bytes) passes the caller's ``glob`` as rg applies it; None when the
    glob is not plain (see the module doc) and rg must apply it."""
    if not glob:
        return lambda name: True
    if _PLAIN_GLOB.fullmatch(glob) is None:
        return None
    if "*" not in glob:
        whole = glob.encode()
        return lambda name: name == whole
    first, *middle, last = [piece.encode() for piece in glob.split("*")]

    def passes(name: bytes) -> bool:
        end = len(name) - len(last)
        if end < len(first) or not name.startswith(first) or not name.endswith(last):
            return False
        pos = len(first)
        for piece in middle:
            pos = name.find(piece, pos, end)
            if pos < 0:
                return False
            pos += len(piece)
        return True

    return passes
