"""Build time and size of the symbol index (tools/symbols) on installed packages, cold and warm.

For each tree: its code files and lines, the index's definitions and references, the cold build
(empty cache: every file read, hashed and parsed), the warm build (nothing changed: one stat per
file, the same index returned), a build after touching every file (stat changed, bytes not:
read and hashed, nothing parsed), the pickled size of the index, and the search index and repo
map built on it. The first build of the process also loads the grammars and bm25s; that cost is
printed once, apart.

Usage: python benchmarks/bench_index.py [--trees jinja2,yaml,tqdm,pygments,pandas] [--repeat 3]

A tree is an importable package name or a path (with a ``/``: a whole source tree, such as the
test split's unpacked sdists under ``~/.cache/subagent_lab/workspaces``).
"""

from __future__ import annotations

import argparse
import importlib
import os
import pickle
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from subagent_lab.tools.symbols.index import clear_cache, index_for
from subagent_lab.tools.symbols.repo_map import repo_map
from subagent_lab.tools.symbols.search import ranked_units, unit_search
from subagent_lab.workspace.sandbox import Workspace

DEFAULT_TREES = "jinja2,yaml,tqdm,pygments,pandas"


def _timed(fn: Callable[[], Any], repeat: int) -> tuple[float, Any]:
    """(median seconds over ``repeat`` runs, the last result)."""
    times: list[float] = []
    result: Any = None
    for _ in range(repeat):
        started = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - started)
    return statistics.median(times), result


def _root(name: str) -> Path:
    """An installed package's directory, or ``name`` itself where it is a path (a source tree)."""
    if "/" in name:
        return Path(name).expanduser()
    module = importlib.import_module(name)
    return Path(module.__file__ or "").parent


def _warm_up() -> float:
    """Seconds the first build of a process spends loading grammars, tree-sitter and bm25s."""
    with tempfile.TemporaryDirectory() as tmp:
        Path(tmp, "a.py").write_text("def f(x):\n    '''Doc.'''\n    return g(x)\n")
        Path(tmp, "b.ts").write_text("function g() {}\n")
        Path(tmp, "c.go").write_text("package c\nfunc G() {}\n")
        Path(tmp, "d.js").write_text("function h() {}\n")
        started = time.perf_counter()
        ws = Workspace(Path(tmp))
        ranked_units(index_for(ws), "f", 1)
        repo_map(ws, 100)
        return time.perf_counter() - started


def _row(name: str, repeat: int) -> dict[str, Any]:
    root = _root(name)
    ws = Workspace(root)

    def cold() -> Any:
        clear_cache()
        return index_for(ws)

    cpu_started = time.process_time()
    cold_s, index = _timed(cold, repeat)
    cold_cpu_s = (time.process_time() - cpu_started) / repeat
    warm_s, again = _timed(lambda: index_for(ws), repeat)
    assert again is index
    with tempfile.TemporaryDirectory() as tmp:  # a fresh copy: new paths and mtimes, same bytes
        copy = Path(tmp) / root.name
        shutil.copytree(root, copy, ignore=shutil.ignore_patterns("__pycache__"))
        copy_s, copied = _timed(lambda: index_for(Workspace(copy)), 1)
        assert copied.stats.parsed == 0
    search_s, _ = _timed(lambda: unit_search(type(index)(index.files, index.stats, index.root_name)), 1)
    unit_search(index)  # built above on a copy; queries are timed on a built one
    query_s, _ = _timed(lambda: ranked_units(index, "load the configuration from a file", 10), repeat)
    map_s, _ = _timed(lambda: repo_map(ws, 1024), 1)
    stats = index.stats
    return {
        "tree": root.name if "/" in name else name,
        "files": stats.files,
        "lines": stats.lines,
        "defs": stats.definitions,
        "refs": stats.references,
        "cold_s": cold_s,
        "cold_cpu_s": cold_cpu_s,
        "warm_s": warm_s,
        "copy_s": copy_s,
        "s_per_50k": cold_s * 50_000 / max(stats.lines, 1),
        "cpu_per_50k": cold_cpu_s * 50_000 / max(stats.lines, 1),
        "size_mb": len(pickle.dumps(index.files)) / 1e6,
        "search_build_s": search_s,
        "query_ms": query_s * 1000,
        "map_s": map_s,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trees", default=DEFAULT_TREES, help="packages or source-tree paths")
    parser.add_argument("--repeat", type=int, default=3, help="runs per timing (the median is shown)")
    args = parser.parse_args()
    print(f"cores: {os.cpu_count()}, load average: {', '.join(f'{x:.1f}' for x in os.getloadavg())}")
    print(f"first build of the process (grammars, bm25s, scipy loaded): {_warm_up():.2f} s")
    rows = [_row(name.strip(), args.repeat) for name in args.trees.split(",") if name.strip()]
    columns = [
        ("tree", "{:<20}"), ("files", "{:>6}"), ("lines", "{:>8}"), ("defs", "{:>7}"), ("refs", "{:>8}"),
        ("cold_s", "{:>7.2f}"), ("warm_s", "{:>7.3f}"), ("copy_s", "{:>7.2f}"), ("s_per_50k", "{:>9.2f}"),
        ("cold_cpu_s", "{:>10.2f}"), ("cpu_per_50k", "{:>11.2f}"), ("size_mb", "{:>7.1f}"),
        ("search_build_s", "{:>14.2f}"), ("query_ms", "{:>8.1f}"), ("map_s", "{:>6.2f}"),
    ]  # fmt: skip
    print(" ".join(f"{name:>{len(fmt.format(rows[0][name])) if rows else 8}}" for name, fmt in columns))
    for row in rows:
        print(" ".join(fmt.format(row[name]) for name, fmt in columns))
    print(
        "cold: empty cache, every file parsed; warm: nothing changed (stat only, same index); "
        "copy: a fresh copy of the tree (read and hashed, every parse reused); s_per_50k: cold "
        "seconds scaled to 50,000 lines (cpu: the process's CPU time, which other load on the machine "
        "does not inflate); size: the pickled index; search_build: BM25 over its units; "
        "map: PageRank and a 1024-token map (medians of --repeat runs where repeated)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
