"""The ``no-narrowing-word`` rule (issue 48): a mined request is kept only when some token of it
narrows the search in the code's own terms.

A request such as "Correct spelling error" or "Improve optimizations further" names nothing the
code base calls anything: no answer can be found from its text, only guessed. The rule is
structural (no list of "vague" words): a token narrows when it is

1. **code-shaped**: an identifier ``commit_text.code_names`` reads (in backticks, ``name()``,
   snake_case), a CamelCase word (a lower-case letter followed by a capital, ``HTTPError``,
   ``getValue``), a dotted name (``os.path``, ``tz.gettz``) or a file name or path (``parser.py``,
   ``src/x``); or
2. **a word of the tree's names**: a word of the request (not its first word, which the
   ``not-a-request`` filter makes a verb; not an English function word, ``FUNCTION_WORDS``; three
   letters or more) that is a defined name exactly (``Version``), or is, or whose stem begins, a
   PART of the definition line of few definitions: parts are those of the name of a ``def`` or
   ``class`` of the tree's source files and of the names on its line (parameters, bases), split
   at ``_`` and at case changes, and of each source module's name; "few" is at most
   ``max(MIN_LIMIT, RATIO × definitions)``. A word most of the code is named with (``error`` in a
   package of error classes) narrows nothing.

Stems: a plural or verb ending (``-ies``, ``-es``, ``-s``, ``-ing``, ``-ed``, ``-d``) is cut from
both sides, and a word of four letters or more also matches a part that starts with it
(``format`` matches ``formatter``).
"""

from __future__ import annotations

import re
import subprocess
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

from subagent_lab.bench.commit_text import code_names
from subagent_lab.core.types import ConfigError

RATIO = 0.1
"""A part carried by more than this share of the definitions narrows nothing."""
MIN_LIMIT = 3
"""…unless it names at most this many (a small tree: every word there is specific)."""
FUNCTION_WORDS = frozenset([
    "a", "an", "the", "this", "that", "these", "those", "some", "any", "all", "each", "every", "no",
    "not", "nor", "and", "or", "but", "if", "then", "else", "when", "while", "where", "which",
    "who", "whom", "whose", "what", "how", "why", "than", "as", "at", "by", "for", "from", "in",
    "into", "of", "off", "on", "onto", "out", "over", "per", "to", "up", "upon", "via", "with",
    "within", "without", "about", "after", "again", "against", "before", "between", "both",
    "during", "it", "its", "is", "are", "was", "were", "be", "been", "being", "am", "do", "does",
    "did", "done", "has", "have", "had", "having", "can", "could", "may", "might", "must", "shall",
    "should", "will", "would", "more", "most", "less", "least", "much", "many", "other", "such",
    "only", "own", "same", "so", "too", "very", "just", "also", "still", "yet", "there", "here",
    "now", "even", "ever", "instead", "further", "rather", "quite"
])  # fmt: skip
"""Closed-class English words (determiners, prepositions, conjunctions, pronouns, auxiliaries,
degree adverbs): grammar, not content, so they never narrow even where an identifier holds them
(``from_parts``, ``is_empty``)."""

_DEF = re.compile(r"^[ \t]*(?:async[ \t]+)?(?:def|class)[ \t]+([A-Za-z_]\w*)(.*)$", re.M)
_NAME = re.compile(r"[A-Za-z_]\w*")
_CAMEL = re.compile(r"\b\w*[a-z][A-Z]\w*\b|\b[A-Z]{2,}[a-z]\w*\b")
_DOTTED = re.compile(r"(?<![\w.])[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+(?![\w(])")
_FILE = re.compile(r"\b[\w-]+\.(?:py|pyi|pyx|c|h|cfg|toml|ini|txt|rst|md)\b|\w/\w")
_WORD = re.compile(r"[A-Za-z]+")


def name_parts(name: str) -> list[str]:
    """The lower-case parts of an identifier: split at ``_`` and at case changes
    (``HTTPErrorHandler`` → http, error, handler; ``get_tz_name`` → get, tz, name)."""
    spaced = re.sub(r"([a-z0-9])([A-Z])|([A-Z])([A-Z][a-z])", r"\1\3 \2\4", name)
    return [p.lower() for p in re.split(r"[\s_\d]+", spaced) if p]


def stems(word: str) -> set[str]:
    """``word`` (lower-case) and its forms with a plural or verb ending cut."""
    found = {word}
    for end, repl in (("ies", "y"), ("es", ""), ("s", ""), ("ing", ""), ("ing", "e"), ("ed", ""), ("d", "")):
        if word.endswith(end) and len(word) - len(end) >= 3:
            found.add(word[: -len(end)] + repl)
    return found


class TreeNames:
    """The definition names of a tree's source files, as parts, with how many definitions hold each."""

    def __init__(self, sources: Iterable[tuple[str, str]]) -> None:
        """``sources``: (path, text) of each source file (the caller picks which files are source)."""
        self.counts: Counter[str] = Counter()
        self.names: set[str] = set()
        self.definitions = 0
        for path, text in sources:
            stem = path.rsplit("/", 1)[-1].removesuffix(".py")
            defs = [(stem, ""), *((m.group(1), m.group(2)) for m in _DEF.finditer(text))]
            self.definitions += len(defs)
            for name, rest in defs:  # rest: the def line after the name (its parameters, its bases)
                self.names.add(name)
                self.counts.update({p for n in (name, *_NAME.findall(rest)) for p in name_parts(n)})

    @property
    def limit(self) -> int:
        """The most definitions a part may name and still narrow."""
        return max(MIN_LIMIT, int(RATIO * self.definitions))

    def narrows(self, word: str) -> bool:
        """Whether the request word ``word`` is (a stem of) a part that names few definitions."""
        if word in self.names:  # a defined name, exactly (``Version``, ``dehumanize``)
            return True
        mine = stems(word.lower())
        hits = {p for p in self.counts if stems(p) & mine}
        hits |= {p for p in self.counts if any(len(s) >= 4 and p.startswith(s) for s in mine)}
        return bool(hits) and sum(self.counts[p] for p in hits) <= self.limit


def code_shaped(request: str) -> list[str]:
    """The request's code-shaped tokens (rule 1), sorted, no repeats."""
    found = set(code_names(request))
    found.update(_CAMEL.findall(request))
    found.update(_DOTTED.findall(request.rstrip(".")))
    found.update(_FILE.findall(request))
    return sorted(found)


def narrowing_words(request: str, names: TreeNames) -> list[str]:
    """The tokens of ``request`` that narrow the search (empty: the request is dropped as
    ``no-narrowing-word``). Code-shaped tokens first, then the words of the tree's names."""
    shaped = code_shaped(request)
    words = _WORD.findall(request)[1:]  # the first word is the request's verb
    content = [w for w in words if len(w) >= 3 and w.lower() not in FUNCTION_WORDS]
    return shaped + sorted({w for w in content if names.narrows(w)})


def narrows_at(request: str, repo: Path, rev: str, keep: Callable[[str], bool]) -> bool:
    """Whether ``request`` has a narrowing token against ``rev``'s tree (its source files: ``keep``);
    the tree is read only when no token is code-shaped."""
    if code_shaped(request):
        return True
    return bool(narrowing_words(request, TreeNames(git_sources(repo, rev, keep))))


def git_sources(repo: Path, rev: str, keep: Callable[[str], bool]) -> list[tuple[str, str]]:
    """(path, its ``def``/``class`` lines) of each ``.py`` file of ``rev``'s tree that ``keep`` takes
    (one ``git ls-tree`` and one ``git grep``: the files are not read whole)."""
    listed = _run(repo, "ls-tree", "-r", "--name-only", rev)
    lines: dict[str, list[str]] = {p: [] for p in listed.splitlines() if p.endswith(".py") and keep(p)}
    pattern = r"^[[:space:]]*(async[[:space:]]+)?(def|class)[[:space:]]"
    for hit in _run(repo, "grep", "-I", "-E", "-e", pattern, rev, "--", "*.py").splitlines():
        _, path, text = hit.split(":", 2)
        if path in lines:
            lines[path].append(text)
    return [(p, "\n".join(t)) for p, t in sorted(lines.items())]


def dir_sources(tree: Path, keep: Callable[[str], bool]) -> Iterator[tuple[str, str]]:
    """(path relative to ``tree``, text) of each ``.py`` file under ``tree`` that ``keep`` takes."""
    for path in sorted(tree.rglob("*.py")):
        rel = path.relative_to(tree).as_posix()
        if path.is_file() and keep(rel):
            yield rel, path.read_text(encoding="utf-8", errors="replace")


def _run(repo: Path, *args: str) -> str:
    proc = subprocess.run(
        ["git", "-C", str(repo), "-c", "core.quotepath=off", *args],
        capture_output=True, text=True, encoding="utf-8", errors="replace", check=False,
    )  # fmt: skip
    if proc.returncode not in (0, 1):  # git grep: 1 is "no match"
        raise ConfigError(f"{repo}: git {args[0]} failed: {proc.stderr.strip()[:300]}")
    return proc.stdout
