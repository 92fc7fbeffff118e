"""CLI command ``sweep``: a sweep of task files or suites over models and scaffolds (or the
delegation study), its estimate first, then its tables and plot."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from subagent_lab.cli.lab import _parse_sets, model_list
from subagent_lab.core.types import ConfigError


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
        default="rank",
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
