"""The delegation study's table (issue 21), and parallel children on the embedded server.

Default: run (or resume) the study and print, per split, each cell's parent peak context and total
cost with 95% intervals, its answer-quality difference against ``alone`` with its interval, and
one plain sentence per cell: did delegation keep the parent's context smaller, at what quality.

    .venv/bin/python benchmarks/bench_delegation.py              # the study: ~3 h on 2 cores
    .venv/bin/python benchmarks/bench_delegation.py --baseline   # every model the no-model baseline: seconds
    .venv/bin/python benchmarks/bench_delegation.py --from runs/sweeps/delegation-<hash>   # print a study
    .venv/bin/python benchmarks/bench_delegation.py --from DIR --save benchmarks/results/delegation.csv
    .venv/bin/python benchmarks/bench_delegation.py --from benchmarks/results/delegation.csv   # the summary

``--parallel``: two explore children of one parent turn, on two server slots at once against the
same two one after the other (wall time, tokens, quality of each child's answer), with
``children_token_cap`` held across both (``experiments.delegation.run_children``). Rounds
alternate the order of the two modes; the call cache is off (a replay would time nothing).

    .venv/bin/python benchmarks/bench_delegation.py --parallel [--rounds 3] [--cap 60000] [--baseline]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import pandas as pd  # noqa: E402

from subagent_lab.experiments.delegation.table import (  # noqa: E402
    complete_tasks,
    fmt_ci,
    study_sentences,
    study_table,
)

COLUMNS = {"parent_peak_context": "parent peak context", "parent_tokens": "parent tokens",
           "children_tokens": "children tokens", "total_tokens": "total tokens",
           "total_cost_usd": "notional cost (USD)", "quality": "answer quality"}  # fmt: skip
TABLES = (
    ("context and quality", [("parent_peak_context", 0), ("quality", 2)]),
    ("cost", [("parent_tokens", 0), ("children_tokens", 0), ("total_tokens", 0), ("total_cost_usd", 5)]),
)
"""Two tables per split, each column with its difference from ``alone`` where it says something."""


def print_study(df: pd.DataFrame) -> None:
    """Per split: the tables of the issue's 'done when' (means over tasks with 95% intervals, each
    measure's difference from ``alone`` paired by task), then its sentences."""
    kept = complete_tasks(df)
    dropped = sorted(
        set(zip(df["split"], df["task_id"], strict=True))
        - set(zip(kept["split"], kept["task_id"], strict=True))
    )
    if dropped:
        print(f"left out, not run in every cell: {', '.join(f'{s}/{t}' for s, t in dropped)}")
    df = kept
    counts = df.groupby("split")["task_id"].nunique()
    print(f"tasks run in every cell: {', '.join(f'{split} {n}' for split, n in counts.items())}")
    for split in dict.fromkeys(df["split"]):
        table = study_table(df, split, COLUMNS)
        print(f"\n== {split}: means over tasks, 95% bootstrap intervals; Δ = cell − alone, paired by task ==")
        for title, columns in TABLES:
            width = 26
            names = [
                n
                for c, _ in columns
                for n in (COLUMNS[c], "Δ alone")
                if c != "children_tokens" or n != "Δ alone"
            ]
            print(f"-- {title}")
            print(f"{'cell':22} {'tasks':>5}  " + "  ".join(f"{n:>{width}}" for n in names))
            for _, r in table.iterrows():
                cells = []
                for column, digits in columns:
                    cells.append(fmt_ci(r[column], r[f"{column}_low"], r[f"{column}_high"], digits))
                    if column != "children_tokens":  # alone has no children: its Δ is the level
                        diff = f"{column}_diff"
                        cells.append(fmt_ci(r[diff], r[f"{diff}_low"], r[f"{diff}_high"], digits, sign=True))
                print(f"{r['cell']:22} {r['n']:>5}  " + "  ".join(f"{c:>{width}}" for c in cells))
        print_endings(df[df["split"] == split])
        for sentence in study_sentences(df, split):
            print(f"  {sentence}")
    served = sorted(set(df.get("parent_model_served", pd.Series(dtype=str)).dropna()))
    children = sorted(
        {
            m
            for v in df.get("children_models_served", pd.Series(dtype=str)).dropna()
            for m in str(v).split(",")
            if m
        }
    )
    print(f"\nserved models (as the server reported them): parents {served}, children {children}")
    crashed = int((df["terminal_reason"] == "crashed").sum()) if "terminal_reason" in df else 0
    print(f"runs: {len(df)}, crashed: {crashed}")


def print_endings(rows: pd.DataFrame) -> None:
    """Per cell: how the parent runs ended, how many cited anything, the mean number of cited
    locations and of children (exact counts over the rows)."""
    head = f"-- endings{'':14} {'terminal reasons':44} {'cited any':>10} {'mean cited':>11}"
    print(f"{head} {'mean children':>14}")
    for cell, group in rows.groupby("cell", sort=False):
        reasons = ", ".join(f"{k} {v}" for k, v in group["terminal_reason"].value_counts().items())
        cited = int((group["answer_evidence"] > 0).sum())
        print(f"{cell:24} {reasons:44} {cited:>5}/{len(group):<4} {group['answer_evidence'].mean():>11.1f} "
              f"{group['sub_agents'].mean():>14.1f}")  # fmt: skip


def load_study(source: str) -> pd.DataFrame:
    """A study's rows: from its directory (``results.jsonl``), or from a CSV written by ``--save``."""
    if source.endswith(".csv"):
        meta = Path(source).with_suffix(".meta.json")
        if meta.is_file():  # how the rows were taken, written beside them
            info = json.loads(meta.read_text())
            print(f"{info['runs']} runs in {info['wall_min']} min wall, {info['started_utc']} to "
                  f"{info['stopped_utc']}, commit {info['commit']}, T={info['temperature']}, "
                  f"{info['workers']} parent at a time; {info['machine']}")  # fmt: skip
        return pd.read_csv(source)
    from subagent_lab.experiments.rows import load_results

    return load_results(source)


def save(df: pd.DataFrame, path: str | None) -> None:
    """Write the rows a table is printed from (the committed summary docs/benchmarks.md cites)."""
    if path:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        df.sort_values(["split", "task_id", "cell", "repeat"]).to_csv(path, index=False)
        print(f"rows saved to {path} ({len(df)} runs)")


def run_parallel(args: argparse.Namespace) -> None:
    """Two children of one turn: at once on two slots, against one after the other."""
    from subagent_lab.agents.launcher import SubagentLauncher, SubagentRequest, SubagentResult
    from subagent_lab.agents.task_tool import TaskContext
    from subagent_lab.bench.scoring import context_from_trace, score_run
    from subagent_lab.bench.suite import load_suite
    from subagent_lab.config.profiles import load_config
    from subagent_lab.core.types import ModelChoice
    from subagent_lab.experiments.delegation import run_children

    lab = load_config(args.config)
    suite = [t for t in load_suite("dev") if t.kind != "absent"]
    package = suite[0].package
    tasks = [t for t in suite if t.package == package][:2]  # one parent's workspace: one package
    root = tasks[0].workspace_root()
    choice: ModelChoice = "none" if args.baseline else "main" if args.model == "main" else "light"
    if choice != "none":
        from subagent_lab.local_models.server import ensure_server

        ensure_server(lab)
    print(f"two children on {[t.id for t in tasks]} ({package}), model {choice}, server slots "
          f"{lab.server.parallel}, children_token_cap {args.cap}")  # fmt: skip
    figures: dict[str, list[dict[str, Any]]] = {"parallel": [], "sequential": []}
    for round_ in range(args.rounds):
        order = ["parallel", "sequential"] if round_ % 2 == 0 else ["sequential", "parallel"]
        for mode in order:
            launcher = SubagentLauncher(lab, root, trace_dir=Path(args.out))
            ctx = TaskContext(launcher=launcher, children_token_cap=args.cap)
            requests = [SubagentRequest(task=t.prompt, model=choice) for t in tasks]
            results, wall = run_children(ctx, requests, parallel=mode == "parallel")
            quality, tokens, refused = [], 0, 0
            for task, result in zip(tasks, results, strict=True):
                if not isinstance(result, SubagentResult):
                    refused += 1
                    continue
                tokens += result.usage.total_tokens
                context = context_from_trace(result.trace_path, require_seen=True)
                quality.append(score_run(task, result.contract, root, context=context).quality)
            assert ctx.children_tokens <= args.cap, "the cap was exceeded"
            figures[mode].append({"wall_s": wall, "tokens": tokens, "quality": quality, "refused": refused})
            print(f"  round {round_ + 1} {mode:10}: {wall:6.1f} s, {tokens:,} tokens, quality {quality}, "
                  f"refused by the cap {refused}")  # fmt: skip
    print(f"\n{'':12} {'median wall s':>14} {'mean tokens':>12} {'mean quality':>13}")
    for mode, rows in figures.items():
        walls = [r["wall_s"] for r in rows]
        qs = [q for r in rows for q in r["quality"]]
        tokens = statistics.mean(r["tokens"] for r in rows)
        mean_q = statistics.mean(qs) if qs else float("nan")
        print(f"{mode:12} {statistics.median(walls):>14.1f} {tokens:>12,.0f} {mean_q:>13.2f}")
    par = statistics.median(r["wall_s"] for r in figures["parallel"])
    seq = statistics.median(r["wall_s"] for r in figures["sequential"])
    print(f"parallel / sequential wall time: {par / seq:.2f}")
    print("(children launched at once each reserve their whole budget from the cap, so a cap below two")
    print(" budgets refuses or shrinks the second; one after the other, the second gets what the first left)")


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--from", dest="source", default=None,
                        help="print a study: its directory, or rows saved with --save (.csv)")  # fmt: skip
    parser.add_argument("--save", default=None, help="also write the study's rows to this CSV")
    parser.add_argument("--baseline", action="store_true", help="every model the no-model baseline")
    parser.add_argument("--tasks-per-split", type=int, default=10)
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument(
        "--workers", type=int, default=1, help="parent runs at once (default 1: see the CLI's STUDY_WORKERS)"
    )
    parser.add_argument("--out", default=None, help="sweeps directory (default: <trace_dir>/sweeps)")
    parser.add_argument("--config", default=None, help="profiles.yaml (default: the repository's)")
    parser.add_argument("--parallel", action="store_true", help="the parallel-children arm instead")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--cap", type=int, default=60000, help="children_token_cap across both children")
    parser.add_argument("--model", default="light", choices=["light", "main"])
    args = parser.parse_args()
    if args.parallel:
        args.out = args.out or str(REPO / "runs" / "bench-delegation-parallel")
        run_parallel(args)
        return 0
    if args.source:
        df = load_study(args.source)
        print_study(df)
        save(df, args.save)
        return 0
    from subagent_lab.experiments.delegation import DelegationSpec, run_study

    spec = DelegationSpec(tasks_per_split=args.tasks_per_split, repeats=args.repeats, baseline=args.baseline)
    df = run_study(spec, config_path=args.config, out_dir=args.out, workers=args.workers, progress=True)
    print(f"study: {df.attrs['study_dir']}")
    print_study(df)
    save(df, args.save)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
