"""CLI commands for experiments: ``run``, ``rerun``, ``sweep``, ``report``, ``check``, ``schema``,
``tasks``."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from subagent_lab.core.types import ConfigError

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


def args_sweep(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--tasks",
        default=None,
        nargs="+",
        metavar="FILE",
        help="a task file (docs/task-files.md) or a built-in suite id (dev, dev-tree, test); several "
        "files are merged (tasks merge); default: dev, or with a file --suite defaults to 'all'",
    )
    parser.add_argument(
        "--suite", default=None, help="task ids, 'smoke', 'all' or a kind, comma-separated (default: smoke)"
    )
    parser.add_argument(
        "--models",
        type=model_list,
        default=("none", "retrieval", "light", "main"),
        help="comma-separated model choices ('none': the no-model baseline, 'retrieval': the retrieval "
        "floor; floors cost no model time)",
    )
    parser.add_argument(
        "--scaffold",
        default="retrieval-start",
        help="scaffold presets, comma-separated (profiles.yaml: scaffolds; 'plain' built in); "
        "'profile' runs each model with the profile as written, its own tuning included",
    )
    parser.add_argument("--profile", default="explore")
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument(
        "--workers",
        type=int,
        default=None,
        help="runs in parallel (default 1 when a language model runs: temperature-0 repeats then decode "
        "alike on one server; 2 for floors only; with --study 1: a delegated run uses both model servers)",
    )
    parser.add_argument("--name", default="cli")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="profile override")
    parser.add_argument("--no-cache", action="store_true", help="do not reuse recorded model calls")
    parser.add_argument(
        "--cluster", default=None, metavar="ADDRESS", help="run on a Dask scheduler (tcp://host:8786)"
    )
    parser.add_argument(
        "--storage", default=None, metavar="URL", help="with --cluster: fsspec URL workers write traces to"
    )
    where = parser.add_mutually_exclusive_group()
    where.add_argument(
        "--out",
        default=None,
        help="the sweeps directory: the sweep goes to OUT/<name>-<hash> (default: <trace_dir>/sweeps)",
    )
    where.add_argument(
        "--runs-dir",
        default=None,
        help="the runs directory: the sweep goes to RUNS_DIR/sweeps/<name>-<hash>, as "
        "sl.sweep(runs_dir=RUNS_DIR) puts it",
    )
    parser.add_argument(
        "--study",
        choices=["delegation"],
        default=None,
        help="a preset study instead of a grid: 'delegation' (issue 21: dev and test, the four arms and "
        "three context modes; --tasks-per-split, --repeats, --workers, --out, --no-cache, --cluster, "
        "--storage apply)",
    )
    parser.add_argument("--tasks-per-split", type=int, default=10, help="with --study (default 10)")
    parser.add_argument(
        "--baseline", action="store_true", help="with --study: every model the no-model baseline"
    )


def cmd_sweep(args: argparse.Namespace) -> int:
    """Run (or resume) a sweep and print its tables; also writes results.csv, summary.csv and a plot."""
    if args.study == "delegation":
        return _cmd_delegation(args)
    import pandas as pd

    from subagent_lab.analysis.summary import headline, summarize, terminal_reasons
    from subagent_lab.bench.suite import is_suite_id
    from subagent_lab.config.profiles import load_config
    from subagent_lab.experiments.grid import run_grid
    from subagent_lab.experiments.sweep import (
        SweepGrid,
        SweepSpec,
        Variant,
        sweep_estimate,
        sweep_workers,
        with_give_up,
    )

    overrides = _parse_sets(args.set)
    from subagent_lab.cli.mine import sweep_source

    source = sweep_source(args.tasks, args.out, args.config)
    split = source if is_suite_id(source) else str(Path(source).resolve())
    chosen = args.suite or ("smoke" if is_suite_id(source) else "all")
    selectors = tuple(t.strip() for t in chosen.split(","))
    for selector in selectors:
        if is_suite_id(selector) or Path(selector).suffix in (".yaml", ".yml", ".jsonl"):
            what = "a built-in suite" if is_suite_id(selector) else "a task file"
            raise ConfigError(
                f"--suite {selector}: --suite picks task ids, 'smoke', 'all' or a kind; {selector!r} is "
                f"{what}: pass it as --tasks {selector}"
            )
    spec = SweepSpec(
        name=args.name,
        split=split,
        tasks=tuple(t for t in selectors if t),
        models=args.models,
        profile=args.profile,
        variants=(Variant(label="custom" if overrides else "default", overrides=overrides),),
        scaffolds=tuple(s for s in (x.strip() for x in args.scaffold.split(",")) if s and s != "profile"),
        repeats=args.repeats,
    )
    grid = SweepGrid(spec, cache=not args.no_cache)
    workers = args.workers or sweep_workers(spec)
    for line in sweep_estimate(spec, workers, grid.tasks):  # before anything starts
        print(line)
    df = run_grid(
        grid,
        load_config(args.config),
        out_dir=sweeps_dir(args),
        max_workers=workers,
        cluster=args.cluster,
        storage=args.storage,
        on_start=lambda out: print(f"sweep {spec.name}-{spec.key()} -> {out}"),
    )
    out = Path(df.attrs["grid_dir"])
    df = with_give_up(df, grid.tasks, spec.split)  # the absent tasks' floor, beside them
    from subagent_lab.analysis.fields import field_table
    from subagent_lab.analysis.headline import (
        floor_sentences,
        lead_sentences,
        lift_table,
        readable,
        readable_lift,
    )
    from subagent_lab.experiments.rows import relative_table

    with pd.option_context("display.width", 200, "display.max_columns", 30, "display.max_colwidth", 40):
        print("\nComparisons (paired by task; 95% bootstrap intervals):")
        for sentence in lead_sentences(df) or ["(no two models ran on the same tasks)"]:
            print(f"  {sentence}")
        for sentence in floor_sentences(df):
            print(f"  {sentence}")
        lift = lift_table(df)
        print(
            "\nQuality, lift over the no-model baseline and over the strongest floor "
            "(same tasks, same scaffold):"
        )
        print(readable_lift(lift).to_string(index=False))
        fields = field_table(df)
        if not fields.empty:
            print("\nLocalization (Acc@k over the first k items; 95% bootstrap intervals; no-leak: tasks")
            print("whose prompt names no gold unit, leaks: how many do):")
            print(fields.to_string(index=False))
        print("\nRuns:")
        print(readable(headline(df)).to_string(index=False))
        summary = summarize(df)
        print("\nBy model:")
        print(readable(summary).to_string(index=False))
        print("\nTerminal reasons (share of runs):")
        print(readable(terminal_reasons(df)).to_string(index=False))
    relative_table(df, out).to_csv(out / "results.csv", index=False)
    summary.to_csv(out / "summary.csv", index=False)
    lift.to_csv(out / "lift.csv", index=False)
    _save_plot(df, out / "terminal_reasons.png")
    print(f"\nwritten: {out / 'results.csv'}, summary.csv and terminal_reasons.png beside it")
    return 0


def sweeps_dir(args: argparse.Namespace) -> Path | None:
    """The sweeps directory ``--out`` or ``--runs-dir`` names (None: ``<trace_dir>/sweeps``)."""
    if args.out:
        return Path(args.out)
    return Path(args.runs_dir) / "sweeps" if args.runs_dir else None


STUDY_WORKERS = 1
"""Parent runs at once in the delegation study. One: a delegating parent runs on main and its
children on light, two server processes; two parents at once keep both busy on 2 cores and got
through fewer tokens a minute than one (docs/evaluation.md, section 6)."""


def _cmd_delegation(args: argparse.Namespace) -> int:
    """The delegation study, resumable: its rows, one table per split, its sentences and its plot."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import pandas as pd

    from subagent_lab.config.profiles import load_config
    from subagent_lab.experiments.delegation import StudyGrid
    from subagent_lab.experiments.delegation.plan import DelegationSpec
    from subagent_lab.experiments.delegation.table import (
        plot_quality_vs_context,
        readable_study,
        study_sentences,
        study_table,
    )
    from subagent_lab.experiments.grid import run_grid

    spec = DelegationSpec(tasks_per_split=args.tasks_per_split, repeats=args.repeats, baseline=args.baseline)
    df = run_grid(StudyGrid(spec, cache=not args.no_cache), load_config(args.config),
                  out_dir=sweeps_dir(args), max_workers=args.workers or STUDY_WORKERS, cluster=args.cluster,
                  storage=args.storage,
                  on_start=lambda out: print(f"study {spec.name}-{spec.key()} -> {out}"))  # fmt: skip
    out = Path(df.attrs["grid_dir"])
    with pd.option_context("display.width", 250, "display.max_columns", 30):
        for split in dict.fromkeys(df["split"]):
            print(f"\n{split} (means over tasks, 95% bootstrap intervals; Δ alone paired by task):")
            print(readable_study(study_table(df, split)).to_string(index=False))
            for sentence in study_sentences(df, split):
                print(f"  {sentence}")
    df.to_csv(out / "results.csv", index=False)
    ax = plot_quality_vs_context(df)
    ax.figure.tight_layout()
    ax.figure.savefig(out / "quality_vs_context.png", dpi=110)
    plt.close(ax.figure)
    print(f"\nwritten: {out / 'results.csv'} and quality_vs_context.png beside it")
    return 0


def _save_plot(df: Any, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from subagent_lab.analysis.summary import plot_terminal_reasons

    ax = plot_terminal_reasons(df)
    ax.figure.tight_layout()
    ax.figure.savefig(path, dpi=110)
    plt.close(ax.figure)


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
