"""The explore child on the benchmark splits: {no-model baseline, light, main} x scaffold presets,
with 95% intervals, lift over the baseline and the paired light-vs-main difference.

Runs a real sweep per split (no call cache unless ``--cache``) on the embedded models and prints,
per split, one table of scaffold x model: mean quality [bootstrap 95% CI over tasks, and over
repeats where sampled], the lift over the no-model baseline on the same tasks and scaffold
[95% CI] with win/loss/tie counts, strict line recall, gold-file recall, the median wall time per
run (runs without a cache hit) and the terminal reasons; then main − light per scaffold, paired by
task; then quality by task kind. Every figure comes from the sweep's rows
(``subagent_lab.analysis.stats``, ``analysis.headline``).

The rows are written to ``--save`` (CSV; commit it under ``benchmarks/results/``): ``--from FILE``
prints the same tables from a saved file without running anything, so every figure quoted in
docs/benchmarks.md can be re-printed from a committed summary.

Usage: python benchmarks/bench_explore.py [--splits dev,test] [--models none,light,main]
       [--scaffolds plain,aided] [--tasks all] [--repeats 1] [--temperature 0.3]
       [--workers 1] [--set key=value ...] [--save FILE] [--from FILE[,FILE...]]
       [--contrast A:B ...] [--floors benchmarks/results/floors.csv]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pandas as pd
import yaml

from subagent_lab.analysis.fields import field_table
from subagent_lab.analysis.headline import comparison_sentences, lift_table, readable_lift, task_subsets
from subagent_lab.analysis.stats import PairedDifference, mean_ci, paired_difference, repeat_spread, sign_text
from subagent_lab.experiments.rows import relative_table
from subagent_lab.experiments.sweep import SweepSpec, Variant, run_sweep

SHOWN = {"strict_line_recall": "strict recall*", "gold_recall_file": "file recall*"}
"""Means over the present tasks (absent tasks have no gold: their recall is 1 by definition) shown
beside quality (docs/numbers.md), with their table headings."""


def split_table(df: pd.DataFrame) -> pd.DataFrame:
    """One split's table: ``readable_lift`` plus the means of ``SHOWN``, wall time and reasons."""
    lift = readable_lift(lift_table(df))
    if lift.empty:
        return lift
    keys = [c for c in ("scaffold", "model_choice") if c in df.columns]
    timed = df[df["cache_hits"].fillna(0) == 0] if "cache_hits" in df.columns else df
    present = df[df["kind"] != "absent"]
    extra = present.groupby(keys)[[c for c in SHOWN if c in df.columns]].mean().round(2).rename(columns=SHOWN)
    extra["valid"] = df.groupby(keys)["contract_valid"].mean().round(2)
    extra["median wall s"] = timed.groupby(keys)["elapsed_s"].median().round(1)
    extra["ended"] = df.groupby(keys)["terminal_reason"].agg(lambda s: dict(s.value_counts()))
    extra = extra.reset_index().rename(columns={"model_choice": "model"})
    on = [c if c != "model_choice" else "model" for c in keys]
    table = lift.drop(columns=[c for c in ("split",) if c in lift.columns]).merge(extra, on=on, how="left")
    if "on" in table.columns:  # the extras are over all tasks (recalls: the present ones): shown once
        columns = [c for c in extra.columns if c not in on]
        table[columns] = table[columns].astype(object).where(table["on"] == "all", "")
    return table


def retrieval_rows(split: str, tasks: tuple[str, ...], k: int) -> pd.DataFrame:
    """The retrieval floor: for each task, the top ``k`` code units ``Search`` ranks for its text
    (BM25 over names, docstrings and bodies; ``tools.symbols``), cited as evidence without a model
    or a loop, the task as the summary, scored like every arm (without a trace: nothing to see)."""
    from subagent_lab.bench.score import LOC_COLUMNS
    from subagent_lab.bench.scoring import score_run
    from subagent_lab.bench.suite import load_suite
    from subagent_lab.experiments.sweep import select_tasks
    from subagent_lab.tools.symbols.search import retrieval_answer
    from subagent_lab.workspace.sandbox import Workspace

    rows = []
    for task in select_tasks(tasks, load_suite(split=split)):
        root = task.workspace_root()
        started = time.monotonic()
        evidence = retrieval_answer(Workspace(root), task.prompt, k)
        answer = {"status": "completed", "summary": task.prompt, "findings": [], "evidence": evidence}
        score = score_run(task, answer, root).model_dump()
        rows.append({
            "split": split, "task_id": task.id, "kind": task.kind, "model_choice": f"retrieval-{k}",
            "scaffold": "none (no loop)", "terminal_reason": "completed", "status": "completed",
            "contract_valid": True, "elapsed_s": time.monotonic() - started, "model_time_s": 0.0,
            **{key: score[key] for key in ("quality", "strict_line_recall", "gold_recall_file")},
            **{key: score[key] for key in LOC_COLUMNS},
            "task_meta": json.dumps(task.meta, sort_keys=True, default=str),
        })  # fmt: skip
    return pd.DataFrame(rows)


def sample_tasks(split: str, n: int) -> tuple[str, ...]:
    """The sample rule, written before any model ran on a mined split: the ``n`` tasks whose ids
    have the smallest SHA-256 (hex of the UTF-8 id), in suite order. Deterministic, blind to the
    tasks' text and to every result, the same on every machine."""
    from subagent_lab.bench.suite import load_suite

    ids = [t.id for t in load_suite(split)]
    chosen = set(sorted(ids, key=lambda i: hashlib.sha256(i.encode("utf-8")).hexdigest())[:n])
    return tuple(i for i in ids if i in chosen)


def _signed(x: float) -> str:
    return f"{x:+.2f}".replace("-", "−")


def _pair(d: PairedDifference) -> str:
    """``+0.05 [−0.02, +0.12] (W/L/T 9/4/47, 13 non-tied, sign test p = 0.267)``."""
    return (
        f"{_signed(d.diff.mean)} [{_signed(d.diff.low)}, {_signed(d.diff.high)}] "
        f"(W/L/T {d.wins}/{d.losses}/{d.ties}, {sign_text(d)})"
    )


def give_up_floor(part: pd.DataFrame, split: str | None) -> pd.DataFrame:
    """The give-up floor's rows (``bench.giveup``: "No evidence." to every task, no model) on the
    tasks of ``part`` where it holds absent tasks: their floor. Empty otherwise."""
    from subagent_lab.bench.giveup import GIVE_UP, give_up_rows
    from subagent_lab.bench.suite import load_suite

    has_absent = "kind" in part.columns and part["kind"].eq("absent").any()
    if split is None or not has_absent or GIVE_UP in set(part["model_choice"].astype(str)):
        return pd.DataFrame()
    ids = set(part["task_id"])
    rows = give_up_rows(
        [t for t in load_suite(split="dev" if split == "dev-tree" else split) if t.id in ids], split
    )
    return pd.DataFrame(rows).assign(scaffold="none (no loop)")


def scaffold_effects(df: pd.DataFrame, a: str = "aided", b: str = "plain") -> list[str]:
    """Per model: ``a − b`` (the aids' effect), paired by task on one split, with its interval and
    win/loss/tie counts: which aids survive on test and which only helped dev."""
    lines: list[str] = []
    if "scaffold" not in df.columns or not {a, b} <= set(df["scaffold"].astype(str)):
        return lines
    for model, part in df.groupby("model_choice", sort=True):
        if not {a, b} <= set(part["scaffold"].astype(str)):
            continue
        d = paired_difference(part, a, b, arm="scaffold")
        lines.append(f"{model}: {a} − {b} = {_pair(d)} ({d.a_mean:.2f} vs {d.b_mean:.2f})")
    return lines


def over_floor(df: pd.DataFrame, floor: pd.DataFrame, name: str) -> list[str]:
    """Each model arm (per scaffold) minus the retrieval floor ``floor``, paired by task: the lift
    over the strongest no-model answer where retrieval beats the no-model policy (test)."""
    lines = []
    models = df[df["model_choice"] != "none"]
    for (scaffold, model), part in models.groupby(["scaffold", "model_choice"], sort=True):
        both = pd.concat([part, floor.assign(model_choice=name)])
        d = paired_difference(both, str(model), name)
        lines.append(f"{model} ({scaffold}) − {name} = {_pair(d)}")
    return lines


FIELD_METRICS = ("func_acc_at5", "unit_recall_at4", "file_acc_at5", "quality")
"""The field's localization metrics (docs/numbers.md), paired like quality: issue 37's targets."""


def field_lifts(df: pd.DataFrame) -> list[str]:
    """Per scaffold on the present tasks, and again on the non-leaking ones where the rows flag
    them: each model − the scaffold's no-model floor (``none``) and main − light on
    ``FIELD_METRICS``, paired by task, with bootstrap intervals, W/L/T and the sign test."""
    lines: list[str] = []
    for subset, rows in task_subsets(df):
        if subset != "absent":
            lines += _field_lifts(rows, "present tasks" if subset in ("all", "present") else "no-leak tasks")
    return lines


def _field_lifts(present: pd.DataFrame, label: str) -> list[str]:
    lines: list[str] = []
    for scaffold, part in present.groupby("scaffold", sort=True):
        arms = set(part["model_choice"].astype(str))
        pairs = [(m, "none") for m in ("light", "main") if {m, "none"} <= arms]
        pairs += [("main", "light")] if {"main", "light"} <= arms else []
        for a, b in pairs:
            cells = []
            for metric in FIELD_METRICS:
                if metric not in part.columns or part[metric].isna().all():
                    continue
                d = paired_difference(part, a, b, value=metric)
                cells.append(f"{metric} {d.a_mean:.2f} − {d.b_mean:.2f} = {_pair(d)}")
            if cells:
                tasks = part["task_id"].nunique()
                lines.append(f"{a} − {b} ({scaffold}, {label}, {tasks}): " + "; ".join(cells))
    return lines


def against_strongest(df: pd.DataFrame, floors: pd.DataFrame) -> list[str]:
    """Each model arm minus the strongest floor of ``floors`` (``bench_floors.py`` rows) on the
    same tasks: the floor arm with the highest mean quality over them, whatever its scaffold.
    Quality over all tasks, ``FIELD_METRICS`` over the present ones, paired by task."""
    same = floors[floors["task_id"].isin(set(df["task_id"]))]
    if same.empty:
        return []
    means = same.groupby("model_choice")["quality"].mean()
    best = str(means.idxmax())
    floor = same[same["model_choice"] == best]
    lines = [f"strongest floor on these {floor['task_id'].nunique()} tasks: {best} {means[best]:.2f}"]
    for (scaffold, model), part in df[df["model_choice"] != "none"].groupby(["scaffold", "model_choice"]):
        both = pd.concat([part, floor], ignore_index=True)
        cells = []
        for metric in ("quality", *FIELD_METRICS[:-1]):
            rows = both if metric == "quality" else both[both["kind"] != "absent"]
            if metric not in rows.columns or rows[metric].isna().all():
                continue
            d = paired_difference(rows, str(model), best, value=metric)
            cells.append(f"{metric} {_pair(d)}")
        lines.append(f"  {model} ({scaffold}) − {best}: " + "; ".join(cells))
    return lines


def load_meta(csv: str) -> dict[str, Any]:
    """The sidecar ``--save`` writes beside the rows (wall time, workers, load): ``{}`` if none."""
    path = Path(csv).with_suffix(".meta.json")
    return json.loads(path.read_text()) if path.exists() else {}


def _load() -> str:
    one, five, _ = os.getloadavg()
    return f"{one:.2f}/{five:.2f}"


def _commit() -> str:
    here = Path(__file__).parent
    out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=here)
    return out.stdout.strip() or "unknown"


def spread_lines(df: pd.DataFrame) -> list[str]:
    """Sampling spread per (scaffold, model) where tasks ran more than once (``repeat_spread``)."""
    keys = [c for c in ("scaffold", "model_choice") if c in df.columns]
    table = repeat_spread(df, keys)
    return [
        f"{' '.join(str(r[k]) for k in keys)}: {r['tasks_varying']}/{r['tasks']} tasks vary over "
        f"{r['repeats']} repeats; within-task sd {r['within_sd']:.2f}, between-task sd "
        f"{r['between_sd']:.2f}, sampling's share of variance {r['sampling_share']:.2f}, "
        f"repeat pairs that differ {r['flip_rate']:.2f}"
        for _, r in table.iterrows()
    ]


def report(
    df: pd.DataFrame,
    contrasts: tuple[tuple[str, str], ...] = (("aided", "plain"),),
    floor_rows: pd.DataFrame | None = None,
) -> None:
    """Print every split's tables (see the module docstring); ``contrasts``: the scaffold pairs
    ``(a, b)`` whose per-model paired difference ``a − b`` is printed where both ran; ``floor_rows``:
    every split's floor rows (``bench_floors.py``), against whose strongest each model is set."""
    splits = sorted(df["split"].dropna().unique()) if "split" in df.columns else [None]
    for split in splits:
        part = df if split is None else df[df["split"] == split]
        tasks = part["task_id"].nunique()
        model_s = part["model_time_s"].sum() if "model_time_s" in part.columns else float("nan")
        run_s = part["elapsed_s"].sum() if "elapsed_s" in part.columns else float("nan")
        head = (
            f"{split or 'suite'}: {tasks} tasks, {len(part)} runs, {model_s / 60:.1f} min of model time, "
            f"{run_s / 60:.1f} min summed over runs"
        )
        print(f"\n== {head} ==")
        floors = part[part["model_choice"].astype(str).str.startswith("retrieval")]
        part = part.drop(index=floors.index)
        floors = pd.concat([floors, give_up_floor(part, split)], ignore_index=True)
        # The no-loop floor stands beside every scaffold's arms: the strongest floor is chosen among all.
        cells = part[[c for c in ("scaffold", "variant") if c in part.columns]].drop_duplicates()
        shown = [part, *(floors.assign(**cell) for cell in cells.to_dict("records"))]
        with pd.option_context("display.width", 250, "display.max_columns", 30, "display.max_colwidth", 60):
            print(split_table(pd.concat(shown, ignore_index=True)).to_string(index=False))
        print("  * over the present tasks (absent tasks have no gold span)")
        with pd.option_context("display.width", 250, "display.max_columns", 30):
            fields = field_table(pd.concat(shown, ignore_index=True)).drop(columns=["split"], errors="ignore")
        if not fields.empty:
            print("  localization (Acc@k over the first k items, 95% bootstrap CI; no-leak: prompts naming")
            print("  no gold unit, leaks: how many do):")
            print("  " + fields.to_string(index=False).replace("\n", "\n  "))
        retrieval = floors[floors["model_choice"].astype(str).str.startswith("retrieval")]
        for arm, rows in retrieval.groupby("model_choice"):
            ci = mean_ci(rows)
            present = rows[rows["kind"] != "absent"]
            print(
                f"  {arm} (top units of Search cited, no model, no loop): quality {ci.mean:.2f} "
                f"[{ci.low:.2f}, {ci.high:.2f}], strict recall* {present['strict_line_recall'].mean():.2f}, "
                f"file recall* {present['gold_recall_file'].mean():.2f}"
            )
            for line in over_floor(part, rows, str(arm)):
                print(f"    {line}")
        for sentence in comparison_sentences(part):
            print(f"  {sentence}")
        lifts = field_lifts(part)
        if lifts:
            print("  field metrics, paired by task [95% CI]:")
            for line in lifts:
                print(f"    {line}")
        if floor_rows is not None and split is not None:
            for line in against_strongest(part, floor_rows[floor_rows["split"] == split]):
                print(f"  {line}")
        for a, b in contrasts:
            for line in scaffold_effects(part, a, b):
                print(f"  scaffold effect, {line}")
        spread = spread_lines(part)
        if spread:
            print("  sampling spread (tasks with repeats):")
            for line in spread:
                print(f"    {line}")
        by_kind = part.pivot_table(index="kind", columns=["scaffold", "model_choice"], values="quality")
        print("  quality by kind:")
        print("  " + by_kind.round(2).to_string().replace("\n", "\n  "))


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--splits", default="dev,test")
    parser.add_argument("--tasks", default="all", help="task ids, 'smoke', 'all' or a kind, comma-separated")
    parser.add_argument(
        "--sample", type=int, default=0,
        help="N tasks of each split by the sample rule (sample_tasks), fixed before any run; 0: --tasks",
    )  # fmt: skip
    parser.add_argument("--models", default="none,light,main")
    parser.add_argument("--scaffolds", default="plain,aided")
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--temperature", type=float, default=None, help="sample (independent repeats)")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--name", default="bench-explore")
    parser.add_argument("--out", default=None, help="sweeps directory")
    parser.add_argument("--cache", action="store_true", help="replay recorded model calls")
    parser.add_argument("--save", default=None, help="write the rows to this CSV")
    parser.add_argument(
        "--retrieval", type=int, default=4, help="top-k units of the retrieval floor (0: none)"
    )
    parser.add_argument(
        "--from", dest="source", default=None,
        help="print the tables of saved CSVs (comma-separated: their rows are pooled; --tasks filters)",
    )  # fmt: skip
    parser.add_argument(
        "--contrast", action="append", default=None, metavar="A:B",
        help="scaffold pair whose per-model paired difference A − B is printed (default aided:plain)",
    )  # fmt: skip
    parser.add_argument(
        "--floors", default=None, metavar="CSV",
        help="with --from: set every model against the strongest floor of these rows (bench_floors.py)",
    )  # fmt: skip
    args = parser.parse_args()
    contrasts = tuple(tuple(c.split(":", 1)) for c in (args.contrast or ["aided:plain"]))
    if args.source:
        frames = []
        for source in args.source.split(","):
            meta = load_meta(source)
            if meta:
                print(
                    f"{source}: {meta['runs']} runs in {float(meta['wall_s']) / 60:.1f} min wall "
                    f"({meta['started']} to {meta['finished']} UTC), {meta['workers']} worker(s), "
                    f"T={meta['temperature']}, commit {meta['commit']}, load average "
                    f"{meta['load_start']} at the start, {meta['load_end']} at the end"
                )
            frames.append(pd.read_csv(source))
        rows = pd.concat(frames, ignore_index=True)
        # the retrieval floor is deterministic: every file that saved it holds the same rows
        floor = rows["model_choice"].astype(str).str.startswith("retrieval")
        rows = rows[~(floor & rows.duplicated(["split", "task_id", "model_choice"]))]
        if args.tasks != "all":
            rows = rows[rows["task_id"].isin(args.tasks.split(","))]
        report(rows, contrasts, pd.read_csv(args.floors) if args.floors else None)
        return 0
    overrides = {k: yaml.safe_load(v) for k, _, v in (s.partition("=") for s in args.set)}
    frames = []
    started, started_at, load_start = time.monotonic(), datetime.now(UTC), _load()
    for split in args.splits.split(","):
        chosen = sample_tasks(split, args.sample) if args.sample else tuple(args.tasks.split(","))
        spec = SweepSpec(
            name=f"{args.name}-{split}",
            split=split,
            tasks=chosen,
            models=tuple(args.models.split(",")),
            scaffolds=tuple(args.scaffolds.split(",")),
            variants=(Variant(label="cli" if overrides else "default", overrides=overrides),),
            repeats=args.repeats,
            temperature=args.temperature,
        )
        swept = run_sweep(spec, out_dir=args.out, max_workers=args.workers, cache=args.cache)
        frames.append(relative_table(swept, swept.attrs["sweep_dir"]))  # saved rows: no absolute path
        if args.retrieval:
            frames.append(retrieval_rows(split, spec.tasks, args.retrieval))
    wall = time.monotonic() - started
    df = pd.concat(frames, ignore_index=True)
    print(f"\n{len(df)} runs in {wall / 60:.1f} min wall, {args.workers} worker(s), T={args.temperature}")
    if args.save:
        Path(args.save).parent.mkdir(parents=True, exist_ok=True)
        df.to_csv(args.save, index=False)
        meta = {
            "runs": len(df), "wall_s": round(wall, 1), "workers": args.workers,
            "temperature": args.temperature, "repeats": args.repeats, "commit": _commit(),
            "started": started_at.strftime("%Y-%m-%d %H:%M"), "finished": datetime.now(UTC).strftime("%H:%M"),
            "load_start": load_start, "load_end": _load(), "argv": " ".join(sys.argv[1:]),
        }  # fmt: skip
        Path(args.save).with_suffix(".meta.json").write_text(json.dumps(meta, indent=2) + "\n")
        print(f"rows written to {args.save} (re-print: --from {args.save})")
    report(df, contrasts)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
