"""CLI command ``mine``: a repository's history into a task file of ``localize`` tasks."""

from __future__ import annotations

import argparse
import os
import re
from pathlib import Path

from subagent_lab.bench import mine
from subagent_lab.core.types import ConfigError


def args_mine(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("repo", help="a git work tree or bare git directory")
    parser.add_argument("--revs", default=None, help="revision range, e.g. v1.0..v1.1 (default: HEAD)")
    parser.add_argument("--name", default=None, help="id prefix (default: the repository's name)")
    parser.add_argument("--out", required=True, help="the task file to write (YAML)")
    parser.add_argument("--split", choices=["dev", "test"], default="dev")
    parser.add_argument(
        "--workspace-sdist",
        default=None,
        metavar="NAME==VERSION",
        help="tasks run in this PyPI sdist (needs --sha256 and --tree); default: the git parent commit",
    )
    parser.add_argument("--sha256", default=None, help="SHA-256 of the sdist's .tar.gz")
    parser.add_argument("--tree", default=None, help="the unpacked sdist tree, to map gold units into")


def cmd_mine(args: argparse.Namespace) -> int:
    """Mine the commits, print what each filter removed, write the task file."""
    repo, out = Path(args.repo), Path(args.out)
    sdist = args.workspace_sdist
    if sdist and not (args.sha256 and args.tree and re.fullmatch(r"[0-9a-f]{64}", args.sha256)):
        raise ConfigError("--workspace-sdist needs --sha256 (64 hex digits) and --tree (the unpacked sdist)")
    result = mine.mine(repo, args.revs, name=args.name)
    repo_ref = os.path.relpath(repo.resolve(), out.resolve().parent)
    if ".." in Path(repo_ref).parts and set(Path(repo_ref).parts) != {".."}:
        repo_ref = str(repo.resolve())  # neither holds the other: relative would only be fragile
    tasks = []
    missing = 0
    for task in result.tasks:
        if sdist:
            mapped = mine.remap(task, Path(args.tree))
            if mapped is None:
                missing += 1
                continue
            tasks.append(mapped.to_dict({"sdist": sdist, "sha256": args.sha256}, str(repo)))
        else:
            tasks.append(task.to_dict({"git": repo_ref, "rev": task.commit.parents[0]}, str(repo)))
    removed = ", ".join(f"{name} {result.removed[name]}" for name in mine.FILTERS if result.removed[name])
    print(f"{result.commits} commits; removed: {removed or 'none'}")
    if sdist:
        print(f"{missing} tasks dropped: a gold unit is not in the sdist tree {args.tree}")
    mine.write_tasks(out, tasks, suite=out.stem, split=args.split)
    print(f"{len(tasks)} tasks written to {out}")
    return 0
