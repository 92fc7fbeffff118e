"""The small-model Grep (see ``tools/simple.py``): a case-insensitive literal search, capped and
grouped by file, that broadens by itself on a miss, says so, and ends with one ``Next:`` line.

It runs the full Grep's bounded search (``grep.search``), so every limit and exclusion of that
tool holds here too.
"""

from __future__ import annotations

import json
import os
import re
import time
from collections import Counter

from subagent_lab.core.tool import Observation, ObservationBuilder, Span, ToolError
from subagent_lab.tools.glob import find_paths, path_span
from subagent_lab.tools.grep import Hit, check_pattern, search, search_target
from subagent_lab.workspace.sandbox import Workspace

LINE_CHARS = 160
"""Characters shown of a matched line (a window around the match when the line is longer)."""
COUNT_LIMIT = 500
"""Matches one search collects at most; those beyond the shown ones only feed the per-file counts."""
MAX_PATTERN_CHARS = 200
"""A longer pattern is cut (a runaway argument); the broadening then picks a name out of it."""
MAX_SCANNED_CHARS = 4 * MAX_PATTERN_CHARS
"""Characters of the pattern's first line that any regex here looks at: the first
``MAX_PATTERN_CHARS`` once escaping backslashes are dropped lie within them, and no regex then
runs on a model's pasted megabytes (issue 39: every regex on model text bounded)."""
MAX_DEFINITION_CHARS = 1000
"""Characters of a shown line ``definition_strength`` looks at (a definition's name comes first)."""
MAX_TRIES = 6
"""Searches one Grep call may run, the broadened ones included."""
BROADEN_BUDGET_S = 5.0
"""No broadened search starts once the searches of one call have taken this long."""
MAX_COUNTED_FILES = 8
"""Files listed by name in the counts of matches not shown."""

STOPWORDS = frozenset({
    "a", "an", "and", "are", "as", "async", "await", "by", "class", "cls", "code", "def", "define",
    "defined", "defines", "do", "does", "file", "files", "find", "for", "from", "function",
    "functions", "how", "if", "implementation", "implemented", "implements", "import", "in", "is",
    "it", "lambda", "method", "methods", "module", "not", "of", "on", "or", "return", "self", "the",
    "this", "to", "what", "where", "which", "with",
})  # fmt: skip
"""Words that name no code: skipped when picking a name out of a pattern."""
_DEFINITION = re.compile(r"^\s*(?:async\s+def|def|class|function|func|fn|struct|enum|interface|type)\s+(\w+)")
_ASSIGNMENT = re.compile(r"^([A-Za-z_]\w*)\s*(?::[^=]*)?=(?!=)")
"""A module-level (unindented) assignment, ``NAME = ...`` or ``NAME: type = ...``."""


def quote(value: str) -> str:
    """An argument value as the ``Next:`` lines write it: a JSON string (lone surrogates escaped,
    since the observation must stay valid UTF-8)."""
    text = json.dumps(value, ensure_ascii=False)
    try:
        text.encode("utf-8")  # fails on a lone surrogate, and only then
    except UnicodeEncodeError:
        return json.dumps(value)
    return text


def _words(patterns: tuple[str, ...]) -> str:
    return " or ".join(quote(p) for p in patterns)


def _identifiers(text: str) -> list[str]:
    """Names in ``text``, most specific first: compound names (``get_source``, ``SafeLoader``),
    then longer before shorter; regex escapes such as ``\\w`` are not names."""
    cleaned = re.sub(r"\\[A-Za-z]", " ", text)
    found: list[str] = []
    seen: set[str] = set()
    for name in re.findall(r"[A-Za-z_][A-Za-z0-9_]*", cleaned):
        if name.lower() not in seen:
            seen.add(name.lower())
            found.append(name)
    useful = [n for n in found if len(n.strip("_")) >= 3 and n.lower() not in STOPWORDS]
    if not useful:
        useful = [n for n in found if len(n.strip("_")) >= 2]

    def specificity(name: str) -> tuple[bool, int]:
        compound = "_" in name.strip("_") or bool(re.search(r"[a-z][A-Z]|[0-9]", name))
        return compound, len(name)

    return sorted(useful, key=specificity, reverse=True)


def _parts(name: str) -> list[str]:
    """The words of one identifier: ``FileSystemLoader`` -> File, System, Loader."""
    spaced = re.sub(r"(?<=[a-z0-9])(?=[A-Z])|_", " ", name)
    return [p for p in spaced.split() if len(p) >= 3 and p.lower() not in STOPWORDS]


def _broader(pattern: str) -> list[tuple[str, ...]]:
    """What to search for, in order, when ``pattern`` itself matches nothing."""
    candidates: list[tuple[str, ...]] = []
    alternatives = tuple(a.strip() for a in pattern.split("|") if a.strip())
    if len(alternatives) > 1:
        candidates.append(alternatives)  # a regex alternation, meant as "any of these"
    names = _identifiers(pattern)
    for name in names:
        candidates.append((name,))
    for name in names:
        for part in sorted(_parts(name), key=len, reverse=True):
            candidates.append((part,))
    tried: set[tuple[str, ...]] = {(pattern.lower(),)}
    unique: list[tuple[str, ...]] = []
    for candidate in candidates:
        key = tuple(word.lower() for word in candidate)
        if key not in tried:
            tried.add(key)
            unique.append(candidate)
    return unique


def _shorter(tried: list[tuple[str, ...]]) -> str | None:
    """One word shorter than any tried, to suggest after a complete miss (or None)."""
    seen = {w.lower() for words in tried for w in words}
    names = [n for words in tried for w in words for n in _identifiers(w)]
    words = {part for name in names for part in [name, *_parts(name)]}
    for word in sorted(words, key=lambda w: (-len(w), w)):
        if word.lower() not in seen:
            return word
        single = word.isalpha() and (word.islower() or word.isupper() or word[1:].islower())
        if single and len(word) >= 6 and word[:-3].lower() not in seen:
            return word[:-3]  # a plain word's stem: "loader" -> "loa" is too short, so >= 6
    return None


def definition_strength(text: str, words: tuple[str, ...]) -> int:
    """2: the line defines a searched name (``def get_source(``, ``class Loader``, ``NAME = ``);
    1: it defines a name containing one (``def get_source_checksum``); 0: neither."""
    text = text[:MAX_DEFINITION_CHARS]
    found = _DEFINITION.match(text) or _ASSIGNMENT.match(text)
    if found is None:
        return 0
    name = found.group(1).lower()
    names = {n.lower() for word in words for n in re.findall(r"[A-Za-z_][A-Za-z0-9_]*", word)}
    if name in names:
        return 2
    return 1 if any(len(n) >= 3 and n in name for n in names - STOPWORDS) else 0


def _grep_scope(ws: Workspace, path: str) -> tuple[str, str]:
    """(target, note): a path that does not exist is searched as the whole workspace, with a note."""
    real = ws.resolve(path, must_exist=False)  # refusals (outside, secrets) still raise here
    if not os.path.exists(real):  # False, not OSError, for an over-long name
        return ".", f"{quote(path)} does not exist, so the whole workspace was searched."
    return search_target(ws, path), ""


def _first_line(pattern: str) -> str:
    lines = [line.strip() for line in pattern.splitlines() if line.strip()]
    return lines[0] if lines else ""


DOTTED = re.compile(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+")
"""A dotted name (``tqdm.write``, ``Environment.get_template``): how tasks name a member, while
the code defines it as ``def write`` in some file, so Grep also looks for the last name."""
_IDENT_START = re.compile(r"[A-Za-z_]")
_IDENT = re.compile(r"[A-Za-z_]\w*")
_MEMBER = re.compile(r"\.[A-Za-z_]\w*")


def dotted_names(text: str) -> list[str]:
    """``DOTTED.findall(text)`` in linear time.

    ``findall`` retries the pattern at every position of a word with no dot after it, each retry
    scanning to the word's end: quadratic in a long word (a pasted blob in a task). Every retry
    inside one word ends at the same place and fails the same way, so this skips to its end.
    """
    out: list[str] = []
    pos = 0
    while (start := _IDENT_START.search(text, pos)) is not None:
        head = _IDENT.match(text, start.start())
        assert head is not None  # the character matched _IDENT_START
        end = head.end()
        while (member := _MEMBER.match(text, end)) is not None:
            end = member.end()
        if end > head.end():
            out.append(text[start.start() : end])
        pos = end
    return out


LOCATION = re.compile(r"([\w./-]+\.\w+):(\d+)(?:-\d+)?")
"""A ``path:line`` location given as a Grep pattern. Only ever ``fullmatch``-ed against the cut
pattern (at most ``MAX_PATTERN_CHARS``): linear there, while a ``search`` through long text
would retry it at every character (quadratic)."""


def simple_grep(ws: Workspace, pattern: str, path: str = ".", max_matches: int = 15) -> Observation:
    """Search the files for a name or a piece of text and list the matching lines, grouped by file.

    The pattern is plain text, not a regular expression, and case is ignored. When nothing
    matches, Grep searches for the most specific name in the pattern instead and says so.

    Args:
        pattern: Text to find, for example a function or class name taken from the task.
        path: A file or directory to search in, as Grep or Glob showed it; by default the whole
            workspace.
    """
    notes: list[str] = []
    given = pattern
    pattern = _first_line(pattern)
    if pattern != given.strip() and pattern:
        notes.append(f"Only the first line of the pattern was used: {quote(pattern)}.")
    if len(pattern) > MAX_SCANNED_CHARS:
        pattern = pattern[:MAX_SCANNED_CHARS]  # cut below once backslashes are dropped
    # `jinja2\.loaders` means `jinja2.loaders` to a literal search; a pattern with `\w` or `\d`
    # is a regex that no literal reading fixes (the broadening below handles those).
    literal = re.sub(r"\\([^\w\s])", r"\1", pattern)
    if literal != pattern and "\\" not in literal:
        notes.append(f"Grep is a literal search, so the backslashes were dropped: {quote(literal)}.")
        pattern = literal
    if len(pattern) > MAX_PATTERN_CHARS:
        pattern = pattern[:MAX_PATTERN_CHARS].rstrip()
        notes.append(f"The pattern was cut to its first {MAX_PATTERN_CHARS} characters.")
    check_pattern(pattern)
    location = LOCATION.fullmatch(pattern)
    if location:
        # A small model told "Next: finish citing f.py:12" sometimes searches for "f.py:12".
        raise ToolError(
            f"{quote(pattern)} is a location (a file and a line), not text to search for.\n"
            f"Next: finish to cite it, or Read path={quote(location.group(1))} "
            f"line={location.group(2)} to see it"
        )
    if pattern.strip().lower() == ws.root.name.lower():
        return _own_name(ws, pattern, max_matches)
    if max_matches < 1:
        raise ToolError(f"max_matches must be >= 1 (got {max_matches})")
    target, scope_note = _grep_scope(ws, path)
    if scope_note:
        notes.append(scope_note)
    scopes = [target] if target == "." else [target, "."]
    broader = _broader(pattern)
    asked: tuple[str, ...] = (pattern,)
    member = pattern.rsplit(".", 1)[-1]
    if DOTTED.fullmatch(pattern) and len(member.strip("_")) >= 3 and member.lower() not in STOPWORDS:
        asked = (pattern, member)
        notes.append(f"{quote(pattern)} is a dotted name, so Grep also searched for {quote(member)}.")
        broader = [w for w in broader if w != (member,)]
    tries = [(words, scope) for words in [asked, *broader] for scope in scopes]
    if target != ".":
        # A phrase in a named file ("template loader" in loaders.py) is first looked for word by
        # word there: the model means that file, and a whole word in it beats the phrase elsewhere.
        names = {(name,) for name in _identifiers(pattern)}
        first = [(asked, target), *(((w), target) for w in broader if w in names)]
        tries = first + [t for t in tries if t not in first]
    tried: list[tuple[str, ...]] = []
    started = time.monotonic()
    for words, scope in tries[:MAX_TRIES]:
        if tried and time.monotonic() - started > BROADEN_BUDGET_S:
            notes.append(f"Stopped broadening the search after {BROADEN_BUDGET_S:.0f} s.")
            break
        run = search(
            ws, list(words), scope, case_insensitive=True, fixed_strings=True,
            max_results=COUNT_LIMIT, line_chars=LINE_CHARS,
        )  # fmt: skip
        if words not in tried:
            tried.append(words)
        if run.files:
            if (words, scope) != tries[0]:
                notes.append(_broadened(tried, words, target, scope))
            return _grep_hits(run.hits, run.capped, words, max_matches, notes)
    out = ObservationBuilder()
    for note in notes:
        out.line(note)
    also = [w for w in tried if w != asked]
    out.line(
        f"Nothing matched {quote(pattern)}"
        + (f" (also tried {', '.join(_words(w) for w in also)})" if also else "")
        + " in the whole workspace."
    )
    shorter = _shorter(tried)
    if shorter is not None:
        out.line(f"Next: Grep pattern={quote(shorter)} (one shorter word)")
    else:
        out.line('Next: Glob pattern="*" to see which files there are')
    return out.build()


OWN_NAME_FILES = 40
"""Files listed instead of the matches when the pattern is the workspace's own name."""


def _own_name(ws: Workspace, pattern: str, max_matches: int) -> Observation:
    """The workspace's files instead of the matches for its own name.

    Small models search for the package's own name (``tqdm`` in tqdm), which nearly every file
    holds: the first screen is then imports and docstrings. An error instead had the 0.5B model
    send the same call until the loop guard ended the run; the file names give it somewhere to go.
    """
    found = find_paths(ws, "**/*")
    files = [p for p in found.paths if not p.endswith("/")]
    out = ObservationBuilder()
    count = f"{len(files)}, the first {OWN_NAME_FILES}" if len(files) > OWN_NAME_FILES else str(len(files))
    out.line(
        f"{quote(pattern)} is the name of the workspace itself, so nearly every file mentions it; "
        f"its files instead ({count}):"
    )
    for rel in files[:OWN_NAME_FILES]:
        out.line(rel, path_span(rel))
    out.line("Next: Grep for a more specific name from the task, or Read the file the task is about")
    return out.build()


def _broadened(tried: list[tuple[str, ...]], words: tuple[str, ...], target: str, scope: str) -> str:
    """The note saying that the matches shown are not for what the model asked."""
    missed = " or ".join(_words(w) for w in tried if w != words) or _words(words)
    asked = f"No match for {missed}" + (f" in {quote(target)}" if target != "." else "")
    where = "" if scope == target else " in the whole workspace"
    if tried[0] == words:
        return f"{asked}; showing its matches{where} instead."
    return f"{asked}; showing matches for {_words(words)}{where} instead."


def _grep_hits(
    hits: list[Hit], capped: bool, words: tuple[str, ...], max_matches: int, notes: list[str]
) -> Observation:
    found = [h for h in hits if h.is_match]
    per_file = Counter(h.path for h in found)
    strength = {h.path: 0 for h in found}
    for hit in found:
        strength[hit.path] = max(strength[hit.path], definition_strength(hit.text, words))
    # Files that define a searched name first, then the files with most matches: the first
    # screen then holds what a locate task is after, not whatever sorts first by path.
    order = {p: i for i, p in enumerate(sorted(per_file, key=lambda p: (-strength[p], -per_file[p], p)))}
    matches = sorted(found, key=lambda h: (order[h.path], h.line))
    # The lines that define a searched name are always shown (a common word's matches would
    # otherwise push `def write(` off the first screen); the rest fill up in file order.
    defining = {id(h) for h in matches if definition_strength(h.text, words) == 2}
    picked = [h for h in matches if id(h) in defining][:max_matches]
    picked += [h for h in matches if id(h) not in defining][: max_matches - len(picked)]
    chosen = {id(h) for h in picked}
    shown = [h for h in matches if id(h) in chosen]
    rest = [h for h in matches if id(h) not in chosen]
    total = f"{len(matches)}{'+' if capped else ''}"
    files = f"{len(per_file)}{'+' if capped else ''}"
    out = ObservationBuilder()
    for note in notes:
        out.line(note)
    plural = "match" if len(matches) == 1 else "matches"
    head = f"{total} {plural} for {_words(words)} in {files} file{'s' if len(per_file) != 1 else ''}"
    out.line(head + (f"; the first {len(shown)}:" if rest else ":"))
    current = None
    for hit in shown:
        if hit.path != current:
            out.line(hit.path)
            current = hit.path
        out.line(f"  {hit.line}: {hit.text.strip()}", Span(hit.path, hit.line, hit.line))
    if rest:
        rest_files = Counter(h.path for h in rest)
        ranked = sorted(rest_files.items(), key=lambda item: (-item[1], item[0]))
        named = ranked[:MAX_COUNTED_FILES]
        listing = ", ".join(f"{p} ({n})" for p, n in named)
        others = len(ranked) - len(named)
        more = f", and {others} more file{'s' if others != 1 else ''}" if others else ""
        spans = [Span(p, 0, 0) for p, _ in named]
        out.line(f"Not shown: {len(rest)}{'+' if capped else ''} more in {listing}{more}.", *spans)
    out.line(_grep_next(shown, words))
    return out.build()


def _grep_next(shown: list[Hit], words: tuple[str, ...]) -> str:
    """The ``Next:`` line of a Grep with matches: read the first definition it showed, else the
    first match (in the file with the most matches, which is listed first).

    It never proposes narrowing the search to that file: it is listed first, so the narrowed
    search would show the same lines again.
    """
    exact = next((h for h in shown if definition_strength(h.text, words) == 2), None)
    partial = next((h for h in shown if definition_strength(h.text, words) == 1), None)
    definition = exact or partial
    if definition is not None:
        where = f"path={quote(definition.path)} line={definition.line}"
        return f"Next: Read {where} to see the code around the definition"
    first = shown[0]
    return f"Next: Read path={quote(first.path)} line={first.line} to see the code around the first match"
