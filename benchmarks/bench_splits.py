"""The benchmark's splits and their workspaces: tasks per kind, and what each source tree holds.

Prints the task counts per split, package and kind (with how many tasks cite several files), then,
for each pinned sdist, its SHA-256 and the lines of its unpacked tree by part: library code, tests,
docs and the rest. The trees must be fetched (``python -m subagent_lab.bench.workspaces fetch``).

Usage: python benchmarks/bench_splits.py
"""

from __future__ import annotations

import argparse
from pathlib import Path

from subagent_lab.bench.suite import split_table
from subagent_lab.bench.workspaces import SDISTS, is_fetched, tree_path

TEXT_SUFFIXES = {
    ".py",
    ".pyi",
    ".pyx",
    ".pxd",
    ".md",
    ".rst",
    ".txt",
    ".toml",
    ".cfg",
    ".ini",
    ".yml",
    ".yaml",
}


def _part(rel: Path, package_dir: str) -> str:
    """Which part of a checkout a file belongs to."""
    if rel.as_posix().startswith(package_dir + "/"):
        return "library"
    top = rel.parts[0]
    if top in {"tests", "testing", "test"}:
        return "tests"
    if top in {"docs", "doc"}:
        return "docs"
    return "other"


def tree_lines(name: str) -> dict[str, int]:
    """Lines of text files in ``name``'s tree, by part (library, tests, docs, other)."""
    root = tree_path(name)
    parts = dict.fromkeys(("library", "tests", "docs", "other"), 0)
    for file in root.rglob("*"):
        if file.is_file() and file.suffix in TEXT_SUFFIXES:
            lines = file.read_bytes().count(b"\n")
            parts[_part(file.relative_to(root), SDISTS[name].package_dir)] += lines
    return parts


def main() -> int:
    argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0]).parse_args()
    print(split_table())
    print()
    print(f"{'package':12} {'sdist':22} {'library':>8} {'tests':>7} {'docs':>7} {'other':>7}  sha256")
    for name, sdist in SDISTS.items():
        if not is_fetched(name):
            print(f"{name:12} {sdist.requirement:22} (not fetched)  {sdist.sha256}")
            continue
        p = tree_lines(name)
        print(
            f"{name:12} {sdist.requirement:22} {p['library']:>8,} {p['tests']:>7,} {p['docs']:>7,} "
            f"{p['other']:>7,}  {sdist.sha256}"
        )
    print(f"\ntrees under {Path(tree_path('jinja2')).parent}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
