"""Localization at the field's grains: evidence merged into items, the code's functions, and
file / function Acc@k, hit@k, unit recall@4 and unit precision (LocAgent, Agentless, Loc-Bench).

An answer's evidence is first reduced to *items*: distinct ``path:start-end`` ranges, overlapping or
adjacent ranges of one file merged into their union (three citations around one line are one
claim), each ranked by its first citation (evidence order is rank). The functions come from the
code's structure: each workspace file is parsed once with ``ast`` (cached) for the spans of its
``def``s and ``class``es. Pure: no model, no index, no trace.
"""

from __future__ import annotations

import ast
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

ACC_KS: tuple[int, ...] = (1, 3, 5)
"""The k of Acc@k and hit@k (LocAgent reports 1, 3, 5 for files; 5 and 10 for functions)."""
UNIT_ITEMS = 4
"""Unit recall looks at the first this many items (the models' ``max_evidence``)."""
UNIT_MAX_LINES = 60
"""An item inside the gold span's innermost enclosing function earns unit credit only when that
function is at most this many lines long (else inside the span itself, when the span is): a line
of a 300-line function says little about where in it the change belongs."""
UNIT_SHARE = 0.5
"""An item not inside that region earns unit credit only when it holds at least this share of the
gold span's lines: a window that merely touches the span, however wide, earns nothing."""
UNIT_WIDTH_FACTOR = 2
"""... and is at most this many times as wide as the span (or ``strict_max_lines``): the whole
file holds every span, and earns none."""


@dataclass(frozen=True)
class Item:
    """One merged evidence item: lines ``start..end`` of the resolved ``path``."""

    path: Path
    start: int
    end: int
    rank: int
    """Position of the first citation it merges (0 = cited first)."""
    credited: bool
    """Every citation it merges was creditable (seen where seen evidence is required)."""
    label: str
    """The item written as evidence (``path:start-end`` with the path as first cited)."""


@dataclass(frozen=True)
class Cited:
    """One distinct citation before merging: its resolved range (``path`` None: unparseable)."""

    text: str
    path: Path | None
    start: int
    end: int
    credited: bool


def merge_items(cited: Sequence[Cited]) -> list[Item]:
    """The distinct citations as items, in rank order: per file, the credited citations whose
    ranges overlap or touch are merged into their union, as are the uncredited ones (a citation
    no tool showed cannot widen, or be laundered by, one it did); an unparseable citation stays
    an uncredited item of its own."""
    groups: dict[tuple[Path, bool], list[tuple[int, int, int, str]]] = {}
    loose: list[Item] = []
    for rank, c in enumerate(cited):
        if c.path is None:
            loose.append(Item(Path(c.text), 0, 0, rank, False, c.text))
            continue
        groups.setdefault((c.path, c.credited), []).append((c.start, c.end, rank, c.text))
    items = loose
    for (path, credited), ranges in groups.items():
        ranges.sort()
        start, end, rank, text = ranges[0]
        parts = [text]
        for s, e, r, t in ranges[1:]:
            if s <= end + 1:  # overlapping or adjacent: one claim
                end, rank = max(end, e), min(rank, r)
                parts.append(t)
                continue
            items.append(_item(path, start, end, rank, credited, parts))
            start, end, rank, parts = s, e, r, [t]
        items.append(_item(path, start, end, rank, credited, parts))
    return sorted(items, key=lambda i: i.rank)


def _item(path: Path, start: int, end: int, rank: int, credited: bool, parts: list[str]) -> Item:
    if len(parts) == 1:
        return Item(path, start, end, rank, credited, parts[0])
    head = parts[0].rsplit(":", 1)[0]
    return Item(path, start, end, rank, credited, f"{head}:{start}-{end}")


@dataclass(frozen=True)
class Unit:
    """A ``def`` or ``class`` of a file: lines ``start..end``, decorators included."""

    start: int
    end: int
    is_function: bool


def file_units(path: Path) -> tuple[Unit, ...]:
    """The functions, methods and classes of a Python file, outermost first; () for a file that is
    not Python or does not parse (its items and gold then have no enclosing function)."""
    if path.suffix not in (".py", ".pyi"):
        return ()
    try:
        stat = path.stat()
    except OSError:
        return ()
    return _units(str(path), stat.st_mtime_ns, stat.st_size)


@lru_cache(maxsize=1024)
def _units(path: str, mtime_ns: int, size: int) -> tuple[Unit, ...]:
    """``file_units`` of one version of a file (the key's mtime and size change with its text)."""
    try:
        tree = ast.parse(Path(path).read_bytes())
    except (OSError, SyntaxError, ValueError):
        return ()
    units: list[Unit] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            start = min([node.lineno, *(d.lineno for d in node.decorator_list)])
            end = node.end_lineno or node.lineno
            units.append(Unit(start, end, not isinstance(node, ast.ClassDef)))
    return tuple(sorted(units, key=lambda u: (u.start, -u.end)))


def _innermost(units: Sequence[Unit], start: int, end: int, functions_only: bool) -> Unit | None:
    inside = [u for u in units if u.start <= start and end <= u.end and (u.is_function or not functions_only)]
    return min(inside, key=lambda u: u.end - u.start) if inside else None


def enclosing_unit(path: Path, start: int, end: int) -> tuple[int, int] | None:
    """The function of lines ``start..end``: the innermost function or method containing them,
    else the innermost class, else None (module level)."""
    units = file_units(path)
    unit = _innermost(units, start, end, True) or _innermost(units, start, end, False)
    return (unit.start, unit.end) if unit else None


@dataclass(frozen=True)
class Gold:
    """A gold span with its function (``enclosing_unit``, or the span itself at module level) and
    its unit-recall region (the innermost enclosing function or method of at most
    ``UNIT_MAX_LINES`` lines, else the span itself when it is that short, else None: no region,
    only a window holding most of the span finds it)."""

    path: Path
    start: int
    end: int
    unit: tuple[int, int]
    module_level: bool
    region: tuple[int, int] | None


def gold_of(path: Path, start: int, end: int) -> Gold:
    """``Gold`` for lines ``start..end`` of ``path`` (resolved)."""
    unit = enclosing_unit(path, start, end)
    function = _innermost(file_units(path), start, end, True)
    region: tuple[int, int] | None = None
    if function is not None and function.end - function.start + 1 <= UNIT_MAX_LINES:
        region = (function.start, function.end)
    elif end - start + 1 <= UNIT_MAX_LINES:
        region = (start, end)
    return Gold(path, start, end, unit or (start, end), unit is None, region)


def strict_hit(start: int, end: int, gold_start: int, gold_end: int, max_lines: int) -> bool:
    """Overlap at tolerance 0 by a range no wider than ``max(max_lines, gold length)``."""
    if end - start + 1 > max(max_lines, gold_end - gold_start + 1):
        return False
    return start <= gold_end and end >= gold_start


def same_function(item: Item, gold: Gold) -> bool:
    """Whether the item's function (that of its first line) is the gold span's function; at module
    level, whether its first line lies in the span and outside every function and class."""
    if item.path != gold.path:
        return False
    mine = enclosing_unit(item.path, item.start, item.start)
    if gold.module_level:
        return mine is None and gold.start <= item.start <= gold.end
    return mine == gold.unit


def holds_most(start: int, end: int, gold_start: int, gold_end: int, max_lines: int) -> bool:
    """Whether lines ``start..end`` hold at least ``UNIT_SHARE`` of the gold span's lines while
    being at most ``max(max_lines, UNIT_WIDTH_FACTOR x span length)`` lines wide."""
    length = gold_end - gold_start + 1
    held = min(end, gold_end) - max(start, gold_start) + 1
    return held >= UNIT_SHARE * length and end - start + 1 <= max(max_lines, UNIT_WIDTH_FACTOR * length)


def unit_found(item: Item, gold: Gold, strict_max_lines: int) -> bool:
    """Unit credit: an item lying inside the span's ``region`` (a pointer into a short function),
    an item of at most ``strict_max_lines`` lines starting on the span's first line (its header:
    the unit named, as function Acc@k reads an item), or one holding most of the span
    (``holds_most``). Touching the span is not enough."""
    if item.path != gold.path:
        return False
    if gold.region is not None and gold.region[0] <= item.start and item.end <= gold.region[1]:
        return True
    if item.start == gold.start and item.end - item.start + 1 <= strict_max_lines:
        return True
    return holds_most(item.start, item.end, gold.start, gold.end, strict_max_lines)


@dataclass(frozen=True)
class LocMetrics:
    """The field's localization metrics of one answer (each in [0, 1])."""

    file_acc: dict[int, float]
    func_acc: dict[int, float]
    file_hit: dict[int, float]
    func_hit: dict[int, float]
    unit_recall: float
    unit_precision: float


def loc_metrics(
    items: Sequence[Item], gold: Sequence[Gold], strict_max_lines: int, counted: int = UNIT_ITEMS
) -> LocMetrics:
    """Acc@k / hit@k over the first k items (uncredited ones take their slot and earn nothing; pass
    at least ``max(ACC_KS)`` items where the answer has them, so that Acc@5 sees five), unit recall
    over the first ``min(UNIT_ITEMS, counted)``, unit precision over the first ``counted``.

    An item is *useful* to precision when it finds a gold span no earlier item found: the right
    function cited as four separate lines is one useful item and three redundant ones."""
    credited = [(i, item) for i, item in enumerate(items) if item.credited]
    gold_files = {g.path for g in gold}
    file_acc, func_acc, file_hit, func_hit = {}, {}, {}, {}
    for k in ACC_KS:
        first = [item for i, item in credited if i < k]
        files = {item.path for item in first} & gold_files
        funcs = [any(same_function(item, g) for item in first) for g in gold]
        file_acc[k] = float(bool(gold) and files == gold_files)
        file_hit[k] = float(bool(files))
        func_acc[k] = float(bool(funcs) and all(funcs))
        func_hit[k] = float(any(funcs))
    first = [item for i, item in credited if i < min(UNIT_ITEMS, counted)]
    found = [any(unit_found(item, g, strict_max_lines) for item in first) for g in gold]
    claimed: set[int] = set()
    useful = 0
    for _, item in (pair for pair in credited if pair[0] < counted):
        fresh = [j for j, g in enumerate(gold) if j not in claimed and unit_found(item, g, strict_max_lines)]
        if fresh:
            claimed.add(fresh[0])
            useful += 1
    n_counted = min(len(items), counted)
    return LocMetrics(
        file_acc=file_acc,
        func_acc=func_acc,
        file_hit=file_hit,
        func_hit=func_hit,
        unit_recall=sum(found) / len(found) if found else 0.0,
        unit_precision=useful / n_counted if n_counted else 0.0,
    )
