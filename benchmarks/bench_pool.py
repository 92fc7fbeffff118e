"""The retrieval's candidate pool on mined dev, without a model: candidate recall@K (a gold unit
anywhere in the pool's first K units, the ceiling of any reranking) for K in (5, 10, 20, 40), and the
floor's function Acc@5 and unit recall@4 (its first four units cited by header line, as the
``retrieval`` floor and ``RetrievalStart`` cite them), each with its bootstrap 95% interval, per
retrieval variant, and each variant's paired difference from the one before it.

Variants (issue 49; docs/evaluation.md §7), each a change over the previous:

* ``prompt``: the whole prompt searched, body field only (the floor before issue 49);
* ``request``: the request alone (``query.request_of``), body field only;
* ``+name``: the unit's name as a BM25 field of its own (``NAME_FIELD_WEIGHT``);
* ``+path``: the file's path as a field of its own too (``PATH_FIELD_WEIGHT``);
* ``shipped``: the weights ``tools/symbols/search.py`` ships.

Identifier splitting (camelCase, snake_case, on both sides) and library before tests/docs are in
every variant: they were in the search before this issue (``terms.py``, ``ranked_units``).

Mined dev only: the script refuses a test split (the pool size and weights are chosen on it).
No model, one process, CPU only: run it once per change, not in a loop.

Usage: python benchmarks/bench_pool.py [--tasks mined-dev] [--limit N] [--save FILE.csv] [--from FILE.csv]
"""

from __future__ import annotations

import argparse
import itertools
import time
from pathlib import Path

import pandas as pd
from saved_rows import add_save_from, save_rows

from subagent_lab.analysis.stats import mean_ci, paired_difference
from subagent_lab.bench.pool import candidate_hit
from subagent_lab.bench.scoring import score_run
from subagent_lab.bench.suite import load_suite
from subagent_lab.tools.symbols import search
from subagent_lab.tools.symbols.index import index_for
from subagent_lab.tools.symbols.retrieve import retrieve
from subagent_lab.workspace.sandbox import Workspace

KS = (5, 10, 20, 40)
CITED = 4
"""Units the floor cites (the models' ``max_evidence``)."""
SHIPPED = (search.NAME_FIELD_WEIGHT, search.PATH_FIELD_WEIGHT)
VARIANTS: tuple[tuple[str, bool, float, float], ...] = (
    ("prompt", False, 0.0, 0.0),
    ("request", True, 0.0, 0.0),
    ("+name", True, 1.0, 0.0),
    ("+path", True, 1.0, 0.5),
    ("shipped", True, *SHIPPED),
)
"""``(label, search the request, name weight, path weight)``."""
TEST_SPLITS = ("mined-test", "test", "test-tree")


def task_rows(task_source: str, limit: int | None) -> list[dict[str, object]]:
    """One row per task and variant: recall@K for each K, the floor's Acc@5 and unit recall@4."""
    tasks = [t for t in load_suite(task_source) if t.gold][:limit]
    rows: list[dict[str, object]] = []
    for task in tasks:
        root = task.workspace_root()
        index = index_for(Workspace(root))
        for label, by_request, name_w, path_w in VARIANTS:
            search.NAME_FIELD_WEIGHT, search.PATH_FIELD_WEIGHT = name_w, path_w
            started = time.monotonic()
            text = None if by_request else " ".join(task.prompt.split())
            pool = retrieve(task.prompt, index, max(KS), shown=max(KS), request=text)
            spans = [(u.rel, u.unit.start, u.unit.end) for u in pool]
            answer = {"status": "completed", "summary": task.prompt, "findings": [],
                      "evidence": [u.item for u in pool[:CITED]]}  # fmt: skip
            score = score_run(task, answer, root).model_dump()
            rows.append({
                "task_id": task.id, "model_choice": label, "elapsed_s": time.monotonic() - started,
                "func_acc_at5": score["func_acc_at5"], "unit_recall_at4": score["unit_recall_at4"],
                "file_acc_at5": score["file_acc_at5"],
                **{f"recall_at{k}": candidate_hit(task, root, spans[:k]) for k in KS},
            })  # fmt: skip
    search.NAME_FIELD_WEIGHT, search.PATH_FIELD_WEIGHT = SHIPPED
    return rows


def report(df: pd.DataFrame) -> None:
    """Each variant's means [95% CI], then its paired difference from the previous variant."""
    columns = [*(f"recall_at{k}" for k in KS), "func_acc_at5", "unit_recall_at4", "file_acc_at5"]
    labels = list(dict.fromkeys(df["model_choice"]))
    print(f"{df['task_id'].nunique()} tasks; means [bootstrap 95% CI]")
    for label in labels:
        mine = df[df["model_choice"] == label]
        cells = []
        for column in columns:
            ci = mean_ci(mine, column)
            cells.append(f"{column} {ci.mean:.3f} [{ci.low:.3f}, {ci.high:.3f}]")
        print(f"  {label:8s} " + "; ".join(cells))
    print("paired differences from the previous variant [95% CI] (W/L/T)")
    for before, after in itertools.pairwise(labels):
        cells = []
        for column in ("recall_at10", "recall_at20", "func_acc_at5", "unit_recall_at4"):
            d = paired_difference(df, after, before, value=column)
            interval = f"{d.diff.mean:+.3f} [{d.diff.low:+.3f}, {d.diff.high:+.3f}]"
            cells.append(f"{column} {interval} ({d.wins}/{d.losses}/{d.ties})")
        print(f"  {after} − {before}: " + "; ".join(cells))


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--tasks", default="mined-dev", help="a dev split or task file (never a test split)")
    parser.add_argument("--limit", type=int, default=None, help="the first N tasks with gold")
    add_save_from(parser)
    args = parser.parse_args()
    if args.source:
        report(pd.read_csv(args.source))
        return 0
    if args.tasks in TEST_SPLITS or "test" in Path(args.tasks).stem:
        parser.error(f"{args.tasks}: a test split; the pool and the weights are chosen on dev only")
    started = time.monotonic()
    df = pd.DataFrame(task_rows(args.tasks, args.limit))
    print(f"{len(df)} rows in {(time.monotonic() - started) / 60:.1f} min, no model, one process")
    save_rows(df, args.save)
    report(df)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
