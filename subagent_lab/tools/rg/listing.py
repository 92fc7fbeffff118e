"""The files a directory Grep reads, as ripgrep's walk chooses them, remembered while the tree
stays the same.

``rg --files`` gives the listing (the ignore files, the globs, the exclusions and the order of a
search); starting it costs a directory Grep more than the search itself on a package-sized tree.
Its output is a function of its arguments, of the names and kinds (directory, file, link, other)
of the entries rg can reach and of the ignore files' contents, so a listing is kept with a
signature of those, taken by a walk through held descriptors (``openat`` with ``O_NOFOLLOW``,
one descriptor per level), and given again while the signature matches. A signature is only
taken where it is exact and cheap: no ignore file that is a link or too large, no unreadable
directory, at most ``MAX_SIGNED_ENTRIES`` entries; otherwise rg lists every time.

Where the caller's glob is plain and the tree's ignore files are within the subset that
``rg_ignore`` evaluates exactly as rg does (or, outside it, provably decide nothing there:
``rg_rules``), the signature walk's own view gives the listing and no rg is started
(``walk_listing``).

A listing is names only: every file in it is still opened component by component through
descriptors (``rg_files.open_listed``), so a stale or raced listing can only miss or skip a
file, never lead a read outside.
"""

from __future__ import annotations

import errno
import hashlib
import os
import stat
import subprocess
import threading
import time
from collections import OrderedDict

from subagent_lab.tools import rg
from subagent_lab.tools.rg import ignore as rg_ignore
from subagent_lab.tools.rg import rules as rg_rules
from subagent_lab.workspace.sandbox import DEFAULT_IGNORED_DIRS, Workspace

MAX_LISTING = 64 * 1024 * 1024
"""Bytes of ``rg --files`` output read at most."""
MAX_SIGNED_ENTRIES = 20_000
"""Directory entries a signature walk looks at before giving up (rg then lists every time)."""
MAX_SIGNED_DEPTH = 100
"""Directory levels a signature walk descends before giving up."""
MAX_IGNORE_FILE_BYTES = 1_000_000
"""A larger ignore file makes the tree unsigned (its bytes are hashed on every call)."""
CACHED_LISTINGS = 16
"""Listings kept (least recently used dropped)."""
WALK_SHARE = 0.3
"""The share of a search's time left that the walk (signing the tree, evaluating its ignore files)
may take; past it rg lists the tree, and the directory is not walked again while it is remembered
(hostile ignore files make the walk slow on every new glob or path, rg's compiled globs are not)."""
IGNORE_FILES = frozenset({".gitignore", ".ignore", ".rgignore"})
"""The per-directory files whose rules rg's walk applies (and ``.git/info/exclude``)."""
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC

_lock = threading.Lock()
_listings: OrderedDict[tuple[object, ...], tuple[bytes, list[str]]] = OrderedDict()
_unsigned: OrderedDict[tuple[object, ...], None] = OrderedDict()
"""Trees found over the signature walk's bounds: not walked again."""
_slow: OrderedDict[tuple[int, int], None] = OrderedDict()
"""Directories (device, inode) whose walk ran past its share of a search's time: rg lists them."""


class _Unsigned(Exception):
    """The tree cannot be signed exactly or cheaply."""


class ListingTimedOut(Exception):
    """The walk (signing the tree, evaluating its ignore files) ran past the search's deadline:
    hostile ignore files can make it slow, and the search's time limit holds for it as for rg."""


def _check(deadline: float | None) -> None:
    if deadline is not None and time.monotonic() > deadline:
        raise ListingTimedOut


class _TooLarge(_Unsigned):
    """The tree is over the signature walk's bounds: not tried again for the same directory."""


def clear_cache() -> None:
    """Forget every kept listing (tests, cold benchmarks)."""
    with _lock:
        _listings.clear()
        _unsigned.clear()
        _slow.clear()


def _file_bytes(dir_fd: int, name: str) -> bytes:
    """An ignore file's bytes through ``dir_fd``; ``b""`` when it does not exist."""
    try:
        fd = os.open(name, _FILE_FLAGS, dir_fd=dir_fd)
    except OSError as exc:
        if exc.errno in (errno.ENOENT, errno.ENOTDIR):
            return b""
        raise _Unsigned from None  # a link (rg would follow it) or unreadable
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_size > MAX_IGNORE_FILE_BYTES:
            raise _Unsigned
        return os.read(fd, MAX_IGNORE_FILE_BYTES + 1)
    finally:
        os.close(fd)


def _git_exclude(dir_fd: int) -> bytes:
    """``.git/info/exclude`` below ``dir_fd`` (``b""`` when absent), opened component by component.

    With ``--no-require-git`` rg reads exactly this path: a ``.git`` *file* (a submodule's or a
    worktree's pointer) is not followed, so only a link on the way makes the tree unsigned."""
    opened: list[int] = []
    try:
        for name in (".git", "info"):
            parent = opened[-1] if opened else dir_fd
            try:
                info = os.stat(name, dir_fd=parent, follow_symlinks=False)
            except (FileNotFoundError, NotADirectoryError):
                return b""
            if stat.S_ISLNK(info.st_mode):
                raise _Unsigned  # rg follows it
            if not stat.S_ISDIR(info.st_mode):
                return b""  # a .git file, or an info file: rg finds no exclude file there
            try:
                opened.append(os.open(name, _DIR_FLAGS, dir_fd=parent))
            except OSError:
                raise _Unsigned from None
        return _file_bytes(opened[-1], "exclude")
    finally:
        for fd in opened:
            os.close(fd)


def _sized(data: bytes) -> bytes:
    return b"%d:" % len(data) + data


class _Dir:
    """One directory as the signature walk saw it: its entries (name, kind) in rg's order, the
    directories below it that rg enters, and the bytes of its ignore files."""

    __slots__ = ("children", "entries", "ignore_files")

    def __init__(self, entries: list[tuple[str, str]]) -> None:
        self.entries = entries
        self.children: dict[str, _Dir] = {}
        self.ignore_files: list[tuple[str, bytes]] = []
        """(name, bytes): ``.gitignore``, ``.ignore``, ``.rgignore``, or ``.git`` for its exclude file."""


def _sign_dir(
    fd: int, rel: str, digest: hashlib.blake2b, counted: list[int], depth: int, deadline: float | None
) -> _Dir:
    if depth > MAX_SIGNED_DEPTH:
        raise _TooLarge
    _check(deadline)
    try:
        with os.scandir(fd) as entries:
            listing = [(e.name, _kind(e)) for e in entries]
    except OSError:
        raise _Unsigned from None
    counted[0] += len(listing)
    if counted[0] > MAX_SIGNED_ENTRIES:
        raise _TooLarge
    listing.sort()
    # No name is empty or holds a NUL: an empty field ends the directory's block unambiguously.
    text = "\0".join([rel, *(k + n for n, k in listing)]) + "\0\0"
    if not text.isascii():  # rg orders names by their bytes
        listing.sort(key=lambda entry: os.fsencode(entry[0]))
        text = "\0".join([rel, *(k + n for n, k in listing)]) + "\0\0"
    digest.update(text.encode("utf-8", "surrogateescape"))
    node = _Dir(listing)
    for name, kind in listing:
        if name in IGNORE_FILES:
            if kind != "f":
                raise _Unsigned
            data = _file_bytes(fd, name)
        elif name == ".git":
            data = _git_exclude(fd)
        else:
            continue
        digest.update(_sized(data))
        node.ignore_files.append((name, data))
    for name, kind in listing:
        if kind != "d" or name in DEFAULT_IGNORED_DIRS:
            continue  # rg's walk never enters these (``--glob '!name/'``)
        try:
            child = os.open(name, _DIR_FLAGS, dir_fd=fd)
        except OSError:
            raise _Unsigned from None  # swapped or unreadable: rg would report, not list
        try:
            node.children[name] = _sign_dir(child, f"{rel}/{name}", digest, counted, depth + 1, deadline)
        finally:
            os.close(child)
    return node


def _kind(entry: os.DirEntry[str]) -> str:
    if entry.is_file(follow_symlinks=False):  # most entries: one call
        return "f"
    if entry.is_dir(follow_symlinks=False):
        return "d"
    return "l" if entry.is_symlink() else "o"


def _walk(dir_fd: int, deadline: float | None = None) -> tuple[bytes, _Dir]:
    """(the signature of the tree below ``dir_fd``, what the walk saw); ``_Unsigned`` when the
    tree cannot be signed (see the module doc), ``ListingTimedOut`` past ``deadline``."""
    digest = hashlib.blake2b(digest_size=20)
    tree = _sign_dir(dir_fd, ".", digest, [0], 0, deadline)
    return digest.digest(), tree


def signature(dir_fd: int) -> bytes:
    """A digest of what ``rg --files`` reads of the tree below ``dir_fd``; ``_Unsigned`` when the
    tree cannot be signed (see the module doc)."""
    return _walk(dir_fd)[0]


def _walked(key: tuple[object, ...], dir_fd: int, deadline: float | None) -> tuple[bytes, _Dir] | None:
    """``_walk(dir_fd)``, remembering a tree over the bounds so that it is not walked again."""
    with _lock:
        if key in _unsigned:
            return None
    try:
        return _walk(dir_fd, deadline)
    except _TooLarge:
        with _lock:
            _unsigned[key] = None
            while len(_unsigned) > CACHED_LISTINGS:
                _unsigned.popitem(last=False)
        return None
    except _Unsigned:
        return None


_Widened = tuple[rg_rules.Rules, int]
"""An ignore file outside ``rg_ignore``'s subset, widened, with the depth of its directory."""


class _Refused(Exception):
    """An ignore file neither evaluated exactly nor shown to decide nothing: rg must list."""


def walk_listing(
    tree: _Dir, glob: str | None, ignore_files: bool, deadline: float | None = None
) -> list[str] | None:
    """What ``rg --files`` lists of the walked ``tree`` with the caller's ``glob``; None when the
    glob is not plain or an ignore file is outside what ``rg_ignore`` evaluates and may decide
    something (``rg_rules``). ``ignore_files``: whether rg reads them (``--no-ignore`` when not).
    ``ListingTimedOut`` past ``deadline`` (checked at every ignore file and every entry: thousands
    of rules can make one entry slow).

    rg's ``--glob`` comes before the ignore files: an entry whose name it matches is listed (a
    file) or entered (a directory) whatever they say, a file it does not match is left out."""
    passes = rg_rules.glob_filter(glob) if glob else None
    if glob and passes is None:
        return None
    files: list[str] = []
    parts: list[bytes] = []

    def visit(node: _Dir, prefix: str, active: rg_ignore.Active, widened: list[_Widened]) -> None:
        depth = len(parts)
        if ignore_files:
            for kind, data in node.ignore_files:
                _check(deadline)
                exact = rg_ignore.parse(data)
                if exact is not None:
                    if exact:
                        active = rg_ignore.with_file(active, kind, depth, exact)
                    continue
                rules = rg_rules.parse(data)
                if rules is None:
                    raise _Refused
                if rules:
                    widened = [*widened, (rules, depth)]
        undecided = rg_rules.checker(widened, depth + 1) if widened else None
        parts.append(b"")
        for name, kind in node.entries:
            if kind != "f" and (kind != "d" or name not in node.children):
                continue
            _check(deadline)
            encoded = parts[-1] = name.encode("utf-8", "surrogateescape")
            if undecided is not None and undecided(encoded):
                raise _Refused
            if passes is not None and not passes(encoded):
                if kind == "f" or (active and rg_ignore.ignored(active, parts, True)):
                    continue
            elif passes is None and active and rg_ignore.ignored(active, parts, kind == "d"):
                continue
            if kind == "f":
                files.append(prefix + name)
            else:
                visit(node.children[name], f"{prefix}{name}/", active, widened)
        parts.pop()

    try:
        visit(tree, "", [], [])
    except _Refused:
        return None
    return files


def _rg_list(args: list[str], pinned_fd: int, deadline: float) -> tuple[list[str], bool]:
    """(rg's listing, whether rg listed the whole tree without an error)."""
    try:
        proc = subprocess.run(
            args, cwd=f"/proc/self/fd/{pinned_fd}", stdin=subprocess.DEVNULL, capture_output=True,
            timeout=max(deadline - time.monotonic(), 0.001),
        )  # fmt: skip
    except subprocess.TimeoutExpired:
        return [], False  # the search's own deadline then reports the cut
    listed = [p[2:] if p.startswith(b"./") else p for p in proc.stdout[:MAX_LISTING].split(b"\0") if p]
    # Listed in parallel and sorted here as ``--sort path`` would (each directory's names in
    # order, depth first: a component-wise sort), which costs rg a single thread.
    listed.sort(key=lambda p: p.split(b"/"))
    complete = proc.returncode == 0 and len(proc.stdout) <= MAX_LISTING
    return [os.fsdecode(p) for p in listed], complete


def _keep(key: tuple[object, ...], signed: bytes, listed: list[str]) -> None:
    with _lock:
        _listings[key] = (signed, list(listed))
        _listings.move_to_end(key)
        while len(_listings) > CACHED_LISTINGS:
            _listings.popitem(last=False)


def list_files(ws: Workspace, pinned_fd: int, glob: str | None, deadline: float) -> list[str]:
    """The files a search of the pinned directory would read, as rg walks it (paths below it).

    Secrets are left to ``Workspace.is_secret`` (the caller's): the rule every search hit gets,
    without ~90 globs for rg to compile on every call. No ``--max-filesize``: a file's size is
    checked when it is opened, so the listing depends on names only. The signature walk's own
    view gives the listing where ``walk_listing`` can give rg's: then no rg is started. The walk
    gets ``WALK_SHARE`` of the time left; ``ListingTimedOut`` when rg's listing runs past
    ``deadline``."""
    args = [rg._rg_binary(), "--files", "--null", "--no-config", "--no-follow", "--hidden"]
    args += [*rg.walk_filters(ws, glob, secrets=False), "--", "."]
    info = os.fstat(pinned_fd)
    key = (tuple(args), info.st_dev, info.st_ino)
    before = None
    try:
        listed, before = _from_walk(key, pinned_fd, glob, ws.honour_gitignore, deadline)
    except ListingTimedOut:
        with _lock:
            _slow[(info.st_dev, info.st_ino)] = None
            while len(_slow) > CACHED_LISTINGS:
                _slow.popitem(last=False)
        listed = None
    if listed is not None:
        return listed
    listed, complete = _rg_list(args, pinned_fd, deadline)
    if not complete and time.monotonic() >= deadline:
        raise ListingTimedOut
    if before is None or not complete:
        return listed
    if time.monotonic() < deadline and _signed(key, pinned_fd, deadline) == before:  # unchanged meanwhile
        _keep(key, before, listed)
    return listed


def _from_walk(
    key: tuple[object, ...], pinned_fd: int, glob: str | None, honour: bool, deadline: float
) -> tuple[list[str] | None, bytes | None]:
    """(the kept listing or the walk's own, None where rg must list; the tree's signature, None
    where it has none). ``ListingTimedOut`` past its share of the time left (``WALK_SHARE``)."""
    with _lock:
        if key[1:] in _slow:  # (device, inode)
            return None, None
    now = time.monotonic()
    walked = _walked(key, pinned_fd, now + max(deadline - now, 0.0) * WALK_SHARE)
    if walked is None:
        return None, None
    before, tree = walked
    with _lock:
        kept = _listings.get(key)
        if kept is not None and kept[0] == before:
            _listings.move_to_end(key)
            return list(kept[1]), before
    listed = walk_listing(tree, glob, honour, now + max(deadline - now, 0.0) * WALK_SHARE)
    if listed is not None:  # the walk's own view: consistent with its signature
        _keep(key, before, listed)
    return listed, before


def _signed(key: tuple[object, ...], dir_fd: int, deadline: float) -> bytes | None:
    try:
        walked = _walked(key, dir_fd, deadline)
    except ListingTimedOut:
        return None  # rg's listing stands; it is not kept
    return None if walked is None else walked[0]
