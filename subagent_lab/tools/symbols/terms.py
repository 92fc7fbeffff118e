"""The words a code unit is searched by: identifiers split at ``snake_case`` and ``camelCase``
boundaries, lower-cased, stemmed (Snowball English, PyStemmer), English stop words dropped (the
list ``bm25s`` ships, nothing added). A query goes through the same function, so "loads templates"
meets ``load_template`` and ``TemplateLoader``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from functools import lru_cache
from typing import Any, Protocol

_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_PART = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|[0-9]+")
NAME_WEIGHT = 3
"""Times a unit's own name parts count among its terms (its name says most about what it is)."""
BODY_CHARS = 6000
"""Characters of a unit's body that feed its terms (its head: the signature, docstring and first
statements say what it does; a long tail only dilutes them)."""


class Unit(Protocol):
    """What ``unit_terms`` reads of a definition (``parse.Definition`` is one; parse imports this
    module, so naming it here would close an import circle)."""

    @property
    def name(self) -> str: ...
    @property
    def qualname(self) -> str: ...
    @property
    def kind(self) -> str: ...
    @property
    def start(self) -> int: ...
    @property
    def end(self) -> int: ...


@lru_cache(maxsize=1)
def _stopwords() -> frozenset[str]:
    from bm25s.stopwords import STOPWORDS_EN

    return frozenset(STOPWORDS_EN)


@lru_cache(maxsize=1)
def _stemmer() -> Any:
    import Stemmer

    return Stemmer.Stemmer("english")


@lru_cache(maxsize=200_000)
def _split(identifier: str) -> tuple[str, ...]:
    """The stemmed, lower-cased parts of one identifier (``getTemplate_name`` -> get, templat, name)."""
    stop = _stopwords()
    parts = [p.lower() for p in _PART.findall(identifier)]
    kept = [p for p in parts if len(p) > 1 and p not in stop]
    return tuple(_stemmer().stemWords(kept)) if kept else ()


def identifiers(text: str) -> list[str]:
    """The identifiers (words, names) of ``text``, in order."""
    return _IDENT.findall(text)


def words(text: str) -> list[str]:
    """The search terms of free text or code."""
    out: list[str] = []
    for identifier in _IDENT.findall(text):
        out.extend(_split(identifier))
    return out


def name_terms(name: str) -> list[str]:
    """The terms of a name: its parts, and the whole name when it has several (``get_template``)."""
    parts = list(_split(name))
    whole = name.lower().strip("_")
    return [*parts, whole] if len(parts) > 1 and whole not in parts else parts


def query_terms(query: str) -> list[str]:
    """The terms of a query: its words, plus each compound name it spells (``get_template``)."""
    out = words(query)
    for identifier in _IDENT.findall(query):
        if len(_split(identifier)) > 1:
            out.append(identifier.lower().strip("_"))
    return out


def unit_terms(unit: Unit, lines: Sequence[str], siblings: Iterable[Unit]) -> tuple[str, ...]:
    """The terms of one definition: its name (weighted), its enclosing scopes, and its body.

    A class's body leaves out the bodies of the definitions nested in it (their first lines stay),
    so a class is found by what it says itself, and each method by its own body.
    """
    terms = name_terms(unit.name) * NAME_WEIGHT
    for scope in unit.qualname.split(".")[:-1]:
        terms.extend(_split(scope))
    skip: set[int] = set()
    if unit.kind == "class":
        for other in siblings:
            if unit.start <= other.start and other.end <= unit.end and other is not unit:
                skip.update(range(other.start + 1, other.end + 1))
    used = 0
    for number in range(unit.start, min(unit.end, len(lines)) + 1):
        if number in skip:
            continue
        line = lines[number - 1]
        used += len(line)
        if used > BODY_CHARS:
            break
        terms.extend(words(line))
    return tuple(terms)
