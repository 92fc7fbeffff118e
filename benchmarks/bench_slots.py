"""Two runs at once on the embedded server's two slots against the same runs one at a time.

Reads two saved sweeps' rows (CSV, ``bench_explore.py --save`` or a subset of its columns): the
runs made with ``--workers 2`` (two runs in flight, each model served with ``server.parallel: 2``
slots on 2 threads) and the same run keys made with ``--workers 1``. For every run key in both it
prints the tokens (equal tokens: the same conversation, so the comparison is of speed alone) and
the wall time per run each way; then the estimated throughput: one at a time the wall is the sum
of the runs' times, two at a time about half the sum (two runs were always in flight).

Usage: python benchmarks/bench_slots.py TWO_AT_ONCE.csv ONE_AT_A_TIME.csv
"""

from __future__ import annotations

import sys

import pandas as pd


def compare(two: pd.DataFrame, one: pd.DataFrame) -> pd.DataFrame:
    """One row per run key present in both: tokens and wall time each way, and their ratio."""
    cols = ["run_key", "task_id", "scaffold", "total_tokens", "elapsed_s"]
    both = two[cols].merge(one[cols], on=["run_key", "task_id", "scaffold"], suffixes=(" two", " one"))
    both["same tokens"] = both["total_tokens two"] == both["total_tokens one"]
    both["ratio"] = both["elapsed_s two"] / both["elapsed_s one"]
    return both.drop(columns="run_key")


def main() -> int:
    if len(sys.argv) != 3:
        print(__doc__)
        return 2
    table = compare(pd.read_csv(sys.argv[1]), pd.read_csv(sys.argv[2]))
    if table.empty:
        print("no run key in both files")
        return 1
    print(table.round(2).to_string(index=False))
    same = table[table["same tokens"]]
    seq, par = same["elapsed_s one"].sum(), same["elapsed_s two"].sum() / 2
    print(
        f"\n{len(table)} runs in both, {len(same)} with the same tokens. Over those: median per-run "
        f"ratio {same['ratio'].median():.2f} (two at once / one at a time); wall one at a time "
        f"{seq / 60:.1f} min, two at once ~{par / 60:.1f} min (half the summed run times): "
        f"throughput x{seq / par:.2f}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
