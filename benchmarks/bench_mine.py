"""Time the miner on a history of edits to one large file (issue 48: the gold rules' cost).

    PYTHONPATH=$PWD .venv/bin/python benchmarks/bench_mine.py FILE [--commits 40]

Builds a throw-away git repository whose first commit holds FILE (e.g. arrow 1.3.0's 6,485-line
``arrow/locales.py`` from ``<cache>/workspaces/arrow-1.3.0``) and then ``--commits`` commits, each
editing one string or ``return`` line of it (every third only a comment, so the formatting filter
has work too), seeded; prints the tasks, the filter counts and the seconds ``mine`` took. Run it
on two checkouts to compare them (the same FILE and seed give the same history).
"""

from __future__ import annotations

import argparse
import os
import random
import subprocess
import tempfile
import time
from pathlib import Path

from subagent_lab.bench import mine


def build(source: str, root: Path, commits: int, seed: int = 0) -> None:
    """The history: ``source`` as ``pkg/big.py``, then ``commits`` seeded one-line edits."""
    env = {**os.environ, "GIT_AUTHOR_NAME": "A", "GIT_AUTHOR_EMAIL": "a@example.org",
           "GIT_COMMITTER_NAME": "A", "GIT_COMMITTER_EMAIL": "a@example.org"}  # fmt: skip

    def git(*args: str) -> None:
        subprocess.run(["git", "-c", "commit.gpgsign=false", "-C", str(root), *args], env=env, check=True,
                       capture_output=True)  # fmt: skip

    git("init", "-q", "-b", "main")
    (root / "pkg").mkdir()
    lines = source.splitlines(keepends=True)
    rnd = random.Random(seed)
    for i in range(commits + 1):
        if i:
            n = rnd.choice([k for k, line in enumerate(lines) if line.startswith("        ")
                            and line.strip().startswith(('"', "return "))])  # fmt: skip
            line = lines[n].rstrip("\n")
            if i % 3 == 0:
                line += "  # note"
            elif line.strip().startswith("return "):
                line = line.replace("return ", "return (", 1) + ")"
            else:
                line = line.replace('"', '"z', 1)
            lines[n] = line + "\n"
        (root / "pkg" / "big.py").write_text("".join(lines), encoding="utf-8")
        git("add", "-A")
        git("commit", "-qm", f"Fix the entry number {i}" if i else "Initial import")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("file", help="a large Python file")
    parser.add_argument("--commits", type=int, default=40)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as work:
        root = Path(work) / "repo"
        root.mkdir()
        build(Path(args.file).read_text(encoding="utf-8"), root, args.commits)
        start = time.perf_counter()
        result = mine.mine(root)
        seconds = time.perf_counter() - start
    removed = dict(result.removed)
    print(f"{len(result.tasks)} tasks, {result.commits} commits, removed {removed}: {seconds:.2f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
