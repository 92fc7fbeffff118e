"""CLI commands ``mine`` (a repository's history into a task file of ``localize`` tasks) and
``tasks merge`` (several task files into one)."""

from __future__ import annotations

import argparse
import hashlib
from pathlib import Path

from subagent_lab.bench.merge import merge_task_files
from subagent_lab.bench.mine_file import SdistTarget, mine_to_file
from subagent_lab.core.types import ConfigError


def args_mine(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("repo", help="a git work tree or bare git directory")
    parser.add_argument("--revs", default=None, help="revision range, e.g. v1.0..v1.1 (default: HEAD)")
    parser.add_argument("--name", default=None, help="id prefix (default: the repository's name)")
    parser.add_argument("--out", required=True, help="the task file to write (YAML)")
    parser.add_argument("--split", choices=["dev", "test"], default="dev")
    parser.add_argument(
        "--since", default=None, metavar="DATE", help="only commits from DATE (YYYY-MM-DD) on"
    )
    parser.add_argument("--max", type=int, default=None, metavar="N", help="read only the newest N commits")
    parser.add_argument(
        "--sample", type=int, default=None, metavar="N", help="write N of the kept tasks, drawn with --seed"
    )
    parser.add_argument("--seed", type=int, default=0, help="the --sample draw's seed (default 0)")
    parser.add_argument(
        "--workspace-sdist",
        default=None,
        metavar="NAME==VERSION",
        help="tasks run in this PyPI sdist (needs --sha256 and --tree); default: the git parent commit",
    )
    parser.add_argument("--sha256", default=None, help="SHA-256 of the sdist's .tar.gz")
    parser.add_argument("--tree", default=None, help="the unpacked sdist tree, to map gold units into")


def cmd_mine(args: argparse.Namespace) -> int:
    """Mine the commits, print what each filter removed and the gold warnings, write the task file."""
    sdist = None
    if args.workspace_sdist:
        if not (args.sha256 and args.tree):
            raise ConfigError(
                "--workspace-sdist needs --sha256 (64 hex digits) and --tree (the unpacked sdist)"
            )
        sdist = SdistTarget(args.workspace_sdist, args.sha256, Path(args.tree))
    mined = mine_to_file(
        args.repo,
        args.out,
        revs=args.revs,
        name=args.name,
        split=args.split,
        sdist=sdist,
        since=args.since,
        max_commits=args.max,
        sample=args.sample,
        seed=args.seed,
    )
    print(mined.summary())
    return 0


def cmd_tasks_merge(files: list[str], out: str | None) -> int:
    """``subagent-lab tasks merge A B ... -o C``: the tasks of A, B, ... in C, each once."""
    if not out:
        raise ConfigError("tasks merge needs -o FILE (the merged task file to write)")
    if not files:
        raise ConfigError("tasks merge needs the task files to merge")
    merged = merge_task_files([Path(f) for f in files], Path(out))
    print(merged.summary())
    return 0


def sweep_source(tasks: list[str] | None, out: str | None, config: str | None) -> str:
    """What ``sweep --tasks`` names: the one file or suite id given (default ``dev``), or for
    several files their merge, written once under the sweeps directory as
    ``tasks/merged-<digest>.yaml`` (the same files, the same path: a sweep resumes)."""
    if not tasks:
        return "dev"
    if len(tasks) == 1:
        return tasks[0]
    from subagent_lab.bench.suite import is_suite_id
    from subagent_lab.config.profiles import load_config

    ids = [t for t in tasks if is_suite_id(t)]
    if ids:
        raise ConfigError(f"sweep --tasks: built-in suites ({', '.join(ids)}) cannot be merged with files")
    digest = hashlib.sha256()
    for name in tasks:
        path = Path(name)
        try:
            digest.update(f"{path.resolve()}\0".encode() + path.read_bytes() + b"\0")
        except OSError as exc:
            raise ConfigError(f"sweep --tasks: cannot read {name}: {exc.strerror or exc}") from exc
    base = Path(out) if out else load_config(config).trace_root() / "sweeps"
    merged = base / "tasks" / f"merged-{digest.hexdigest()[:12]}.yaml"
    print(merge_task_files([Path(t) for t in tasks], merged).summary())
    return str(merged)
