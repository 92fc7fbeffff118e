"""The explore child on the benchmark suite: the issue-9 targets, measured on real runs.

Runs a real sweep (no call cache) of ``--suite`` x ``--models`` x ``--repeats`` on the embedded
models and prints, per model: completed-with-grounded-evidence on locate tasks, mean quality over
all tasks with its spread over repeats, contract validity, action calls cut at their cap, the
median action output, the median wall time per run, and the terminal reasons. Every figure is
computed from the sweep's rows and the runs' traces (``subagent_lab.analysis.metrics``).

"Completed with grounded evidence": status ``completed``, at least one evidence item, and every
item grounded (the cited file and lines exist) and seen (a tool showed those lines to the child).

Usage: python benchmarks/bench_explore.py [--suite all] [--models light,main] [--repeats 3]
       [--workers 2] [--temperature 0.3] [--set key=value ...] [--out DIR]
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path
from typing import Any

import pandas as pd
import yaml

from subagent_lab.analysis.metrics import child_metrics
from subagent_lab.core.trace import read_trace
from subagent_lab.experiments.sweep import SweepSpec, Variant, run_sweep

TARGETS = {
    "light": {"locate_ok": 0.40, "quality": 0.30, "wall": 25.0},
    "main": {"locate_ok": 0.70, "quality": 0.50, "wall": 60.0},
}


def grounded_completion(row: pd.Series) -> bool:
    return bool(
        row["status"] == "completed"
        and (row.get("evidence_count") or 0) > 0
        and row.get("grounded_ratio") == 1.0
        and row.get("seen_ratio") == 1.0
    )


def model_report(df: pd.DataFrame) -> dict[str, Any]:
    """The issue-9 figures of one model's rows (and their traces)."""
    metrics = [
        child_metrics(read_trace(p)) for p in df["trace_path"] if isinstance(p, str) and Path(p).exists()
    ]
    actions = [t for m in metrics for t in m.action_tokens]
    per_repeat = df.groupby("repeat")["quality"].mean()
    locate = df[df["kind"] == "locate"]
    return {
        "runs": len(df),
        "locate_ok": float(locate.apply(grounded_completion, axis=1).mean()) if len(locate) else float("nan"),
        "quality": float(df["quality"].mean()),
        "quality_repeats": [round(float(q), 3) for q in per_repeat],
        "contract_valid": float(df["contract_valid"].mean()),
        "actions": len(actions),
        "actions_cut": sum(m.actions_cut for m in metrics),
        "median_action_tokens": statistics.median(actions) if actions else float("nan"),
        "median_wall_s": float(df["elapsed_s"].median()),
        "reasons": df["terminal_reason"].value_counts().to_dict(),
        "by_kind": {str(k): round(float(q), 2) for k, q in df.groupby("kind")["quality"].mean().items()},
        "absent_said": int(df[df["kind"] == "absent"]["admits_absence"].fillna(False).astype(bool).sum()),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--suite", default="all")
    parser.add_argument("--models", default="light,main")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--temperature", type=float, default=None, help="sample (independent repeats)")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--name", default="bench-explore")
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    overrides = {k: yaml.safe_load(v) for k, _, v in (s.partition("=") for s in args.set)}
    spec = SweepSpec(
        name=args.name,
        tasks=tuple(args.suite.split(",")),
        models=tuple(args.models.split(",")),  # type: ignore[arg-type]
        variants=(Variant(label="cli" if overrides else "default", overrides=overrides),),
        repeats=args.repeats,
        temperature=args.temperature,
    )
    started = time.monotonic()
    df = run_sweep(spec, out_dir=args.out, max_workers=args.workers, cache=False)
    wall = time.monotonic() - started
    print(f"\n{len(df)} runs in {wall / 60:.1f} min ({len(df) / wall * 3600:.0f} runs/hour), "
          f"{args.workers} workers, temperature {args.temperature}")  # fmt: skip
    header = f"{'model':<6} {'runs':>4} {'locate ok':>9} {'quality':>8} {'spread over repeats':>22} "
    print(header + f"{'valid':>6} {'cut':>7} {'med act':>7} {'med wall':>8}  terminal reasons")
    for model, rows in df.groupby("model_used"):
        r = model_report(rows)
        repeats = r["quality_repeats"]
        spread = (  # min/median/max of the repeats' mean quality; one repeat has no spread
            f"{min(repeats):.2f}/{statistics.median(repeats):.2f}/{max(repeats):.2f}"
            if len(repeats) > 1
            else "n/a (1 repeat)"
        )
        print(
            f"{model:<6} {r['runs']:>4} {r['locate_ok']:>9.0%} {r['quality']:>8.2f} {spread:>22} "
            f"{r['contract_valid']:>6.0%} {r['actions_cut']:>3}/{r['actions']:<3} "
            f"{r['median_action_tokens']:>7.0f} "
            f"{r['median_wall_s']:>7.1f}s  {r['reasons']}"
        )
        print(f"    quality by kind: {r['by_kind']}; absent tasks answered 'not there': {r['absent_said']}")
        goal = TARGETS.get(str(model))
        if goal:
            checks = [
                ("locate ok", r["locate_ok"], goal["locate_ok"], ">="),
                ("mean quality", r["quality"], goal["quality"], ">="),
                ("contract valid", r["contract_valid"], 0.95, ">="),
                ("median action tokens", r["median_action_tokens"], 80, "<="),
                ("median wall s", r["median_wall_s"], goal["wall"], "<="),
                ("actions cut", r["actions_cut"], 0, "<="),
            ]
            for name, value, target, op in checks:
                met = value >= target if op == ">=" else value <= target
                print(f"    {name:<22} {value:8.2f} target {op} {target:<6} {'met' if met else 'MISSED'}")
    paired = df.pivot_table(index=["task_id", "repeat"], columns="model_used", values="quality").dropna()
    if {"light", "main"} <= set(paired.columns) and len(paired):
        wins = int((paired["main"] > paired["light"]).sum())
        losses = int((paired["main"] < paired["light"]).sum())
        print(
            f"\npaired on {len(paired)} task runs both models finished: light {paired['light'].mean():.2f}, "
            f"main {paired['main'].mean():.2f}; main better on {wins}, worse on {losses}, "
            f"tied on {len(paired) - wins - losses}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
