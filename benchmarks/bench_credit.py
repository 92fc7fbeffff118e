"""The per-child credit table of the delegation study (issue 40): what each child contributed to
its parent's answer, and what finding out cost.

Records (or resumes) a small delegation study — the study's parent profile and budgets, cells
``delegate-light`` and ``delegate-main``, the call cache on — then replays each delegating parent
once with nothing swapped (the identity check: 0 cache misses) and once per child and swap, that
child swapped to the no-model floor (``none``) and to the other model (light <-> main), every other
call served from the recording. Each replayed answer is scored as the study scores it
(``score_parent``'s quality); a child's contribution is the recorded score less the swapped one.
Credit rows are written to ``<study dir>/credit.jsonl`` as each parent finishes: a stopped run
resumes where it stopped, recording and replays alike.

    .venv/bin/python benchmarks/bench_credit.py                      # 3 dev tasks x 2 cells, models
    .venv/bin/python benchmarks/bench_credit.py --tasks 5 --save benchmarks/results/credit.csv
    .venv/bin/python benchmarks/bench_credit.py --baseline --tasks 1 # stand-ins, no model: seconds
    .venv/bin/python benchmarks/bench_credit.py --from runs/sweeps/delegation-<hash>   # a study ran before
    .venv/bin/python benchmarks/bench_credit.py --from benchmarks/results/credit.csv  # print saved rows

``--baseline``: the parent ``ParentBaseline`` and every child ``BaselineModel`` whatever model is
asked, so children are recorded "on light/main" and every swap answers the same: the machinery and
its identity check, every contribution 0.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import pandas as pd  # noqa: E402

from subagent_lab.agents.launcher import ModelFactory  # noqa: E402
from subagent_lab.experiments.delegation.credit import credit_by_swap, credit_runs  # noqa: E402

CELLS = ("delegate-light", "delegate-main")
SHOWN = {"cell": "cell", "task_id": "task", "child": "child", "child_task": "child's task",
         "recorded_model": "model", "swapped_to": "swap", "recorded_score": "recorded",
         "score": "swapped", "contribution": "credit", "cache_hits": "hits", "cache_misses": "misses",
         "live_tokens": "live tokens", "replay_wall_s": "wall s"}  # fmt: skip


def record(args: argparse.Namespace) -> pd.DataFrame:
    """The study's rows: run (or resumed), or read from ``--from``'s directory."""
    from subagent_lab.experiments.delegation import Cell, DelegationSpec, run_study
    from subagent_lab.experiments.rows import load_results

    if args.source:
        df = load_results(args.source)
        df.attrs["study_dir"] = args.source
        return df
    cells = tuple(Cell(arm=c) for c in args.cells.split(","))
    spec = DelegationSpec(name="credit", splits=tuple(args.splits.split(",")), tasks_per_split=args.tasks,
                          cells=cells, repeats=1)  # fmt: skip
    started = time.monotonic()
    parents, children = stand_ins(args)
    df = run_study(spec, config_path=args.config, out_dir=args.out, progress=True, parent_factory=parents,
                   child_factory=children)  # fmt: skip
    took = time.monotonic() - started
    print(f"study {df.attrs['study_dir']}: {len(df)} parent runs ({took:.0f} s this call)")
    return df


def stand_ins(args: argparse.Namespace) -> tuple[ModelFactory | None, ModelFactory | None]:
    """The parent's and the children's no-model stand-ins of ``--baseline`` (None: the configured
    models)."""
    if not args.baseline:
        return None, None
    from subagent_lab.experiments.parent_baseline import ParentBaseline
    from subagent_lab.models.baseline import BaselineModel

    return (lambda c, cfg: ParentBaseline()), (lambda c, cfg: BaselineModel())


def credit(args: argparse.Namespace, study: pd.DataFrame) -> pd.DataFrame:
    """Every delegating parent's credit rows, those of ``<study dir>/credit.jsonl`` read back and
    the rest replayed (each appended as it finishes)."""
    from subagent_lab.api.credit import study_credit_table
    from subagent_lab.experiments.rows import ResultLog

    log = ResultLog(Path(study.attrs["study_dir"]) / "credit.jsonl")
    old = pd.DataFrame(log.rows())
    done = set(old["run_key"]) if len(old) else set()
    rows = study[study["cell"].isin(args.cells.split(","))]
    todo = rows[~rows["run_key"].isin(done) & (rows["sub_agents"].fillna(0) > 0)]
    print(f"credit: {len(done)} parent runs replayed before, {len(todo)} to replay")
    parents, children = stand_ins(args)

    def write(df: pd.DataFrame) -> None:
        for row in df.to_dict("records"):
            log.append({str(k): v for k, v in row.items()})
        if len(df):
            r = df.iloc[0]
            tokens, wall = int(df["live_tokens"].sum()), df["replay_wall_s"].sum()
            print(f"  {r['run_key']}: {len(df)} replays, identity misses {r['identity_misses']}, "
                  f"live tokens {tokens:,}, {wall:.0f} s", flush=True)  # fmt: skip

    study_credit_table(todo, config=args.config, live=parents, child_live=children, done=done, on_run=write)
    return pd.DataFrame(log.rows())


def print_credit(df: pd.DataFrame, study: pd.DataFrame | None) -> None:
    """The table, the identity check and cost per parent, the contributions per swap, the totals."""
    if df.empty:
        print("no credit rows: no delegating parent run had a Task child")
        return
    shown = df.assign(child_task=df["child_task"].str.slice(0, 40))[list(SHOWN)].rename(columns=SHOWN)
    with pd.option_context("display.width", 200, "display.max_columns", 20, "display.max_colwidth", 40):
        print("\n== per child and swap (credit = recorded − swapped parent answer quality) ==")
        print(shown.to_string(index=False, float_format=lambda x: f"{x:.3f}"))
        runs = credit_runs(df)
        print("\n== per parent run: identity check (0 misses, same ending) and the cost of finding out ==")
        runs_shown = runs.drop(columns=["run_key", "split"], errors="ignore")
        print(runs_shown.to_string(index=False, float_format="{:.1f}".format))
        print("\n== per cell, recorded model and swap ==")
        print(credit_by_swap(df).to_string(index=False, float_format=lambda x: f"{x:.3f}"))
    exact = int(runs["identity_exact"].astype(bool).sum())
    print(f"\nidentity replays exact: {exact}/{len(runs)}; replays {len(df)}, live calls "
          f"{int(df['cache_misses'].sum())}, served {int(df['cache_hits'].sum())}, live tokens "
          f"{int(df['live_tokens'].sum()):,}, wall {runs['wall_s'].sum() / 60:.1f} min")  # fmt: skip
    if study is not None:
        recorded = study[study["run_key"].isin(set(df["run_key"]))]
        tokens, minutes = int(recorded["total_tokens"].sum()), recorded["elapsed_s"].sum() / 60
        print(f"the recorded parents themselves: {len(recorded)} runs, {tokens:,} tokens, {minutes:.1f} min")


def main() -> int:
    formatter = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=formatter)
    parser.add_argument(
        "--from",
        dest="source",
        default=None,
        help="a study directory to replay (no recording), or credit rows saved with --save",
    )
    parser.add_argument("--tasks", type=int, default=3, help="tasks per split (default 3)")
    parser.add_argument("--splits", default="dev", help="comma-separated (default dev)")
    parser.add_argument("--cells", default=",".join(CELLS), help="comma-separated cells to record and credit")
    parser.add_argument("--baseline", action="store_true", help="no-model stand-ins (every credit 0)")
    parser.add_argument("--out", default=None, help="sweeps directory (default: <trace_dir>/sweeps)")
    parser.add_argument("--config", default=None, help="profiles.yaml (default: the repository's)")
    parser.add_argument("--save", default=None, help="also write the credit rows to this CSV")
    args = parser.parse_args()
    if args.source and args.source.endswith(".csv"):
        print_credit(pd.read_csv(args.source), None)
        return 0
    study = record(args)
    df = credit(args, study)
    print_credit(df, study)
    if args.save and len(df):
        Path(args.save).parent.mkdir(parents=True, exist_ok=True)
        df.to_csv(args.save, index=False)
        print(f"credit rows saved to {args.save} ({len(df)} replays)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
