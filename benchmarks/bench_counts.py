"""Pre-call prompt counts vs the provider's reported prompt tokens, per model, from real traces.

Reads every trace of a sweep directory (default: the newest under ``runs/sweeps``) and prints,
per model, the ratio of the loop's pre-call count (``prompt_tokens_est``, which decides admission)
to the ``usage.prompt_tokens`` the server then reported, over every call that was not a cache
replay or a retry. For the embedded models the goal is exactly 1.00 on every call.

Usage: python benchmarks/bench_counts.py [SWEEP_DIR]
"""

from __future__ import annotations

import argparse
import statistics
from collections import defaultdict
from pathlib import Path

from subagent_lab.analysis.metrics import child_metrics
from subagent_lab.core.trace import RunStarted, read_trace


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("sweep_dir", nargs="?", default=None)
    args = parser.parse_args()
    if args.sweep_dir:
        sweep = Path(args.sweep_dir)
    else:
        sweeps = sorted(Path("runs/sweeps").glob("*/"), key=lambda p: p.stat().st_mtime)
        if not sweeps:
            raise SystemExit("no sweep directory under runs/sweeps; run benchmarks/bench_explore.py first")
        sweep = sweeps[-1]
    pairs: dict[str, list[tuple[int, int]]] = defaultdict(list)
    exact: dict[str, set[bool]] = defaultdict(set)
    for path in sweep.glob("traces/**/*.jsonl"):
        events = read_trace(path)
        start = next((e for e in events if isinstance(e, RunStarted)), None)
        model = start.model_id if start else "unknown"
        pairs[model] += child_metrics(events).prompt_count_pairs
        exact[model] |= {e.prompt_exact for e in events if getattr(e, "kind", "") == "model_called"}
    print(f"sweep: {sweep}")
    print(f"{'model':<22} {'calls':>6} {'exact':>6} {'ratio min':>9} {'median':>7} {'max':>6} {'equal':>7}")
    for model, items in sorted(pairs.items()):
        ratios = [counted / reported for counted, reported in items if reported > 0]
        if not ratios:
            continue
        equal = sum(c == r for c, r in items)
        print(
            f"{model:<22} {len(ratios):>6} {exact[model] == {True}!s:>6} {min(ratios):>9.3f} "
            f"{statistics.median(ratios):>7.3f} {max(ratios):>6.3f} {equal:>4}/{len(items)}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
