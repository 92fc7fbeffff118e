"""A directory Grep's listing taken from its own descriptor walk (``rg_listing.walk_listing``, with
the ignore files evaluated by ``tools.rg.ignore`` and, outside its subset, ``tools.rg.rules``) is
rg's listing whenever it is used: checked against ``rg --files`` on generated trees whose ignore
files exclude, re-include and nest, on rg's precedence between files, and on the shapes real
packages ship."""

from __future__ import annotations

import os
import random
import re
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import write_files

from subagent_lab.tools import rg
from subagent_lab.tools.rg import ignore as rg_ignore
from subagent_lab.tools.rg import listing as rg_listing
from subagent_lab.tools.rg import rules as rg_rules
from subagent_lab.tools.rg.search import search
from subagent_lab.workspace.sandbox import Workspace


@pytest.fixture(autouse=True)
def _fresh() -> Iterator[None]:
    rg_listing.clear_cache()
    yield
    rg_listing.clear_cache()


def _both(root: Path, glob: str | None = None, *, honour: bool = True) -> tuple[list[str] | None, list[str]]:
    """(the walk's listing or None, rg's listing) of ``root``."""
    ws = Workspace(root, honour_gitignore=honour)
    args = [rg._rg_binary(), "--files", "--null", "--no-config", "--no-follow", "--hidden"]
    args += [*rg.walk_filters(ws, glob, secrets=False), "--", "."]
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    try:
        listed, complete = rg_listing._rg_list(args, fd, time.monotonic() + 10)
        assert complete or listed == []  # rg exits 1 when it lists nothing
        _, tree = rg_listing._walk(fd)
        walked = rg_listing.walk_listing(tree, glob, honour)
    finally:
        os.close(fd)
    return walked, listed


PACKAGE = {
    "README.md": "x\n",
    "src/pkg/__init__.py": "x\n",
    "src/pkg/core.py": "x\n",
    "src/pkg/py.typed": "",
    "tests/test_core.py": "x\n",
    "tests/data/cmd/toml-test/main.go": "x\n",
    "tests/data/.git": "gitdir: ../../.git/modules/data\n",
}


@pytest.mark.parametrize(
    ("ignore", "used"),
    [
        ("/dist\n/toml-test\n", True),  # anchored: tests/data/cmd/toml-test is deeper
        ("__pycache__/\n*.py[cod]\n*$py.class\n*.so\n.Python\nbuild/\n*.egg-info/\n", True),
        ("# comment\n\n!keep.py\n   \n\\#hash\n", True),
        ("toml-test\n", True),  # unanchored: excludes the nested directory
        ("*.md\n", True),
        ("src/pkg/core.py\n", True),
        ("/src/*/core.py\n", True),
        ("core.p?\n", True),
        ("**/core.py\n", True),
        ("src/**\n!src/pkg/\n", True),  # re-includes the directory, not what src/** excludes in it
        ("py.typed   \n", True),  # trailing blanks are trimmed
        ("README.MD\n", True),  # case-sensitive: excludes nothing
        ("*.py\n!core.py\n", True),
        ("tests/\n!tests/test_core.py\n", True),  # nothing inside an excluded directory comes back
        ("no//thing\n", True),  # outside the exact subset, but it can match nothing here
        ("[!x]ore.py\n", False),  # a negated class is left to rg (rg's can match /)
        ("*.{md,txt}\n", False),  # alternation
        ("src[.-_]pkg\n", False),  # rg's range matches the / of src/pkg
        ("\ufeffREADME.md\n", False),  # a byte-order mark
    ],
)
def test_the_walk_gives_rgs_listing_or_leaves_it_to_rg(tmp_path: Path, ignore: str, used: bool) -> None:
    root = write_files(tmp_path / "ws", {**PACKAGE, "tests/data/.gitignore": "", ".gitignore": ignore})
    walked, listed = _both(root)
    assert (walked is not None) == used
    if walked is not None:
        assert walked == listed
    assert _both(root, honour=False)[0] == _both(root, honour=False)[1]  # --no-ignore: always the walk's


@pytest.mark.parametrize(
    ("files", "kept"),
    [
        # Kinds before depth: a root .rgignore line beats a deeper .gitignore line, and the other way.
        ({".rgignore": "!foo\n", "s/.gitignore": "foo\n"}, True),
        ({".rgignore": "foo\n", "s/.ignore": "!foo\n"}, False),
        # Within one kind the deepest file with a matching line decides.
        ({".gitignore": "!foo\n", "s/.gitignore": "foo\n"}, False),
        ({".gitignore": "foo\n", "s/.gitignore": "!foo\n"}, True),
        ({".gitignore": "foo\n", "s/.gitignore": "bar\n"}, False),
        # In one directory: .ignore over .gitignore over .git/info/exclude.
        ({"s/.ignore": "!foo\n", "s/.gitignore": "foo\n"}, True),
        ({"s/.gitignore": "!foo\n", "s/.git/info/exclude": "foo\n"}, True),
        ({"s/.gitignore": "foo\n", "s/.git/info/exclude": "!foo\n"}, False),
        # Relative to the file's directory; a .git below does not cut off the rules above.
        ({".git/info/exclude": "s/foo\n", "s/.git/info/exclude": "s/foo\n"}, False),
        ({"s/.gitignore": "s/foo\n"}, True),
        ({"s/.gitignore": "/foo\n"}, False),
        # One byte per ? (é is two), escapes, trailing white space, classes.
        ({".gitignore": "?oo\n"}, False),
        ({".gitignore": "s/?oo\n", "s/éoo": ""}, False),
        ({".gitignore": "f[a-z]o\n"}, False),
        ({".gitignore": "fo\\o\n"}, False),
        ({".gitignore": "foo\u00a0\u3000\t\n"}, False),
        ({".gitignore": "foo\\ \n"}, True),
        ({".gitignore": "**/s/**/foo\n"}, False),
        ({".gitignore": "s/**\n!s/foo\n"}, True),
        ({".gitignore": "s/**/\n"}, True),  # directories only
    ],
)
def test_precedence_and_syntax_as_rg_reads_them(tmp_path: Path, files: dict[str, str], kept: bool) -> None:
    root = write_files(tmp_path / "ws", {"s/foo": "", "top": "", **files})
    walked, listed = _both(root)
    assert ("s/foo" in listed) == kept  # the expectation checks rg itself
    assert walked == listed


@pytest.mark.parametrize("odd", ["!", "/", "!/"])
def test_an_empty_glob_in_a_file_outside_the_subset_is_not_taken_as_inert(tmp_path: Path, odd: str) -> None:
    """rg reads a lone ``!`` as re-including everything: a file holding one decides entries that
    another file excludes (here the .gitignore's README.md, re-included by the .rgignore)."""
    root = write_files(tmp_path / "ws", {**PACKAGE, ".gitignore": "*.md\n", ".rgignore": f"{odd}\n"})
    walked, listed = _both(root)
    assert ("README.md" in listed) == (odd == "!")  # the expectation checks rg itself
    assert walked is None


def test_an_ignore_file_that_is_not_utf8_is_left_to_rg(tmp_path: Path) -> None:
    root = write_files(tmp_path / "ws", PACKAGE)
    (root / ".ignore").write_bytes(b"\xffnothing\n")
    assert _both(root)[0] is None


def test_git_exclude_rules_are_applied(tmp_path: Path) -> None:
    root = write_files(tmp_path / "ws", PACKAGE)
    (root / ".git" / "info").mkdir(parents=True)
    (root / ".git" / "info" / "exclude").write_text("nothing-here\n")
    assert _both(root)[0] == _both(root)[1]
    (root / ".git" / "info" / "exclude").write_text("core.py\n")
    walked, listed = _both(root)
    assert walked == listed
    assert "src/pkg/core.py" not in listed


@pytest.mark.parametrize(
    "glob", ["*.py", "test_*", "*core*", "README.md", "*.p*y", "*", "**/*.py", "*.{py,md}"]
)
def test_a_plain_glob_is_applied_as_rg_applies_it(tmp_path: Path, glob: str) -> None:
    """rg's ``--glob`` decides before the ignore files: what it matches is listed or entered even
    where an ignore file excludes it."""
    root = write_files(tmp_path / "ws", {**PACKAGE, "src/pkg/py.copy.py": "x\n", "build.py/x.txt": "x\n"})
    (root / ".gitignore").write_text("core.py\nbuild.py\n*.md\n")
    walked, listed = _both(root, glob)
    assert (walked is not None) == (rg_rules.glob_filter(glob) is not None)
    if walked is not None:
        assert walked == listed


def test_non_ascii_names_come_in_rgs_order(tmp_path: Path) -> None:
    names = ["é.py", "z.py", "e.py", "\U0001f600.py", "ﬀ.py", "a/é.py", "a.py"]
    root = write_files(tmp_path / "ws", dict.fromkeys(names, "x\n"))
    os.close(os.open(os.fsencode(root) + b"/\xff\xfe.py", os.O_CREAT | os.O_WRONLY))  # not UTF-8
    walked, listed = _both(root)
    assert walked == listed


def test_a_first_search_starts_no_listing_rg_unless_an_ignore_file_is_outside_the_subset(
    tmp_path: Path, rg_list_calls: list[object]
) -> None:
    root = write_files(tmp_path / "ws", {**PACKAGE, ".gitignore": "*.log\n", "debug.log": "x\n"})
    ws = Workspace(root)
    found = search(ws, ["x"], ".", files_only=True, max_results=500).files
    assert found == [
        "README.md", "src/pkg/__init__.py", "src/pkg/core.py", "tests/data/cmd/toml-test/main.go",
        "tests/test_core.py",
    ]  # fmt: skip
    assert rg_list_calls == []  # the ignore file excludes debug.log, evaluated by the walk
    (root / ".gitignore").write_text("*.{log,tmp}\n")  # alternation: rg lists
    assert search(ws, ["x"], ".", files_only=True, max_results=500).files == found
    assert len(rg_list_calls) == 1


# --- generated trees against rg -------------------------------------------------------------

DIRS = ["a", "ab", "A", "b", "d.egg-info", "x y", ".h", "é"]
FILES = ["b.py", "B.PY", "c.txt", "a.pyc", "ab.py", "x y.txt", "é.txt", ".hf", "a1", "a", "e.py"]
LINES = [
    "a", "/a", "a/", "/a/", "*.py", "*.PY", "b.*", "a*", "*b*", "?.py", "??.txt", "[ab]", "[ab]*",
    "*.py[cod]",
    "a/b.py", "/a/ab", "**/a", "a/**", "d/**/b.py", "#a", "\\#a", "a\\ ", "ab   ", "*.egg-info/", "x y",
    "x\\ y.txt", "é", "é.txt", "c.t?t", "/*.txt", "ab/", "", "a/ab", "/ab/a/", "*/b.py", "a/*/", "**/b",
    "b/**/", "[a-c]*.py", "*.t[a-z]t", "A", ".h/", "a1", "a?", "**/ab/*.py", "a/**/e.py", "\\!b.py", "*",
    "!b.py", "!a", "!/a", "!*.py", "!a/", "!.hf", "!**/ab", "!ab/*.py", "!é.txt", "!a/**", "!c.txt",
]  # fmt: skip
ODD = ["[!a]*", "{a,ab}", "[z-a]", "a**", "a//b", "!", "/", "[]]", "*.{py,txt}"]
"""Lines outside the exact subset: rare in the generated files, as in real ones."""
WHERE = ["", "a/", "ab/", "d.egg-info/", "ab/a/", "b/"]
KIND = [".gitignore", ".ignore", ".rgignore", ".git/info/exclude"]


def _tree(rng: random.Random, odd: float = 0.01) -> dict[str, str]:
    """Files, and ignore files that exclude some of them (and re-include, anchor, nest); a line
    is from ``ODD`` with probability ``odd``."""
    files: dict[str, str] = {}
    for _ in range(rng.randint(1, 14)):
        parts = [rng.choice(DIRS) for _ in range(rng.randint(0, 3))]
        files["/".join([*parts, rng.choice(FILES)])] = "x\n"
    for _ in range(rng.randint(1, 4)):
        lines = [rng.choice(ODD if rng.random() < odd else LINES) for _ in range(rng.randint(1, 5))]
        files[rng.choice(WHERE) + rng.choice(KIND)] = "\n".join(lines) + "\n"
    return files


def _made(root: Path, files: dict[str, str]) -> Path:
    """``files`` written under ``root``, skipping any whose path a file already blocks."""
    for rel, text in files.items():
        path = root / rel
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
        except (FileExistsError, NotADirectoryError, IsADirectoryError):
            continue
    return root


def test_on_generated_trees_the_walk_lists_what_rg_lists_and_answers_most(tmp_path: Path) -> None:
    """Every generated tree's listing, for several globs, is rg's whenever the walk gives one; the
    walk gives one for at least 90% of the (tree, glob) pairs; the ignore files do exclude files in
    most trees (so the comparison is not of trees where they decide nothing)."""
    rng = random.Random(39)
    count = int(os.environ.get("RG_TREES", "150"))
    answered = pairs = excluding = 0
    for number in range(count):
        files = _tree(rng)
        root = _made(tmp_path / f"ws{number}", files)
        listed_all = sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())
        for glob in (None, rng.choice(["*.py", "a*", "*b*", "ab", "b.py"])):
            walked, listed = _both(root, glob)
            pairs += 1
            if glob is None and len(listed) < len(listed_all):
                excluding += 1
            if walked is not None:
                answered += 1
                assert walked == listed, files
    assert answered >= 0.9 * pairs, (answered, pairs)
    assert excluding >= 0.5 * count, (excluding, count)


def test_ignore_globs_are_matched_without_repetition() -> None:
    """Linear matching: every compiled piece is fixed-length (escaped literals, ``.``, classes),
    the stars and ``**`` being handled by the left-to-right search around them."""
    parsed = rg_ignore.parse(b"*.py[cod]\na*b?c*d\n**/x/**/y*z\n!*$py.class\n[a-c]*[0-9]\n")
    assert parsed is not None and len(parsed.rules) == 5
    sources = [
        piece.pattern
        for rule in parsed.rules
        for run in rule.runs
        for segment in run
        if isinstance(segment, rg_rules.Pieces)
        for piece in segment.pieces
    ]
    assert sources and all(re.search(rb"(?<!\\)[*+?{]", source) is None for source in sources)


@pytest.mark.parametrize(
    ("ignore", "kept"),
    [
        ("x\r\ns/foo\\ \r", True),  # last line, no newline: rg keeps its \r, trims it, and the glob
        # then ends in a dangling \ (an error): nothing is excluded by it
        ("s/foo\\ \r\nx\r", False),  # the same line before a newline: its \r goes, the blank is escaped
        ("x\r\ns/foo \r", True),  # the blank is trimmed with the \r: s/foo, not s/foo , goes
        ("x\r\n/s/foo\r", True),
    ],
)
def test_a_crlf_ignore_files_last_line_is_read_as_rg_reads_it(
    tmp_path: Path, ignore: str, kept: bool
) -> None:
    root = write_files(tmp_path / "ws", {"s/foo": "", "s/foo ": "", "top": ""})
    (root / ".gitignore").write_bytes(ignore.encode())
    walked, listed = _both(root)
    assert ("s/foo " in listed) == kept  # the expectation checks rg itself
    assert walked is None or walked == listed
    exact = rg_ignore.parse(ignore.encode())
    if exact is not None:  # the exact reader's verdict on the name alone, as rg's
        assert (exact.matched([b"s", b"foo "], 0, False) is True) == (not kept)
