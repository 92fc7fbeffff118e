"""The text of a mined task: the request a commit message states, and the rule that it reads as one.

``request_text`` cuts prefixes and issue references from the subject (and adds a short first body
paragraph); ``reads_as_request`` keeps a request that starts with a verb of ``VERBS``;
``PROMPT_TEMPLATE`` wraps it into the prompt. docs/benchmarks-mined.md states each rule.
"""

from __future__ import annotations

import re

PROMPT_TEMPLATE = (
    "In this code base, which functions or classes would you change to make this change: «{request}»? "
    "Cite them."
)
"""The fixed wording of every mined prompt; ``request`` is the cleaned commit subject (+ a short
first body paragraph)."""

VERBS = frozenset([
    "fix", "add", "support", "allow", "handle", "make", "use", "raise", "avoid", "improve",
    "implement", "prevent", "ensure", "return", "accept", "correct", "remove", "respect",
    "preserve", "detect", "expose", "reject", "treat", "honor", "honour", "speed", "optimize",
    "optimise", "change", "rename", "replace", "convert", "normalize", "normalise", "validate",
    "warn", "skip", "ignore", "check", "extend", "enable", "disable", "introduce", "refactor",
    "simplify", "clean", "restore", "keep", "stop", "let", "pass", "include", "exclude",
    "deprecate", "drop", "provide", "catch", "emit", "parse", "format", "escape", "strip", "sort",
    "display", "show", "render", "properly", "correctly"
])  # fmt: skip
"""First words (case-insensitive) that make a subject read as a request; ``-s``/``-ed`` forms too."""
_REFS = [
    r"\(\s*(?:(?:fix(?:e[sd])?|close[sd]?|resolve[sd]?|refs?|see|for)\s+)?(?:[\w.-]+/[\w.-]+)?(?:#|gh-)\d+"
    r"(?:\s*,\s*(?:#|gh-)\d+)*\s*\)",
    r"\b(?:fix(?:e[sd])?|close[sd]?|resolve[sd]?|refs?|see)\s+(?:[\w.-]+/[\w.-]+)?(?:#|gh-)\d+",
    r"(?:[\w.-]+/[\w.-]+)?(?:#|\bgh-)\d+\b",
]


def request_text(message: str) -> str:
    """The request a commit message states: its subject, without prefixes and issue references,
    plus its first body paragraph when that is short (≤ 200 characters, no URL, no trailer)."""
    subject, _, body = message.strip().partition("\n")
    text = _clean(re.sub(r"^(\[[^\]]*\]\s*|[\w./-]+(\([^)]*\))?!?:\s+)+", "", subject.strip()))
    paragraph = " ".join(body.strip().split("\n\n", 1)[0].split()) if body.strip() else ""
    if paragraph and len(paragraph) <= 200 and "://" not in paragraph and not _trailer(paragraph):
        cleaned = _clean(paragraph)
        if len(re.findall(r"\w+", cleaned)) >= 2:
            text = f"{text}. {cleaned}"
    return text


def _trailer(paragraph: str) -> bool:
    return bool(re.match(r"^[\w-]+(-by)?:\s", paragraph)) or paragraph.startswith(("*", "-", "This reverts"))


def _clean(text: str) -> str:
    for pattern in _REFS:
        text = re.sub(pattern, "", text, flags=re.I)
    return " ".join(text.split()).strip(" ,;:-.").strip()


def reads_as_request(request: str) -> bool:
    """The request's first word is one of ``VERBS`` (or its -s/-es/-ed/-d form); three words at least."""
    words = request.split()
    if len(words) < 3:
        return False
    first = words[0].lower().strip("`'\",.")
    stems = {first, first.removesuffix("s"), first.removesuffix("es"), first.removesuffix("ed"),
             first.removesuffix("d")}  # fmt: skip
    return bool(stems & VERBS)


_SNAKE = re.compile(r"(?<![\w./-])(_*[A-Za-z0-9]+(?:_[A-Za-z0-9]+)+_*|_+[A-Za-z]\w*)(?![\w/-]|\.\w)")
_EXTENSIONS = re.compile(r"\.(py|pyi|txt|md|rst|cfg|toml|ini|ya?ml|json|html|c|h|in|lock)$", re.I)


def code_names(request: str) -> list[str]:
    """The identifiers a request names as code: in backticks, written as a call (``name()``), or
    snake_case (an inner or leading underscore). A dotted name counts by its last part; file names
    (``setup.py``) and names under three characters do not count. Sorted, no repeats."""
    found: set[str] = set()
    for quoted in re.findall(r"`([^`\n]+)`", request):
        match = re.match(r"\s*[@.]?([A-Za-z_][\w.]*)", quoted)
        if match and not _EXTENSIONS.search(match.group(1)):
            found.add(match.group(1).rstrip(".").rsplit(".", 1)[-1])
    bare = re.sub(r"`[^`\n]*`", " ", request)
    found.update(re.findall(r"(?<![\w.])([A-Za-z_]\w*)\(\)", bare))
    found.update(re.findall(_SNAKE, bare))
    return sorted(n for n in found if len(n) >= 3 and not n.strip("_").isdigit())
