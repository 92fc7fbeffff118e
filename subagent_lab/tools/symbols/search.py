"""Code units ranked for a natural-language query, and the retrieval-only answer built on them.

Each function, method and class of the index is one document: its name (weighted), enclosing
scopes, module path and body, as terms (``terms.py``); ``bm25s`` ranks them (BM25, Lucene
variant, k1 = 1.5, b = 0.75, its defaults). Two fields of their own are ranked beside that body
(issue 49): the unit's *name* (its parts and, for a compound name, the whole name) and its file's
*path* (the module path's words), each by a BM25 of its own; a unit's score is
``body + NAME_FIELD_WEIGHT * name + PATH_FIELD_WEIGHT * path``, so a request that says a defined
name lifts that unit over ones that only say its words in their bodies (the weights were chosen on
mined dev, ``benchmarks/bench_pool.py``: the name field kept, the path field off). The search index
is built once per ``SymbolIndex`` and kept with it. Library code is listed before tests, docs and
examples.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from subagent_lab.tools.symbols.index import Role, SymbolIndex, index_for, module_name
from subagent_lab.tools.symbols.parse import Definition
from subagent_lab.tools.symbols.query import request_of
from subagent_lab.tools.symbols.terms import identifiers, name_terms, query_terms, words
from subagent_lab.workspace.sandbox import Workspace

SEARCHED_KINDS = frozenset({"class", "function", "method"})
"""Units a search returns: code with a body (a constant is one line, which Grep finds)."""
NAME_FIELD_WEIGHT = 1.0
"""Weight of the name field's BM25 score beside the body's (0: the body alone, as before issue 49).
On mined dev: recall@10 +0.031 [−0.016, +0.078], function Acc@5 +0.005 [−0.026, +0.036], file
Acc@5 0.803 -> 0.845 over the request alone (``benchmarks/bench_pool.py``)."""
PATH_FIELD_WEIGHT = 0.0
"""Weight of the path field's BM25 score beside the body's (0: off). Off: on mined dev a weight of
0.5 moved function Acc@5 by −0.005 [−0.026, +0.010] and recall@10 by −0.005 over the name field
alone (``benchmarks/bench_pool.py``, docs/benchmarks.md "The candidate pool"), so by the rule of
docs/evaluation.md §7 it is not kept."""


def _field_index(corpus: list[list[str]]) -> Any:
    """A BM25 over one field's terms (None when no document has any)."""
    import bm25s

    if not any(corpus):
        return None
    field = bm25s.BM25()
    # bm25s wants every document non-empty: an empty field gets a term no query has.
    field.index([doc or ["\x00"] for doc in corpus], show_progress=False)
    return field


def _scores(field: Any, terms: list[str], size: int) -> Any:
    """``field``'s BM25 scores for the query ``terms`` it knows (zeros when none)."""
    import numpy as np

    known = [t for t in terms if field is not None and t in field.vocab_dict]
    if not known:
        return np.zeros(size)
    return np.asarray(field.get_scores(known), dtype=float)


@dataclass(frozen=True)
class UnitHit:
    """One ranked unit: lines ``unit.start``-``unit.end`` of ``rel``."""

    rel: str
    unit: Definition
    score: float
    role: Role

    @property
    def label(self) -> str:
        """``path:start-end``, the unit as evidence."""
        return f"{self.rel}:{self.unit.start}-{self.unit.end}"


class UnitSearch:
    """A BM25 index over the units of one ``SymbolIndex``."""

    def __init__(self, index: SymbolIndex) -> None:
        import bm25s

        self.index = index
        self.units = [(rel, d) for rel, d in index.units() if d.kind in SEARCHED_KINDS]
        path_terms = {rel: words(module_name(rel).replace(".", " ")) for rel in index.files}
        corpus = [list(unit.terms) + path_terms[rel] for rel, unit in self.units]
        self.bm25: Any = None
        self.vocab: dict[str, int] = {}
        if corpus:
            self.bm25 = bm25s.BM25()
            self.bm25.index(corpus, show_progress=False)
            self.vocab = self.bm25.vocab_dict
        self.names: Any = _field_index([name_terms(unit.name) for _, unit in self.units])
        self.paths: Any = _field_index([path_terms[rel] for rel, _ in self.units])

    def search(self, query: str, limit: int) -> list[UnitHit]:
        """Up to ``limit`` units with a positive score, best first (ties: path, then line)."""
        import numpy as np

        terms = [t for t in query_terms(query) if t in self.vocab]
        if not terms or self.bm25 is None or limit < 1:
            return []
        scores = np.asarray(self.bm25.get_scores(terms), dtype=float)
        every = query_terms(query)
        if NAME_FIELD_WEIGHT:
            scores = scores + NAME_FIELD_WEIGHT * _scores(self.names, every, len(scores))
        if PATH_FIELD_WEIGHT:
            scores = scores + PATH_FIELD_WEIGHT * _scores(self.paths, every, len(scores))
        order = np.argsort(-scores, kind="stable")[:limit]
        hits: list[UnitHit] = []
        for position in order:
            score = float(scores[position])
            if score <= 0:
                break
            rel, unit = self.units[int(position)]
            hits.append(UnitHit(rel, unit, score, self.index.role(rel)))
        return hits


def unit_search(index: SymbolIndex) -> UnitSearch:
    """The search index of ``index`` (built on first use, then kept with it)."""
    built: UnitSearch = index.derive("unit_search", UnitSearch)
    return built


def unmatched_words(index: SymbolIndex, query: str) -> list[str]:
    """The query's words (as written, first occurrence, stop words aside) no unit's terms hold:
    a fact of the index, which a ranking alone hides (it always ranks something)."""
    vocab = unit_search(index).vocab
    out: dict[str, None] = {}
    for word in identifiers(query):
        terms = words(word)
        if terms and not any(t in vocab for t in terms):
            out.setdefault(word, None)
    return list(out)


def ranked_units(index: SymbolIndex, query: str, k: int, *, pool: int = 200) -> list[UnitHit]:
    """The best ``k`` units for ``query``: library code first, then tests, docs and examples,
    each group best first (from the ``pool`` best units overall)."""
    hits = unit_search(index).search(query, max(pool, k))
    library = [h for h in hits if h.role == "library"]
    others = [h for h in hits if h.role != "library"]
    return (library + others)[:k]


def retrieval_answer(workspace: Workspace, task_text: str, k: int) -> list[str]:
    """The no-model floor: the ``path:start-end`` labels of the top ``k`` units ``Search`` ranks
    for the task's request (``query.request_of``), library code first."""
    return [hit.label for hit in ranked_units(index_for(workspace), request_of(task_text), k)]
