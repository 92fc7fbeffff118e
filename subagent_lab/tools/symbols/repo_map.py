"""A map of a workspace for a model's first context: its files with their most-referenced
definitions, ranked by PageRank over the reference graph (as Aider's repo map), fit to a budget.

The graph has one node per code file and an edge from a file that references a name to each
file that defines it. Its weight is the square root of the plain-name references (an import
resolves them) plus 0.3 times that of the ``x.name`` ones (``x`` is not resolved; a tenth of
that again for a name Python's builtins or everyday standard-library objects also define, such
as ``items`` or ``read``), divided among the files that define the name, and a tenth for a
private ``_name``. Dunder names make no edge; nor does a name the file defines at its top level
(its own wins), nor one bound to another package (``from typing import Tuple``, ``t.Tuple``); an
import of a name points only at the file it comes from. PageRank ranks the files; a
definition's rank is the rank of the files referencing its name times their edges' weight. The
map lists library files before tests, docs and examples, each group by rank, and within a file
the chosen definitions in line order, each as ``start-end signature``.

Tokens are estimated as ``core.context.estimate_text`` does (UTF-8 bytes / 3, an overestimate for
code), so a map within its budget by that estimate is within it for the model too.
"""

from __future__ import annotations

import math
from collections import defaultdict
from functools import lru_cache

from subagent_lab.core.context import estimate_text
from subagent_lab.core.tool import Observation, ObservationBuilder, Span
from subagent_lab.tools.symbols.index import SymbolIndex, index_for, module_name, own_counts
from subagent_lab.workspace.sandbox import Workspace

SIGNATURE_CHARS = 100
"""Characters of a signature the map shows."""
MEMBER_WEIGHT = 0.3
"""Weight of a member reference against a plain-name one (an import resolves the latter)."""
AMBIGUOUS_WEIGHT = 0.1
"""Weight of an edge made by a private name (``_helper``, used inside its module, rarely an entry
point) or by a name Python's builtins or everyday standard-library objects also define
(``items``, ``read``, ``start``)."""

Ranks = tuple[dict[str, float], dict[tuple[str, str], float]]
"""(PageRank of each file, rank of each (file, defined name))."""


@lru_cache(maxsize=1)
def _builtin_attributes() -> frozenset[str]:
    """Names Python's builtins and the standard library's everyday objects define (``items``,
    ``get``, ``read``, ``start``): ``x.read()`` names the workspace's ``read`` only by chance."""
    import builtins
    import collections
    import io
    import logging
    import pathlib
    import re
    import socket
    import subprocess
    import threading

    kinds: tuple[object, ...] = (
        builtins, dict, list, set, frozenset, tuple, str, bytes, int, float, object, type,
        io.TextIOWrapper, io.BufferedReader, io.BytesIO, io.StringIO, threading.Thread,
        threading.Event, subprocess.Popen, pathlib.Path, socket.socket, logging.Logger,
        collections.deque, collections.OrderedDict, re.Pattern, re.Match,
    )  # fmt: skip
    return frozenset(name for space in kinds for name in dir(space))


def _edge_weight(name: str, named: int, members: int, definers: int) -> float:
    """How strongly ``named`` plain-name references and ``members`` ``x.name`` references tie a
    file to each of the ``definers`` files that define ``name``."""
    member = math.sqrt(members) * MEMBER_WEIGHT
    if name in _builtin_attributes():
        member *= AMBIGUOUS_WEIGHT
    weight = (math.sqrt(named) + member) / definers
    return weight * AMBIGUOUS_WEIGHT if name.startswith("_") else weight


def _import_target(rel: str, dotted: str, modules: dict[str, str], root_name: str) -> str | None:
    """The workspace file an import of ``dotted`` (``.utils.F``, ``pkg.utils.F``) takes it from."""
    level = len(dotted) - len(dotted.lstrip("."))
    parts = dotted.lstrip(".").split(".")
    if level:
        package = (
            module_name(rel).split(".") if rel.endswith("__init__.py") else module_name(rel).split(".")[:-1]
        )
        package = package[: len(package) - (level - 1)] if level > 1 else package
        parts = [p for p in package if p] + parts
    module = ".".join(parts[:-1])
    for candidate in (module, module.removeprefix(root_name + ".") if root_name else module):
        if candidate in modules:
            return modules[candidate]
    return None


def _targets(
    index: SymbolIndex, rel: str, name: str, definers: set[str], modules: dict[str, str]
) -> set[str]:
    """The files a reference to ``name`` in ``rel`` can mean: none when ``rel`` defines it at
    its top level (its own wins), the one it is imported from when that one defines it, else all."""
    entry = index.files[rel]
    if rel in definers and any(d.name == name and d.qualname == name for d in entry.parse.definitions):
        return set()
    imported = entry.parse.imports.get(name)
    if imported is not None:
        source = _import_target(rel, imported, modules, index.root_name)
        if source in definers:
            return {source}
    return definers - {rel}


def rank_definitions(index: SymbolIndex) -> Ranks:
    """PageRank of the files over the reference graph, and each (file, name)'s share of it."""
    import networkx as nx

    definers: dict[str, set[str]] = defaultdict(set)
    for name, hits in index.by_name.items():
        if not (name.startswith("__") and name.endswith("__")):
            definers[name] = {rel for rel, _ in hits}
    graph = nx.DiGraph()
    graph.add_nodes_from(index.files)
    own = index.own_modules()
    modules = {module_name(rel): rel for rel in index.files}
    edges: dict[tuple[str, str], dict[str, float]] = defaultdict(dict)
    for rel, entry in index.files.items():
        for name, codes in entry.parse.refs.items():
            targets = definers.get(name)
            named, members = own_counts(entry, name, codes, own) if targets else (0, 0)
            if not targets or not (named or members):
                continue
            for target in _targets(index, rel, name, targets, modules):
                edges[(rel, target)][name] = _edge_weight(name, named, members, len(targets))
    for (source, target), names in edges.items():
        graph.add_edge(source, target, weight=sum(names.values()))
    if graph.number_of_nodes() == 0:
        return {}, {}
    file_rank: dict[str, float] = (
        nx.pagerank(graph, weight="weight") if edges else {rel: 1 / graph.number_of_nodes() for rel in graph}
    )
    # Not divided by the source's out-weight (as PageRank's own flow is): that would give an
    # ambiguous name the whole rank of a file that references nothing better.
    name_rank: dict[tuple[str, str], float] = defaultdict(float)
    for (source, target), names in edges.items():
        for name, weight in names.items():
            name_rank[(target, name)] += file_rank[source] * weight
    return file_rank, dict(name_rank)


def _cut(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= SIGNATURE_CHARS else text[: SIGNATURE_CHARS - 1] + "…"


def _label(index: SymbolIndex, rel: str) -> str:
    role = index.role(rel)
    return rel if role == "library" else f"[{role}] {rel}"


def _render(
    index: SymbolIndex, order: list[str], chosen: dict[str, list[int]], bare: list[str]
) -> Observation:
    """The map: each chosen file and its chosen definitions (each a span), then the ``bare`` names."""
    out = ObservationBuilder()
    for rel in order:
        picked = chosen.get(rel)
        if picked is None:
            continue
        out.line(f"{_label(index, rel)}:", Span(rel))
        defs = index.files[rel].parse.definitions
        for position in sorted(picked):
            unit = defs[position]
            indent = "  " * (1 + min(unit.qualname.count("."), 2))
            # Seen: the signature's line printed, not the body its range only names (issue 36).
            out.line(
                f"{indent}{unit.start}-{unit.end} {_cut(unit.signature)}", Span(rel, unit.start, unit.start)
            )
    for rel in bare:
        out.line(_label(index, rel), Span(rel))
    return out.build()


def repo_map_observation(workspace: Workspace, token_budget: int) -> Observation:
    """``repo_map``'s text with the spans it shows (each definition's first line, the one it
    prints, and each file by name), so a map given as first context counts as seen what it printed."""
    index = index_for(workspace)
    file_rank, name_rank = index.derive("repo_map_ranks", rank_definitions)
    order = sorted(index.files, key=lambda rel: (index.role(rel) != "library", -file_rank.get(rel, 0.0), rel))
    # Every definition, best first: library code first, then rank through its name, top-level
    # before nested, then the file's own rank (an unreferenced definition of a central file first).
    candidates: list[tuple[bool, float, int, float, str, int]] = []
    for rel in order:
        test_or_doc = index.role(rel) != "library"
        defs = index.files[rel].parse.definitions
        last = {unit.qualname: position for position, unit in enumerate(defs)}
        for position, unit in enumerate(defs):
            if last[unit.qualname] != position:
                continue  # an @overload stub: the map shows the implementation, defined last
            if unit.kind == "function" and "." in unit.qualname:
                continue  # a function inside a function: not reachable from outside it
            rank = name_rank.get((rel, unit.name), 0.0)
            nested = unit.qualname.count(".")
            candidates.append((test_or_doc, -rank, nested, -file_rank.get(rel, 0.0), rel, position))
    candidates.sort()

    def chosen(count: int) -> dict[str, list[int]]:
        picked: dict[str, list[int]] = defaultdict(list)
        for *_, rel, position in candidates[:count]:
            picked[rel].append(position)
        return dict(picked)

    def fits(text: str) -> bool:
        return estimate_text(text) <= token_budget

    low, high, best = 1, len(candidates), 0
    while low <= high:  # the most definitions whose map fits
        middle = (low + high) // 2
        if fits(_render(index, order, chosen(middle), []).text):
            best, low = middle, middle + 1
        else:
            high = middle - 1
    picked = chosen(best)
    size = len(_render(index, order, picked, []).text.encode("utf-8"))
    bare: list[str] = []
    for rel in order:  # then the names of the files with no definition shown, while they fit
        if rel in picked:
            continue
        grown = size + len(_label(index, rel).encode("utf-8")) + (1 if size or bare else 0)
        if math.ceil(grown / 3) > token_budget:  # estimate_text's bytes / 3
            break
        bare.append(rel)
        size = grown
    return _render(index, order, picked, bare)


def repo_map(workspace: Workspace, token_budget: int) -> str:
    """The workspace's files and their most-referenced definitions, at most ``token_budget``
    tokens (estimated); '' when not even one file's name fits."""
    return repo_map_observation(workspace, token_budget).text
