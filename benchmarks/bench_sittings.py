"""One scaffold (or two) across two saved sweeps: the paired difference per model, task by task.

``bench_explore.py --contrast A:B`` compares two scaffolds of one table. When the same scaffold
ran at two commits (a code change between sittings), both tables name it alike; this prints
``A − B`` for each model both hold, paired by task, with the bootstrap 95% interval and W/L/T
(``analysis.stats.paired_difference``), the same statistic the other tables use. Runs nothing.
Rows of different sittings differ by the code change and by the server's run-to-run noise at
temperature 0 (small, but seen: one absent task flipped between two sittings of the same code).

Usage: python benchmarks/bench_sittings.py A.csv[,A2.csv]:scaffold B.csv:scaffold [--split dev]
(several CSVs for one arm are pooled: sittings of one code over different tasks)
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pandas as pd

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from subagent_lab.analysis.stats import paired_difference  # noqa: E402


def arm(spec: str, label: str, split: str | None) -> pd.DataFrame:
    """The rows of ``path[,path...]:scaffold`` (on ``split`` when given), labelled ``label``."""
    path, _, scaffold = spec.rpartition(":")
    rows = pd.concat([pd.read_csv(p) for p in path.split(",")])
    rows = rows[rows["scaffold"] == scaffold]
    if split:
        rows = rows[rows["split"] == split]
    if rows.empty:
        raise SystemExit(f"{path}: no rows of scaffold {scaffold!r}" + (f" on {split}" if split else ""))
    return rows.assign(arm=label)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("a", help="CSV:scaffold, the first arm")
    parser.add_argument("b", help="CSV:scaffold, the arm subtracted")
    parser.add_argument("--split", default=None)
    args = parser.parse_args()
    both = pd.concat([arm(args.a, "A", args.split), arm(args.b, "B", args.split)])
    print(f"A = {args.a}\nB = {args.b}")
    for model in sorted(set(both["model_choice"])):
        rows = both[both["model_choice"] == model]
        if set(rows["arm"]) != {"A", "B"}:
            continue
        d = paired_difference(rows, "A", "B", arm="arm")
        print(
            f"  {model:12} A − B = {d.diff.mean:+.2f} [{d.diff.low:+.2f}, {d.diff.high:+.2f}] "
            f"({d.a_mean:.2f} vs {d.b_mean:.2f}; {d.diff.n} tasks; W/L/T {d.wins}/{d.losses}/{d.ties})"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
