"""Code units of a Python file: its functions and classes, with qualified names and line spans.

The miner names what a commit changed by the definitions whose own code changed (``bench.gold``),
and finds the same definition again, by qualified name, in another tree (a release's sdist).
"""

from __future__ import annotations

import ast
import re
import warnings
from dataclasses import dataclass
from pathlib import PurePosixPath

_DEFS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


@dataclass(frozen=True)
class Unit:
    """One ``def`` or ``class`` of a file: 1-based inclusive lines, decorators included."""

    qualname: str
    """Dotted from the module: ``Outer.method``; a function inside a function is ``outer.inner``."""
    ordinal: int
    """0 for the first definition with this qualname in the file, 1 for the next (overloads,
    property setters, definitions under if/else)."""
    start: int
    end: int
    keyword: str
    """``def``, ``async def`` or ``class``."""

    @property
    def name(self) -> str:
        """The unqualified name."""
        return self.qualname.rsplit(".", 1)[-1]

    @property
    def anchor(self) -> str:
        """Text that occurs in the unit's lines: ``def name(`` or ``class name``."""
        return f"class {self.name}" if self.keyword == "class" else f"{self.keyword} {self.name}("

    def contains(self, line: int) -> bool:
        """Whether ``line`` lies within the unit."""
        return self.start <= line <= self.end


def parse_tree(source: str) -> ast.Module | None:
    """``source``'s AST; None when it does not parse. A nesting too deep for the parser raises
    ``RecursionError`` or ``MemoryError``, which the caller counts (``mine``: ``too-deep``)."""
    try:
        with warnings.catch_warnings():  # old code's invalid escapes are not ours to report
            warnings.simplefilter("ignore")
            return ast.parse(source)
    except (SyntaxError, ValueError):
        return None


def unit_nodes(tree: ast.Module) -> list[tuple[Unit, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef]]:
    """Every def and class of ``tree`` in file order, each with its node."""
    found: list[tuple[str, int, int, str, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef]] = []

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, _DEFS):
                qualname = f"{prefix}{child.name}"
                start = min([child.lineno, *(d.lineno for d in child.decorator_list)])
                keyword = {ast.ClassDef: "class", ast.AsyncFunctionDef: "async def"}.get(type(child), "def")
                found.append((qualname, start, child.end_lineno or child.lineno, keyword, child))
                visit(child, qualname + ".")
            else:
                visit(child, prefix)

    visit(tree, "")
    seen: dict[str, int] = {}
    units: list[tuple[Unit, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef]] = []
    for qualname, start, end, keyword, node in sorted(found, key=lambda f: (f[1], -f[2])):
        units.append((Unit(qualname, seen.get(qualname, 0), start, end, keyword), node))
        seen[qualname] = seen.get(qualname, 0) + 1
    return units


def parse_units(source: str) -> list[Unit] | None:
    """Every def and class of ``source`` in file order; None when it does not parse (or nests too
    deep for the parser)."""
    try:
        tree = parse_tree(source)
        return None if tree is None else [unit for unit, _ in unit_nodes(tree)]
    except (RecursionError, MemoryError):
        return None


def find_unit(units: list[Unit], qualname: str, ordinal: int, count: int) -> Unit | None:
    """The unit named ``qualname`` in another version of a file, or None.

    ``count`` is how many units carried that name where ``ordinal`` was taken; a name defined a
    different number of times here is ambiguous and not matched.
    """
    same = [u for u in units if u.qualname == qualname]
    if len(same) != count or ordinal >= len(same):
        return None
    return same[ordinal]


def module_name(path: str) -> str:
    """The dotted module of a source path: ``src/humanize/time.py`` -> ``humanize.time``."""
    parts = list(PurePosixPath(path).with_suffix("").parts)
    if parts and parts[0] in ("src", "lib", "python"):
        parts = parts[1:]
    if parts and parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def names_symbol(text: str, names: list[str]) -> bool:
    """Whether ``text`` names any of ``names`` as a whole word (``foo`` or ``foo()``), case-sensitive."""
    return any(re.search(rf"(?<!\w){re.escape(n)}(?!\w)", text) for n in names if n)
