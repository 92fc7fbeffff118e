"""Choose the fusion weight ``mix`` on mined dev without calling a model again: each ``rank`` run's
trace holds the P(yes) of every judged unit (``candidate_judged`` events), so the fused best four
can be recomputed for any ``mix`` (``core.judge.fused_order``, the rule ``RankStart`` applies) and
scored as the run's answer would be (its picks are the units the harness would cite and look up).

Prints, per model: function Acc@5 and unit recall@4 [bootstrap 95% CI] for each ``mix`` of
``MIXES`` (0: the retrieval's order, the floor; 1: the model's P(yes) alone), and each mix's paired
lift over ``mix = 0``; then how well each signal alone tells a gold candidate from the others of
its task (``discrimination``: within-task AUC, 0.5 = chance). The rule (docs/evaluation.md §7):
the mix with the highest function Acc@5 for main, provided light is not below its floor at it.

Usage: python benchmarks/bench_fusion.py ROWS.csv [--tasks mined-dev] [--sweep SWEEP_DIR]
(ROWS.csv: a sweep's or a bench's rows with ``task_id``, ``model_choice`` and ``trace_path``, of
runs under the ``rank`` or ``rank-explore`` preset on mined dev.)
"""

from __future__ import annotations

import argparse
from pathlib import Path

import pandas as pd

from subagent_lab.analysis.stats import mean_ci, paired_difference
from subagent_lab.bench.scoring import score_run
from subagent_lab.bench.suite import load_suite
from subagent_lab.bench.task import BenchTask
from subagent_lab.core.judge import fused_order
from subagent_lab.core.trace import CandidateJudged, read_trace

MIXES = (0.0, 0.25, 0.5, 0.75, 1.0)
CITED = 4
TEST_SPLITS = ("mined-test", "test", "test-tree")


JudgedRun = tuple[BenchTask, str, list[tuple[str, int, float]]]


def judged_runs(rows: pd.DataFrame, tasks: str, sweep: Path | None = None) -> list[JudgedRun]:
    """Each run with judged units: its task (with gold), its model and its ``(item, rank, P(yes))``
    triples from the trace's ``candidate_judged`` events. ``sweep``: the sweep directory a row's
    relative ``trace_path`` is under (rows keep paths relative to it)."""
    by_id = {t.id: t for t in load_suite(tasks)}
    out: list[JudgedRun] = []
    for _, row in rows.iterrows():
        task = by_id.get(str(row["task_id"]))
        trace = Path(str(row.get("trace_path") or ""))
        if sweep is not None and not trace.is_absolute():
            trace = sweep / trace
        if task is None or not task.gold or not trace.is_file():
            continue
        judged = [(e.item, e.rank, e.p_yes) for e in read_trace(trace) if isinstance(e, CandidateJudged)]
        if judged:
            out.append((task, str(row["model_choice"]), judged))
    return out


def _scores(task: BenchTask, evidence: list[str]) -> dict[str, object]:
    answer = {"status": "completed", "summary": task.prompt, "findings": [], "evidence": evidence}
    return score_run(task, answer, task.workspace_root()).model_dump()


def fusion_rows(runs: list[JudgedRun]) -> list[dict[str, object]]:
    """One row per run and mix: the re-fused answer's scores."""
    out: list[dict[str, object]] = []
    for task, model, judged in runs:
        for mix in MIXES:
            score = _scores(task, fused_order(judged, mix)[:CITED])
            out.append({
                "task_id": task.id, "model": model, "model_choice": f"mix={mix}",
                "func_acc_at5": score["func_acc_at5"], "unit_recall_at4": score["unit_recall_at4"],
            })  # fmt: skip
    return out


def judged_rows(runs: list[JudgedRun]) -> pd.DataFrame:
    """One row per judged candidate: task, model, retrieval rank, P(yes) and ``gold`` (1 where the
    candidate alone names a gold function, its function Acc@5)."""
    out = [
        {
            "task_id": task.id,
            "model": model,
            "rank": rank,
            "p_yes": p,
            "gold": _scores(task, [item])["func_acc_at5"],
        }
        for task, model, judged in runs
        for item, rank, p in judged
    ]
    return pd.DataFrame(out)


def discrimination(judged: pd.DataFrame, higher_is_gold: pd.Series) -> float:
    """Within-task AUC: over every (gold, other) pair of candidates of one task, the share where
    the gold one scores higher (ties count half); pooled over tasks. NaN without a pair."""
    wins = pairs = 0.0
    for _, part in judged.assign(score=higher_is_gold).groupby("task_id"):
        gold, other = part[part["gold"] > 0]["score"], part[part["gold"] <= 0]["score"]
        for g in gold:
            pairs += len(other)
            wins += float((other < g).sum()) + 0.5 * float((other == g).sum())
    return wins / pairs if pairs else float("nan")


def report_discrimination(judged: pd.DataFrame) -> None:
    for model, part in judged[~judged["model"].isin(["none", "retrieval"])].groupby("model", sort=True):
        tasks = part.groupby("task_id")["gold"].max()
        print(
            f"== {model}: discrimination on {int((tasks > 0).sum())} tasks with a gold candidate "
            f"({len(part)} judged, {part['gold'].mean():.3f} gold) =="
        )
        print(
            f"  within-task AUC of P(yes) {discrimination(part, part['p_yes']):.3f}; "
            f"of the retrieval's rank {discrimination(part, -part['rank']):.3f} (0.5: chance)"
        )
        print(f"  P(yes) mean {part['p_yes'].mean():.3f}, sd {part['p_yes'].std():.3f}")


def report(df: pd.DataFrame) -> None:
    for model, part in df.groupby("model", sort=True):
        print(f"== {model}: {part['task_id'].nunique()} tasks ==")
        for mix in MIXES:
            label = f"mix={mix}"
            mine = part[part["model_choice"] == label]
            acc, unit = mean_ci(mine, "func_acc_at5"), mean_ci(mine, "unit_recall_at4")
            line = f"  {label:9s} func Acc@5 {acc.mean:.3f} [{acc.low:.3f}, {acc.high:.3f}]"
            line += f"; unit recall@4 {unit.mean:.3f}"
            if mix:
                d = paired_difference(part, label, "mix=0.0", value="func_acc_at5")
                line += f"; − retrieval order {d.diff.mean:+.3f} [{d.diff.low:+.3f}, {d.diff.high:+.3f}]"
            print(line)


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("rows", help="a CSV of rank runs (task_id, model_choice, trace_path)")
    parser.add_argument("--tasks", default="mined-dev", help="the runs' task file or split (dev only)")
    parser.add_argument("--sweep", type=Path, default=None, help="the sweep directory of the rows' traces")
    args = parser.parse_args()
    if args.tasks in TEST_SPLITS or "test" in Path(args.tasks).stem:
        parser.error(f"{args.tasks}: a test split; mix is chosen on dev only")
    runs = judged_runs(pd.read_csv(args.rows), args.tasks, args.sweep)
    df = pd.DataFrame(fusion_rows(runs))
    if df.empty:
        print("no run with judged candidates (candidate_judged events) among the rows")
        return 1
    report(df)
    report_discrimination(judged_rows(runs))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
