"""Gold of a mined commit: the definitions whose own code it changed, found at its parent.

Each changed source file is parsed before (the parent) and after (the commit), and each def and
class of the parent is compared with the one of the same qualified name and ordinal after it, by
its OWN code: its AST without its docstring, and without the code of the defs nested in it (a
function keeps their names, a class keeps nothing of its methods). So:

- a changed line belongs to the innermost unit whose code it is: a statement appended as the last
  line of a method is that method's (not the class's), one appended to a module-level function is
  the function's;
- a change to comments, a ``# type: ignore`` or a docstring changes no AST and makes no unit gold;
- a function whose own code changed, or that the commit removed, is gold, whole;
- a class is gold through its changed members; where its own statements changed (a class
  attribute, its bases or decorators), its gold spans are those statements at the parent (its
  header line for a statement inserted where the parent has none), not the whole class; a class
  the commit removed is gold, whole (and not its members again);
- a unit the commit ADDED (a new function, a new method) has no lines at the parent, where the task
  runs: it is listed (``added``), not gold, and does not make its class gold. A commit whose only
  unit changes are additions is removed (``added-only``); one that changed no unit at all
  (imports, constants) is removed (``module-level``).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from difflib import SequenceMatcher

from subagent_lab.bench.units import Unit, module_name, parse_tree, unit_nodes

MAX_UNITS = 6
_DEFS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
_HEADER_FIELDS = ("name", "bases", "keywords", "decorator_list", "type_params")


@dataclass(frozen=True)
class GoldUnit:
    """A unit a commit changed: its file and span at the parent (or in the tree it was mapped to)."""

    path: str
    unit: Unit
    count: int
    """How many units of that file share its qualname (see ``units.find_unit``)."""
    span: tuple[int, int] | None = None
    """Lines within a class that are the gold (its changed own statements); None: the whole unit."""
    span_anchor: str | None = None
    """Text of the first line of ``span`` (the anchor of a partial span)."""

    @property
    def qualified(self) -> str:
        """``package.module.Qual.name``."""
        module = module_name(self.path)
        return f"{module}.{self.unit.qualname}" if module else self.unit.qualname

    @property
    def lines(self) -> tuple[int, int]:
        """The gold lines: ``span``, else the unit's."""
        return self.span if self.span is not None else (self.unit.start, self.unit.end)

    @property
    def anchor(self) -> str:
        """Text in the gold lines: ``def name(`` / ``class name``, or a partial span's first line."""
        return self.span_anchor if self.span is not None and self.span_anchor else self.unit.anchor

    def moved(self, path: str, unit: Unit, text_lines: list[str]) -> GoldUnit:
        """This gold at ``unit`` of ``path`` in another tree (a partial span shifted with it)."""
        if self.span is None:
            return GoldUnit(path, unit, self.count)
        shift = unit.start - self.unit.start
        span = (self.span[0] + shift, self.span[1] + shift)
        return GoldUnit(path, unit, self.count, span, _anchor_at(text_lines, span[0]))


Node = ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef


@dataclass(frozen=True)
class Side:
    """One version of a file, parsed once: its lines and its units with their nodes."""

    lines: list[str]
    units: list[tuple[Unit, Node]]
    tree: ast.Module

    @property
    def text(self) -> str:
        """The file's text (its lines joined)."""
        return "\n".join(self.lines)


def parse_side(text: str | None) -> Side | None:
    """``text`` parsed (None: the file does not exist on that side, an empty side); None when it
    does not parse. A nesting too deep for the parser raises ``RecursionError``/``MemoryError``."""
    if text is None:
        return Side([], [], ast.Module(body=[], type_ignores=[]))
    tree = parse_tree(text)
    return None if tree is None else Side(text.splitlines(), unit_nodes(tree), tree)


@dataclass(frozen=True)
class FileChange:
    """One changed source file: its path at the parent and at the commit, and both sides (None
    where that side does not parse)."""

    old: str
    new: str
    before: Side | None
    after: Side | None


def same_code(before: Side, after: Side, *, docstrings: bool = True) -> bool:
    """Whether two versions of a file hold the same code (``docstrings=False``: once docstrings are
    removed): the same module-level statements and the same units, each with the same own code.
    Units whose text is unchanged are not compared further (most of them, in a commit)."""
    if _dump(before.tree, top=True, keep_doc=docstrings) != _dump(after.tree, top=True, keep_doc=docstrings):
        return False
    after_by_key = {(u.qualname, u.ordinal): (u, n) for u, n in after.units}
    if {(u.qualname, u.ordinal) for u, _ in before.units} != set(after_by_key):
        return False
    for unit, node in before.units:
        other, other_node = after_by_key[(unit.qualname, unit.ordinal)]
        if before.lines[unit.start - 1 : unit.end] == after.lines[other.start - 1 : other.end]:
            continue
        classy = isinstance(node, ast.ClassDef)
        if _dump(node, top=True, drop_defs=classy, keep_doc=docstrings) != _dump(
            other_node, top=True, drop_defs=classy, keep_doc=docstrings
        ):
            return False
    return True


@dataclass(frozen=True)
class CommitGold:
    """What ``commit_gold`` found: a removal reason or the gold units, and the units added."""

    reason: str | None
    units: tuple[GoldUnit, ...] = ()
    added: tuple[str, ...] = ()


def commit_gold(changes: list[FileChange]) -> CommitGold:
    """The gold of a commit from its changed source files (the module docstring states the rules).

    Reasons: ``unparsable`` (a file does not parse at the parent or at the commit),
    ``module-level``, ``added-only``, ``too-many-units`` (more than ``MAX_UNITS`` gold spans).
    ``RecursionError`` from a nesting too deep for the AST walk propagates.
    """
    found: list[GoldUnit] = []
    added: list[str] = []
    for change in changes:
        if change.before is None or change.after is None:
            return CommitGold("unparsable")
        before, after = change.before.units, change.after.units
        after_by_key = {(u.qualname, u.ordinal): (u, n) for u, n in after}
        before_keys = {(u.qualname, u.ordinal) for u, _ in before}
        lines, after_lines = change.before.lines, change.after.lines
        removed: list[Unit] = []
        for unit, node in before:
            if any(r.start <= unit.start and unit.end <= r.end for r in removed):
                continue  # a member of a removed class or function: the removed unit is the gold
            count = sum(u.qualname == unit.qualname for u, _ in before)
            other = after_by_key.get((unit.qualname, unit.ordinal))
            if other is None:
                removed.append(unit)
                found.append(GoldUnit(change.old, unit, count))
                continue
            new_unit, new_node = other
            if lines[unit.start - 1 : unit.end] == after_lines[new_unit.start - 1 : new_unit.end]:
                continue  # the same text: the same code (the cheap test first)
            if isinstance(node, ast.ClassDef) and isinstance(new_node, ast.ClassDef):
                for span in class_changes(node, new_node, unit, lines):
                    found.append(GoldUnit(change.old, unit, count, span, _anchor_at(lines, span[0])))
            elif own_code(node) != own_code(new_node):
                found.append(GoldUnit(change.old, unit, count))
        module = module_name(change.new)
        added += [f"{module}.{u.qualname}" if module else u.qualname
                  for u, _ in after if (u.qualname, u.ordinal) not in before_keys]  # fmt: skip
    if not found:
        return CommitGold("added-only" if added else "module-level", added=tuple(added))
    if len(found) > MAX_UNITS:
        return CommitGold("too-many-units", added=tuple(added))
    units = tuple(sorted(found, key=lambda g: (g.path, g.lines[0], -g.lines[1])))
    return CommitGold(None, units, tuple(sorted(set(added))))


def own_code(node: Node) -> str:
    """The unit's own code as text: its AST (no positions) without its docstring; nested defs of a
    function as their names only, of a class not at all."""
    return _dump(node, top=True, drop_defs=isinstance(node, ast.ClassDef))


def class_changes(
    old: ast.ClassDef, new: ast.ClassDef, unit: Unit, lines: list[str]
) -> list[tuple[int, int]]:
    """The parent lines of a class's own changed code: its header when its name, bases, keywords
    or decorators changed or a statement was inserted where the parent has none, and each changed
    or removed class-level statement; adjacent spans merged. [] when only members changed."""
    spans: list[tuple[int, int]] = []
    ends = [n.end_lineno or n.lineno for n in old.bases] + [k.end_lineno or k.lineno for k in old.keywords]
    header = (unit.start, max([old.lineno, *ends]))
    if _header(old) != _header(new):
        spans.append(header)
    before, after = _statements(old), _statements(new)
    matcher = SequenceMatcher(None, [_dump(s) for s in before], [_dump(s) for s in after], autojunk=False)
    for tag, i1, i2, _, _ in matcher.get_opcodes():
        if tag == "equal":
            continue
        if i1 == i2:
            spans.append(header)
        spans += [(s.lineno, s.end_lineno or s.lineno) for s in before[i1:i2]]
    merged: list[tuple[int, int]] = []
    for start, end in sorted(set(spans)):
        gap = lines[merged[-1][1] : start - 1] if merged else None
        if merged and gap is not None and all(not g.strip() or g.strip().startswith("#") for g in gap):
            merged[-1] = (merged[-1][0], max(end, merged[-1][1]))
        else:
            merged.append((start, end))
    return merged


def _header(node: ast.ClassDef) -> str:
    return "|".join(_dump(getattr(node, name, None)) for name in _HEADER_FIELDS)


def _statements(node: ast.ClassDef) -> list[ast.stmt]:
    return [s for s in _without_docstring(node.body) if not isinstance(s, _DEFS)]


def _without_docstring(body: list[ast.stmt]) -> list[ast.stmt]:
    first = body[0].value if body and isinstance(body[0], ast.Expr) else None
    return body[1:] if isinstance(first, ast.Constant) and isinstance(first.value, str) else body


def _dump(value: object, *, top: bool = False, drop_defs: bool = True, keep_doc: bool = False) -> str:
    """``ast.dump`` without positions, of the node's own code: nested defs dropped (``drop_defs``)
    or as their names; its docstring dropped unless ``keep_doc``."""
    if isinstance(value, ast.AST):
        if not top and isinstance(value, _DEFS):
            return f"<{type(value).__name__} {value.name}>"
        fields = []
        for name, field in ast.iter_fields(value):
            if top and name == "body" and isinstance(field, list) and not keep_doc:
                field = _without_docstring(field)
            fields.append(f"{name}={_dump(field, drop_defs=drop_defs)}")
        return f"{type(value).__name__}({', '.join(fields)})"
    if isinstance(value, list):
        kept = [v for v in value if not (drop_defs and isinstance(v, _DEFS))]
        return "[" + ", ".join(_dump(v, drop_defs=drop_defs) for v in kept) + "]"
    return repr(value)


def _anchor_at(lines: list[str], line: int) -> str:
    text = lines[line - 1].strip() if 0 < line <= len(lines) else ""
    return text[:80] or "class"
