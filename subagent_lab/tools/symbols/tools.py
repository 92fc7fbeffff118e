"""Find, Refs, Outline and Search: the symbol index as tools a small model can use.

One argument each, short output grouped by file, library code before tests, docs and examples
(marked ``[test]``, ``[doc]``, ``[example]``). A definition is shown as ``path:start-end`` with its
signature; the observation's spans are the lines it printed, no more (issue 36: seen means
printed): a definition's first line, a referencing line, never a body only named by its range, so
citing a unit whole is seen only once a Read showed it. A ``Next:`` line appears only where it
names where the code is (the one definition found), never a guess.
"""

from __future__ import annotations

import difflib
import os
from collections import Counter

from subagent_lab.core.tool import Observation, ObservationBuilder, Span, Tool, ToolError
from subagent_lab.tools.simple_grep import quote
from subagent_lab.tools.symbols.index import (
    MAX_FILE_BYTES,
    SymbolIndex,
    index_for,
    is_name,
    name_parts,
    own_counts,
    read_code,
    symbol_name,
)
from subagent_lab.tools.symbols.parse import LANGUAGES, REF_KINDS, Definition
from subagent_lab.tools.symbols.search import ranked_units, unmatched_words
from subagent_lab.workspace.sandbox import Workspace

__all__ = ["find", "outline", "refs", "search", "symbol_tools"]

LINE_CHARS = 120
"""Characters shown of a signature or a referencing line."""
REFS_PER_FILE = 5
"""Referencing lines one Refs shows per file; the rest are counted."""
MAX_CALLEES = 6
"""Workspace definitions a Find of one function lists as called by it; the rest are named."""
CALL_KINDS = frozenset({"call", "method call"})
MAX_NAME_CHARS = 200
"""A longer name is cut (a runaway argument; no identifier is that long)."""
MAX_QUERY_CHARS = 1000
"""A longer query is cut (a pasted task is shorter; a runaway argument is not)."""
MAX_MISSING = 8
"""Query words no unit holds, listed at most."""


def _mark(role: str) -> str:
    return "" if role == "library" else f"[{role}] "


def _cut(text: str, limit: int = LINE_CHARS) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _unit_lines(
    out: ObservationBuilder, index: SymbolIndex, rel: str, unit: Definition, indent: str = ""
) -> None:
    """``path:start-end kind qualname``, then its signature and first docstring line; seen: the
    first line (the signature's), not the body the range only names."""
    out.line(f"{indent}{_mark(index.role(rel))}{rel}:{unit.start}-{unit.end} {unit.kind} {unit.qualname}")
    out.line(f"{indent}  {_cut(unit.signature)}")
    if unit.doc:
        out.line(f"{indent}  {quote(_cut(unit.doc))}")
    out.mark(Span(rel, unit.start, unit.start))


def _notes(out: ObservationBuilder, index: SymbolIndex) -> None:
    if index.stats.notes:
        out.line("[note: " + "; ".join(index.stats.notes) + "]")


def find(ws: Workspace, name: str, limit: int = 8) -> Observation:
    """Show where a name is defined: each class, function, method or constant with that name,
    its line range, signature and the first line of its docstring; for one function, the
    functions it calls and where they are defined.

    Args:
        name: The name as the code spells it, e.g. `get_template`, or `Class.method` for a member.
    """
    index = index_for(ws)
    out = ObservationBuilder()
    _notes(out, index)
    if not is_name(name[:MAX_NAME_CHARS]):
        return _words_instead(out, index, name, limit)
    name = symbol_name(name[:MAX_NAME_CHARS])
    hits, matched = index.find(name)
    if not hits:
        member = name.strip().rsplit(".", 1)[-1]
        out.line(f"No definition named {quote(member)} in the {len(index.files)} code files indexed.")
        close = difflib.get_close_matches(member, list(index.by_name), n=5, cutoff=0.75)
        if close:
            out.line("Defined names close to it: " + ", ".join(close))
        # A name the model made up from the task (``TemplateLoader`` for "the loader classes")
        # is still words: the units they rank show code, where spelling-close names misled it.
        _ranked(out, index, member, limit)
        used = index.refs(member)
        if used:
            out.line(f"Next: Refs name={quote(member)} (it is referenced {len(used)} times)")
        return out.build()
    parts = [p for p in name.strip().split(".") if p]
    if len(parts) > 1 and matched < len(parts):
        out.line(
            f"No definition matches all of {quote(name.strip())}; "
            f"these match {quote('.'.join(parts[-matched:]))}:"
        )
    else:
        count = f"{len(hits)} definitions" if len(hits) != 1 else "1 definition"
        out.line(f"{count} of {quote(name.strip())}:")
    for rel, unit in hits[:limit]:
        _unit_lines(out, index, rel, unit)
    if len(hits) > limit:
        files = Counter(rel for rel, _ in hits[limit:])
        out.line(
            f"Not shown: {len(hits) - limit} more in "
            + ", ".join(f"{r} ({n})" for r, n in files.most_common(5))
            + "."
        )
    rel, unit = hits[0]
    library = [h for h in hits if index.role(h[0]) == "library"]
    if len(library) == 1 and unit.kind in ("function", "method"):
        _callee_lines(out, index, rel, unit)
    if len(library) == 1 and unit.kind == "class":
        out.line(f"Next: Outline path={quote(rel)} lists its members")
    elif len(library) == 1 and unit.end > unit.start:
        out.line(f"Next: Read path={quote(rel)} line={unit.start} shows its body")
    return out.build()


def _callees(index: SymbolIndex, rel: str, unit: Definition) -> list[tuple[str, str, Definition | None]]:
    """The workspace definitions ``unit`` calls, in the order of their first call: (name, file,
    definition), the definition None when several match and none is in ``unit``'s file or class.
    A name the file only ever takes from another package (``weakref.ref(...)``, ``from os import
    path``) is not a call of a workspace definition that shares its last part."""
    first: dict[str, int] = {}
    entry = index.files[rel]
    own = index.derive("own modules", SymbolIndex.own_modules)
    for name, codes in entry.parse.refs.items():
        if name == unit.name or name not in index.by_name or own_counts(entry, name, codes, own) == (0, 0):
            continue
        lines = [c >> 3 for c in codes if REF_KINDS[c & 7] in CALL_KINDS and unit.start <= c >> 3 <= unit.end]
        if lines:
            first[name] = min(lines)
    owner = unit.qualname.rsplit(".", 1)[0] if "." in unit.qualname else ""
    found: list[tuple[str, str, Definition | None]] = []
    for name in sorted(first, key=first.__getitem__):
        unique = {(h[0], h[1].qualname): h for h in index.by_name[name] if h[1].kind != "constant"}
        hits = list(unique.values())  # @overload stubs and their implementation: the last one
        if not hits:
            continue
        mine = [h for h in hits if h[0] == rel and (not owner or h[1].qualname == f"{owner}.{name}")]
        pick = hits if len(hits) == 1 else mine[:1] or [h for h in hits if h[0] == rel][:1]
        found.append((name, pick[0][0], pick[0][1]) if len(pick) == 1 else (name, "", None))
    return found


def _callee_lines(out: ObservationBuilder, index: SymbolIndex, rel: str, unit: Definition) -> None:
    """``calls name: path:start-end kind qualname`` for each workspace definition ``unit`` calls."""
    callees = _callees(index, rel, unit)
    for name, where, callee in callees[:MAX_CALLEES]:
        if callee is None:
            count = len(index.by_name[name])
            out.line(f"  calls {name}: {count} definitions (Find name={quote(name)})")
            continue
        label = f"{_mark(index.role(where))}{where}:{callee.start}-{callee.end}"
        # Named by its header (kind and name of its first line), its body not printed.
        out.line(
            f"  calls {name}: {label} {callee.kind} {callee.qualname}",
            Span(where, callee.start, callee.start),
        )
    if len(callees) > MAX_CALLEES:
        out.line(
            f"  calls {len(callees) - MAX_CALLEES} more: " + ", ".join(n for n, _, _ in callees[MAX_CALLEES:])
        )


def _file_lines(ws: Workspace, rel: str) -> list[str]:
    try:
        data, _ = read_code(ws, rel)
    except (OSError, ToolError):
        return []
    return data.decode("utf-8", "replace").splitlines()


def refs(ws: Workspace, name: str, limit: int = 15) -> Observation:
    """Show where a name is used: the lines that call, import, assign, subclass or read it,
    grouped by file, library code first, each with the function or class it is in.

    Args:
        name: The name as the code spells it, e.g. `get_template`; for `Class.method` the uses of `method`.
    """
    if not name.strip():
        raise ToolError("name must not be empty; give a function, class or variable name")
    index = index_for(ws)
    out = ObservationBuilder()
    _notes(out, index)
    if not is_name(name[:MAX_NAME_CHARS]):  # Refs shows twice Find's lines; a search shows Find's count
        return _words_instead(out, index, name, max(1, limit // 2))
    name = symbol_name(name[:MAX_NAME_CHARS])
    member = name_parts(name)[-1:]
    hits = index.refs(name)
    defined, _ = index.find(name)
    for rel, unit in defined[:2]:
        out.line(
            f"Defined at {_mark(index.role(rel))}{rel}:{unit.start}-{unit.end} ({unit.kind} {unit.qualname})",
            Span(rel, unit.start, unit.start),
        )
    if not hits:
        python = sum(1 for f in index.files.values() if f.parse.language == "python")
        out.line(
            f"No reference to {quote(member[0])} in the {python} Python files indexed "
            "(references are indexed for Python only)."
        )
        return out.build()
    by_file: dict[str, list[tuple[int, str]]] = {}
    for hit in hits:
        lines = by_file.setdefault(hit.rel, [])
        if not lines or lines[-1][0] != hit.line:
            lines.append((hit.line, hit.kind))
    total = sum(len(v) for v in by_file.values())
    how = "; matched by the name alone, the object before the dot is not resolved" if "." in name else ""
    files = f"{len(by_file)} files" if len(by_file) != 1 else "1 file"
    out.line(f"References to {quote(member[0])}: {total} in {files} (library first{how}).")
    shown = 0
    rest: Counter[str] = Counter()
    for rel, lines in by_file.items():
        if shown >= limit:
            rest[rel] = len(lines)
            continue
        take = lines[: min(REFS_PER_FILE, limit - shown)]
        text = _file_lines(ws, rel)
        out.line(f"{_mark(index.role(rel))}{rel} ({len(lines)})")
        for line, kind in take:
            holder = index.enclosing(rel, line)
            where = f" in {holder.qualname} ({holder.start}-{holder.end})" if holder else ""
            code = _cut(text[line - 1]) if 0 < line <= len(text) else ""
            # The line printed, and its holder's first line (named), not the holder's body.
            spans = [Span(rel, line, line)] + ([Span(rel, holder.start, holder.start)] if holder else [])
            out.line(f"  {line}: {kind}{where}: {code}", *spans)
        shown += len(take)
        if len(lines) > len(take):
            rest[rel] = len(lines) - len(take)
    if rest:
        listing = ", ".join(f"{r} ({n})" for r, n in rest.most_common(6))
        more = f" and {len(rest) - 6} more files" if len(rest) > 6 else ""
        out.line(f"Not shown: {sum(rest.values())} more in {listing}{more}.")
    return out.build()


def outline(ws: Workspace, path: str, limit: int = 60) -> Observation:
    """List the classes, functions, methods and constants a code file defines, with their line
    ranges; for a directory, its code files with what each defines at the top level.

    Args:
        path: A file or directory, as Grep, Glob or Find showed it.
    """
    index = index_for(ws)
    real = ws.resolve(path)  # containment and the secret policy, as for Read
    rel = ws.rel(real)
    out = ObservationBuilder()
    _notes(out, index)
    if os.path.isdir(real):
        prefix = "" if rel == "." else rel + "/"
        inside = sorted(r for r in index.files if r.startswith(prefix))
        if not inside:
            out.line(
                f"No code file the index parses (Python, JavaScript, TypeScript, Go) under {quote(rel)}."
            )
            return out.build()
        out.line(f"{len(inside)} code files under {quote(rel)}:")
        for file_rel in inside[:limit]:
            top = [d.name for d in index.files[file_rel].parse.definitions if "." not in d.qualname]
            names = ", ".join(top[:8]) + (f" and {len(top) - 8} more" if len(top) > 8 else "")
            out.line(
                f"{_mark(index.role(file_rel))}{file_rel}: {names or '(no definitions)'}", Span(file_rel)
            )
        if len(inside) > limit:
            out.line(f"Not shown: {len(inside) - limit} more files.")
        return out.build()
    entry = index.files.get(rel)
    if entry is None and os.path.splitext(rel)[1] in LANGUAGES:
        raise ToolError(
            f"{quote(rel)} was not indexed (over {MAX_FILE_BYTES // 1000} KB, or not readable as a "
            "regular file); Read shows it a window at a time"
        )
    if entry is None:
        raise ToolError(
            f"{quote(rel)} is not a code file the index parses (Python, JavaScript, TypeScript, Go); "
            "Read shows any text file"
        )
    defs = entry.parse.definitions
    role = "" if entry.role == "library" else f", {entry.role}"
    out.line(f"{rel} — {entry.parse.lines} lines, {len(defs)} definitions{role}:")
    if entry.parse.error:
        out.line(f"[note: {entry.parse.error}]")
    for unit in defs[:limit]:
        depth = unit.qualname.count(".")
        head = f"{'  ' * depth}{unit.start}-{unit.end} "
        out.line(head + _cut(unit.signature, LINE_CHARS - len(head)), Span(rel, unit.start, unit.start))
    if len(defs) > limit:
        out.line(f"Not shown: {len(defs) - limit} more definitions, from line {defs[limit].start}.")
    return out.build()


def search(ws: Workspace, query: str, limit: int = 8) -> Observation:
    """Rank the workspace's functions, classes and methods for a query in plain words; each
    result is a whole unit with its line range, signature and first docstring line.

    Args:
        query: What the code does or is about, in plain words or names, e.g. `cache compiled templates`.
    """
    index = index_for(ws)
    out = ObservationBuilder()
    _notes(out, index)
    _ranked(out, index, query[:MAX_QUERY_CHARS], limit)
    return out.build()


def _ranked(out: ObservationBuilder, index: SymbolIndex, query: str, limit: int) -> None:
    """Search's lines: the best ``limit`` units for ``query``, or that none shares a word with it."""
    hits = ranked_units(index, query, limit)
    if not hits:
        out.line(
            f"No function or class of the {len(index.files)} code files indexed shares a word with "
            f"{quote(_cut(query, 80))} (names, docstrings and code are searched)."
        )
        return
    out.line(f"Best {len(hits)} units for {quote(_cut(query, 80))} (library code first):")
    missing = unmatched_words(index, query)
    if missing:  # a ranking always ranks something; which words no code holds is the fact
        out.line(f"No unit's name, docstring or code holds: {', '.join(missing[:MAX_MISSING])}.")
    for hit in hits:
        _unit_lines(out, index, hit.rel, hit.unit)


def _words_instead(out: ObservationBuilder, index: SymbolIndex, text: str, limit: int) -> Observation:
    """Find or Refs given words, not a name (a small model passes the task's sentence): say so, and
    show what Search ranks for those words, so the call still shows code."""
    words = " ".join(text[:MAX_QUERY_CHARS].split())
    out.line(f"{quote(_cut(words, 80))} is not a name (a name is one word, or Class.member); Search for it:")
    _ranked(out, index, words, limit)
    return out.build()


def symbol_tools(max_results: int = 8) -> dict[str, Tool]:
    """Find, Refs, Outline and Search of the small-model interface, by name."""
    return {
        "Find": Tool("Find", find, bound={"limit": max_results}),
        "Refs": Tool("Refs", refs, bound={"limit": 2 * max_results}),
        "Outline": Tool("Outline", outline, bound={"limit": 60}),
        "Search": Tool("Search", search, bound={"limit": max_results}),
    }
