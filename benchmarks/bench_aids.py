"""Which aids carry over from dev to test: each aid of a preset, dropped from it and added alone to
`plain`, under the no-model baseline (which costs no model time), paired by task on each split.

For every field the preset (``--scaffold``, default ``aided``) sets to something other than its
plain value, two variants run on every task of each split: the preset without that aid (the field
at its plain value) and `plain` with that aid alone. Printed per aid and split: the no-model
policy's mean quality under each variant, and the paired differences "preset − preset without it"
(what the aid adds among the others) and "plain + it − plain" (what it adds alone), each with its
bootstrap 95% interval over tasks and win/loss/tie counts. An aid that lifts the floor on dev and
not on test helped dev's wording, not the policy (docs/benchmarks.md, "Which aids survive").

The models' side of the same question (a preset against `plain` for light and main) is in
``bench_explore.py``'s "the aids' effect" lines; this script answers it per aid for the floor.

Usage: python benchmarks/bench_aids.py [--splits dev,test] [--scaffold aided] [--tasks all] [--save FILE]
       [--from FILE]
"""

from __future__ import annotations

import argparse
import time

import pandas as pd
from saved_rows import add_save_from, save_rows

from subagent_lab.analysis.stats import mean_ci, paired_difference
from subagent_lab.config.profiles import load_config
from subagent_lab.config.scaffolds import PLAIN, Scaffold
from subagent_lab.experiments.sweep import SweepSpec, Variant, run_sweep


def aid_settings(preset: Scaffold) -> dict[str, tuple[object, object]]:
    """Every aid the preset sets away from ``plain``: a policy ``plain`` lacks, a parameter of one
    it shares, or an observation size, as override key -> (plain's value, the preset's)."""
    aids: dict[str, tuple[object, object]] = {}
    for spec in preset.policies:
        if not PLAIN.has(spec.policy):
            aids[spec.policy] = (False, dict(spec.params))
            continue
        for param, value in spec.params.items():
            if PLAIN.param(spec.policy, param) != value:
                aids[f"{spec.policy}.{param}"] = (PLAIN.param(spec.policy, param), value)
    plain_sizes, sizes = PLAIN.observation.model_dump(), preset.observation.model_dump()
    for size, value in sizes.items():
        if plain_sizes[size] != value:
            aids[f"observation.{size}"] = (plain_sizes[size], value)
    return aids


def aid_variants(preset: Scaffold) -> list[Variant]:
    """``full``, ``plain``, then ``-aid`` (the preset without it) and ``+aid`` (plain with it) for
    every aid the preset sets away from ``plain`` (``aid_settings``), in the preset's order."""
    aids = aid_settings(preset)
    plain_all = {k: off for k, (off, _) in aids.items()}
    variants = [Variant(label="full"), Variant(label="plain", overrides=plain_all)]
    for aid, (off, on) in aids.items():
        variants.append(Variant(label=f"-{aid}", overrides={aid: off}))
        variants.append(Variant(label=f"+{aid}", overrides={**plain_all, aid: on}))
    return variants


def _diff(df: pd.DataFrame, a: str, b: str) -> str:
    if not {a, b} <= set(df["variant"]):
        return "—"
    d = paired_difference(df, a, b, arm="variant")
    return f"{d.diff.mean:+.2f} [{d.diff.low:+.2f}, {d.diff.high:+.2f}] {d.wins}/{d.losses}/{d.ties}"


def aid_table(df: pd.DataFrame) -> pd.DataFrame:
    """One row per aid and split: the two paired differences (module docstring)."""
    rows = []
    for split, part in df.groupby("split", sort=False):
        aids = [v[1:] for v in part["variant"].unique() if v.startswith("-")]
        full, plain = full_mean(part, str(split)), plain_mean(part, str(split))
        rows.append({"split": split, "aid": "(all)", "preset without it": plain, "plain with it alone": full,
                     "what it adds among the others": _diff(part, "full", "plain"),
                     "what it adds alone": _diff(part, "full", "plain")})  # fmt: skip
        for aid in aids:
            rows.append({
                "split": split, "aid": aid,
                "preset without it": mean_ci(part[part["variant"] == f"-{aid}"]).mean,
                "plain with it alone": mean_ci(part[part["variant"] == f"+{aid}"]).mean,
                "what it adds among the others": _diff(part, "full", f"-{aid}"),
                "what it adds alone": _diff(part, f"+{aid}", "plain"),
            })  # fmt: skip
    return pd.DataFrame(rows)


def full_mean(df: pd.DataFrame, split: str) -> float:
    """The no-model policy's mean quality under the whole preset on ``split``."""
    return mean_ci(df[(df["split"] == split) & (df["variant"] == "full")]).mean


def plain_mean(df: pd.DataFrame, split: str) -> float:
    """... and under `plain` (every aid at its plain value)."""
    return mean_ci(df[(df["split"] == split) & (df["variant"] == "plain")]).mean


def report(df: pd.DataFrame) -> None:
    """Print the table, one block per split (dev first), then the aids whose effect differs."""
    table = aid_table(df)
    with pd.option_context("display.width", 200, "display.max_columns", 10, "display.max_colwidth", 40):
        for split, part in table.groupby("split", sort=False):
            tasks = df[df["split"] == split]["task_id"].nunique()
            print(f"\n== {split}: {tasks} tasks, no-model baseline, differences [95% CI] W/L/T ==")
            print(f"  the preset: {full_mean(df, str(split)):.2f}; plain: {plain_mean(df, str(split)):.2f}")
            shown = part.drop(columns="split")
            for column in ("preset without it", "plain with it alone"):
                shown[column] = shown[column].map("{:.2f}".format)
            print(shown.to_string(index=False))


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--splits", default="dev,test")
    parser.add_argument("--scaffold", default="aided")
    parser.add_argument("--tasks", default="all", help="task ids, 'smoke', 'all' or a kind, comma-separated")
    add_save_from(parser, source="print the table of a saved CSV")
    parser.add_argument("--out", default=None, help="sweeps directory")
    args = parser.parse_args()
    if args.source:
        report(pd.read_csv(args.source))
        return 0
    preset = load_config(None).scaffold(args.scaffold).scaffold
    variants = tuple(aid_variants(preset))
    started, frames = time.monotonic(), []
    for split in args.splits.split(","):
        spec = SweepSpec(
            name=f"bench-aids-{args.scaffold}-{split}", split=split, tasks=tuple(args.tasks.split(",")),
            models=("none",), scaffolds=(args.scaffold,), variants=variants,
        )  # fmt: skip
        frames.append(run_sweep(spec, out_dir=args.out, cache=False))
    df = pd.concat(frames, ignore_index=True)
    print(f"{len(df)} runs ({len(variants)} variants) in {(time.monotonic() - started) / 60:.1f} min")
    save_rows(df, args.save)
    report(df)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
