"""The delegation study's table (issue 21), and parallel children on the embedded server.

Default: run (or resume) the study and print, per split, each cell's parent peak context and total
cost with 95% intervals, its answer-quality difference against ``alone`` with its interval, and
one plain sentence per cell: did delegation keep the parent's context smaller, at what quality.

    .venv/bin/python benchmarks/bench_delegation.py              # the study: ~3 h of model time, 2 cores
    .venv/bin/python benchmarks/bench_delegation.py --baseline   # every model the no-model baseline: seconds
    .venv/bin/python benchmarks/bench_delegation.py --from runs/sweeps/delegation-<hash>   # print a study

``--parallel``: two explore children of one parent turn, on two server slots at once against the
same two one after the other (wall time, tokens, quality of each child's answer), with
``children_token_cap`` held across both (``experiments.delegation.run_children``). Rounds
alternate the order of the two modes; the call cache is off (a replay would time nothing).

    .venv/bin/python benchmarks/bench_delegation.py --parallel [--rounds 3] [--cap 60000] [--baseline]
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import pandas as pd  # noqa: E402

from subagent_lab.experiments.delegation_table import study_sentences, study_table  # noqa: E402

COLUMNS = {"parent_peak_context": "parent peak context", "total_cost_usd": "total cost (USD)",
           "total_tokens": "total tokens", "quality": "answer quality"}  # fmt: skip


def _cell(value: float, low: float, high: float, digits: int, sign: bool = False) -> str:
    if value != value:  # nan
        return "–"
    spec = f"{'+' if sign else ''},.{digits}f"
    return f"{value:{spec}} [{low:{spec}}, {high:{spec}}]" if low == low else f"{value:{spec}}"


def print_study(df: pd.DataFrame) -> None:
    """Per split: the table of the issue's 'done when', then its sentences."""
    for split in dict.fromkeys(df["split"]):
        table = study_table(df, split, COLUMNS)
        print(f"\n== {split}: means over tasks, 95% bootstrap intervals; Δ = cell − alone, paired by task ==")
        header = f"{'cell':24} {'tasks':>5}  {'parent peak context':>24}  {'Δ alone':>26}  "
        header += f"{'total cost (USD)':>28}  {'quality':>20}  {'quality Δ alone':>22}"
        print(header)
        for _, r in table.iterrows():

            def ci(column: str, digits: int, sign: bool = False, row: Any = r) -> str:
                return _cell(row[column], row[f"{column}_low"], row[f"{column}_high"], digits, sign)

            print(
                f"{r['cell']:24} {r['n']:>5}  {ci('parent_peak_context', 0):>24}  "
                f"{ci('parent_peak_context_diff', 0, True):>26}  {ci('total_cost_usd', 5):>28}  "
                f"{ci('quality', 2):>20}  {ci('quality_diff', 2, True):>22}"
            )
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
    parser.add_argument("--from", dest="source", default=None, help="print a finished study directory")
    parser.add_argument("--baseline", action="store_true", help="every model the no-model baseline")
    parser.add_argument("--tasks-per-split", type=int, default=10)
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--workers", type=int, default=2, help="parent runs at once (default 2: the slots)")
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
        from subagent_lab.experiments.rows import load_results

        print_study(load_results(args.source))
        return 0
    from subagent_lab.experiments.delegation import DelegationSpec, run_study

    spec = DelegationSpec(tasks_per_split=args.tasks_per_split, repeats=args.repeats, baseline=args.baseline)
    df = run_study(spec, config_path=args.config, out_dir=args.out, workers=args.workers, progress=True)
    print(f"study: {df.attrs['study_dir']}")
    print_study(df)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
