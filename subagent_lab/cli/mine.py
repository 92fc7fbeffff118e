"""CLI command ``mine``: a repository's history into a task file of ``localize`` tasks."""

from __future__ import annotations

import argparse
from pathlib import Path

from subagent_lab.bench.mine_file import SdistTarget, mine_to_file
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
    sdist = None
    if args.workspace_sdist:
        if not (args.sha256 and args.tree):
            raise ConfigError(
                "--workspace-sdist needs --sha256 (64 hex digits) and --tree (the unpacked sdist)"
            )
        sdist = SdistTarget(args.workspace_sdist, args.sha256, Path(args.tree))
    mined = mine_to_file(args.repo, args.out, revs=args.revs, name=args.name, split=args.split, sdist=sdist)
    print(mined.summary())
    return 0
