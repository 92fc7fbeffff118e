"""What the parent's action-answer check does to recorded real parent runs, without a model.

A parent's free-text final answer that is, as a whole, one action object (``{"thought": ...,
"tool": "Grep", ...}``) is no longer accepted as the answer (``core.contracts.action_in_answer``;
the run gets a repair turn instead). This script applies that check to every parent answer the
delegation study recorded with the real models (``benchmarks/results/delegation.csv``, taken at
4074baa, before the check existed) and prints, per split and arm, how many answers it would have
refused, with a 95% interval on the share (Wilson score). What the repair turn would then have
produced cannot be known without running the models again.

Usage: python benchmarks/bench_action_answer.py [--rows benchmarks/results/delegation.csv]
       [--split dev]
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import pandas as pd

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
from subagent_lab.core.contracts import action_in_answer  # noqa: E402

PARENT_TOOLS = frozenset({"Read", "Grep", "Glob", "Edit", "Bash", "Task"})
"""The tools a main agent may hold (profiles.yaml, ``agents.main``): an action naming one of them."""


def wilson(hits: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """The Wilson score 95% interval of a share ``hits / n`` (sensible at 0 of n)."""
    if n == 0:
        return (0.0, 1.0)
    p = hits / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return (max(0.0, centre - half), min(1.0, centre + half))


def refused(answers: pd.Series) -> pd.Series:
    """Per answer: the tool its whole text calls (the check would refuse it), else ``""``."""
    return answers.fillna("").astype(str).map(lambda text: action_in_answer(text, PARENT_TOOLS) or "")


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--rows", type=Path, default=REPO / "benchmarks" / "results" / "delegation.csv")
    parser.add_argument("--split", default=None, help="dev or test (default: both, apart)")
    args = parser.parse_args()
    df = pd.read_csv(args.rows)
    if args.split:
        df = df[df["split"] == args.split]
    unrecorded = df[df["answer"].isna()]
    df = df[df["answer"].notna()]
    df = df.assign(refused=refused(df["answer"]))
    print(f"{args.rows.name}: {len(df)} recorded parent answers (real models, before the check)")
    for (split, arm), part in df.groupby(["split", "arm"], sort=True):
        hits = int((part["refused"] != "").sum())
        low, high = wilson(hits, len(part))
        tools = ", ".join(sorted(set(part["refused"]) - {""})) or "-"
        share = f"[{low:.2f}, {high:.2f}]"
        print(f"  {split:5s} {arm:17s} {hits:3d} of {len(part):3d} refused {share} tools: {tools}")
    hits = int((df["refused"] != "").sum())
    low, high = wilson(hits, len(df))
    print(f"  all: {hits} of {len(df)} answers would be refused, share 95% [{low:.2f}, {high:.2f}]")
    endings = ", ".join(f"{k} {v}" for k, v in unrecorded["terminal_reason"].value_counts().items())
    print(f"  not measured: {len(unrecorded)} runs whose row holds no answer ({endings or '-'})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
