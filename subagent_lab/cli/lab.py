"""CLI commands for experiments: ``run``, ``rerun``, ``report``, ``check``, ``schema``, ``tasks``,
``import-agent``, ``export`` (``sweep`` is ``cli.sweep``, ``mine`` is ``cli.mine``)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

if TYPE_CHECKING:
    from subagent_lab.agents.launcher import SubagentResult


def _parse_sets(items: list[str]) -> dict[str, Any]:
    """``--set max_steps=6`` pairs into profile overrides (values parsed as YAML scalars)."""
    overrides: dict[str, Any] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise SystemExit(f"--set expects key=value, got {item!r}")
        overrides[key.strip()] = yaml.safe_load(value)
    return overrides


MODEL_CHOICES = ("light", "main", "none", "retrieval")


def model_list(value: str) -> tuple[str, ...]:
    """``--models none,light``: comma-separated model choices, each checked (a usage error names it)."""
    models = tuple(m.strip() for m in value.split(",") if m.strip())
    unknown = [m for m in models if m not in MODEL_CHOICES]
    if unknown or not models:
        raise argparse.ArgumentTypeError(
            f"{', '.join(map(repr, unknown)) or 'nothing'}: not a model choice; choose from "
            f"{', '.join(MODEL_CHOICES)}, comma-separated"
        )
    return models


def args_run(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("task", help="what the sub-agent should find out")
    parser.add_argument("--workspace", default=".", help="the directory the child may read (default: .)")
    parser.add_argument("--profile", default="explore")
    parser.add_argument("--model", choices=MODEL_CHOICES, default=None, help="default: the profile's")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="profile override")


def cmd_run(args: argparse.Namespace) -> int:
    """Run one child and print its result, usage and trace path."""
    from subagent_lab.agents.launcher import SubagentLauncher, SubagentRequest
    from subagent_lab.config.profiles import load_config

    config = load_config(args.config)
    launcher = SubagentLauncher(config, Path(args.workspace))
    request = SubagentRequest(
        task=args.task, profile=args.profile, model=args.model, overrides=_parse_sets(args.set)
    )
    return _print_result(launcher.launch(request))


def args_rerun(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("trace", help="the trace (.jsonl) of the child run to run again")
    parser.add_argument("--model", choices=["light", "main"], default="main", help="default: main")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="profile override")
    parser.add_argument("--runs-dir", default=None, help="where the new trace goes (default: trace_dir)")


def cmd_rerun(args: argparse.Namespace) -> int:
    """Run a recorded child again from its recorded start (prompt, task, context, workspace)."""
    from subagent_lab.api.rerun import rerun

    overrides = _parse_sets(args.set)
    try:
        result = rerun(args.trace, args.model, config=args.config, runs_dir=args.runs_dir, **overrides)
    except (OSError, ValueError) as exc:  # no such file, not a child's trace (ConfigError: main())
        print(f"subagent-lab: error: {exc}", file=sys.stderr)
        return 2
    print(f"re-run of: {result.rerun_of}")
    return _print_result(result)


def _print_result(result: SubagentResult) -> int:
    print(f"status: {result.status}   terminal_reason: {result.terminal_reason}   model: {result.model_id}")
    if result.detail and result.status == "failed":
        print(f"detail: {result.detail}")
    print(json.dumps(result.contract, indent=2, ensure_ascii=False) if result.contract else "(no contract)")
    tools = ", ".join(f"{name} {counts}" for name, counts in result.tool_usage.items()) or "none"
    print(
        f"tokens: {result.usage.total_tokens} (prompt {result.usage.prompt_tokens}, completion "
        f"{result.usage.completion_tokens})  steps: {result.steps}  tools: {tools}  {result.elapsed_s:.1f}s"
    )
    print(f"trace: {result.trace_path}")
    return 0 if result.status != "failed" else 1


def args_report(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("sweep_dir", help="a sweep directory (the one holding results.jsonl)")
    parser.add_argument("-o", "--out", default=None, help="the HTML file (default: SWEEP_DIR/report.html)")


def cmd_report(args: argparse.Namespace) -> int:
    """Write a sweep's self-contained HTML report (tables, plots, every run step by step)."""
    import matplotlib

    matplotlib.use("Agg")
    from subagent_lab.api.report import write_report

    try:
        path = write_report(args.sweep_dir, args.out)
    except FileNotFoundError as exc:
        print(f"subagent-lab: error: {exc}", file=sys.stderr)
        return 2
    print(f"written: {path}")
    return 0


def cmd_check(args: argparse.Namespace) -> int:
    """Validate profiles.yaml and list its models and profiles."""
    from subagent_lab.config.profiles import load_config

    config = load_config(args.config)
    print(f"{config.source}: OK")
    for choice, model in config.models.items():
        where = (
            model.base_url or f"embedded server {config.server.base_url}" if model else "falls back to main"
        )
        print(f"  model {choice}: {model.model if model else '-'} ({where})")
    presets = ["plain", "base", *config.scaffolds]
    for name, p in config.profiles.items():
        preset = next((n for n in presets if config.scaffold(n).scaffold == p.scaffold), "its own")
        print(
            f"  profile {name}: tools={list(p.tools)} steps={p.max_steps} context={p.context_token_budget} "
            f"total={p.total_token_budget} model={p.model} contract={p.contract} scaffold={preset}"
        )
    for name in presets:
        policies = ", ".join(spec.policy for spec in config.scaffold(name).scaffold.policies)
        print(f"  scaffold {name}: {policies}")
    return 0


def args_schema(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--tasks", action="store_true", help="the task file's schema (docs/task-file.schema.json)"
    )


def cmd_schema(args: argparse.Namespace) -> int:
    """Print the JSON schema of profiles.yaml, or with ``--tasks`` of a task file (for editors)."""
    if getattr(args, "tasks", False):
        from subagent_lab.bench.suite import task_file_schema

        print(json.dumps(task_file_schema(), indent=2))
        return 0
    from subagent_lab.config.profiles import config_json_schema

    print(json.dumps(config_json_schema(), indent=2))
    return 0


def args_tasks(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "file", nargs="+", help="task files (YAML or JSONL) or built-in suite ids; 'merge A B -o C' merges"
    )
    parser.add_argument("-o", "--out", default=None, help="with merge: the merged task file to write")
    parser.add_argument(
        "--no-fetch", action="store_true", help="make no checkout and fetch no sdist (check what is there)"
    )
    parser.add_argument("--quiet", action="store_true", help="print one line per file, not every task")


def cmd_tasks(args: argparse.Namespace) -> int:
    """Load a task file, make its workspaces (git checkouts, sdists) and check its gold; list it."""
    from subagent_lab.bench.suite import validate_tasks

    if args.file[0] == "merge":  # a file named merge: ./merge
        from subagent_lab.cli.mine import cmd_tasks_merge

        return cmd_tasks_merge(args.file[1:], args.out)
    for file in args.file:
        tasks = validate_tasks(file, fetch=not args.no_fetch)
        for task in [] if args.quiet else tasks:
            gold = f"{len(task.gold)} gold" if task.scored else "not scored"
            print(f"{task.id:32} {task.kind:9} {task.split:4} {gold:10} {task.workspace.label}")
        print(f"{file}: {len(tasks)} tasks OK")
    return 0


def args_import_agent(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("file", help="a Claude Code, Gemini CLI, Codex or OpenCode agent file")
    parser.add_argument("--format", choices=["claude", "gemini", "codex", "opencode"], default=None)
    parser.add_argument("--base", default="explore", help="the profile it takes its budgets from")
    parser.add_argument("--json", action="store_true", help="print the profile and the report as JSON")


def cmd_import_agent(args: argparse.Namespace) -> int:
    """Print an agent file as a ``profiles.yaml`` entry, then what had no counterpart."""
    from subagent_lab.config.agent_files import import_agent
    from subagent_lab.config.profiles import load_config

    imported = import_agent(args.file, config=load_config(args.config), format=args.format, base=args.base)
    if args.json:
        print(imported.model_dump_json(indent=2))
        return 0
    print(f"# {imported.source} ({imported.format}) as a profile; budgets from {args.base!r}")
    print(imported.profile_yaml(), end="")
    for field, target in imported.mapped.items():
        print(f"# mapped: {field} -> {target}")
    for item in imported.unmapped:
        print(f"# no counterpart: {item.field} = {json.dumps(item.value, default=str)} ({item.why})")
    for note in imported.notes:
        print(f"# note: {note}")
    return 0


def args_export(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("source", help="a sweep directory, a directory of traces, or a trace file")
    parser.add_argument("--inspect", action="store_true", required=True, help="write an Inspect AI .eval log")
    parser.add_argument("-o", "--output", required=True, help="the .eval file to write")
    parser.add_argument("--task", default="subagent_lab", help="the task name the log shows")


def cmd_export(args: argparse.Namespace) -> int:
    """Write runs in another tool's format (``--inspect``: an Inspect AI ``.eval`` log)."""
    from subagent_lab.api.inspect_export import to_inspect

    try:
        path = to_inspect(args.source, args.output, task=args.task)
    except ImportError as exc:
        print(f"subagent-lab: error: {exc}", file=sys.stderr)
        return 2
    print(path)
    return 0
