"""docs/results.md: one table of the project's claims, each figure computed now from the raw files
committed under ``benchmarks/results/`` (never copied by hand), so the page cannot drift from them.

Each claim says its figure, its target, whether it is met (or by how much it is missed), the commit
that measured it, the command that did, and the raw file read. docs/benchmarks.md stays the dated
log behind it: how each run was taken, how quiet the machine was, what was tried.

Usage: python benchmarks/results_page.py              # print the page
       python benchmarks/results_page.py --write      # write docs/results.md
       python benchmarks/results_page.py --check      # exit 1 when docs/results.md is not the page
       [--results DIR]                                 # raw files elsewhere (tests)

No model, no network; about two seconds (the bootstrap intervals, ``analysis.stats``, fixed seed).
"""

from __future__ import annotations

import argparse
import csv
import json
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
from subagent_lab.analysis.stats import mean_ci, paired_difference  # noqa: E402

RESULTS = REPO / "benchmarks" / "results"
PAGE = REPO / "docs" / "results.md"
MINED_TEST = "rs-mined-test60.csv"
MINED_COMMAND = (
    "python benchmarks/bench_explore.py --splits mined-test --sample 60 --models none,retrieval,light,main "
    "--scaffolds retrieval-start --retrieval 0 --temperature 0 --save benchmarks/results/rs-mined-test60.csv"
)
LEGACY_COMMAND = (
    "python benchmarks/bench_explore.py --from benchmarks/results/rs-test-light.csv,"
    "benchmarks/results/rs-test-main.csv"
)
NATIVE_COMMAND = (
    "python benchmarks/bench_endpoint.py --paths native --save benchmarks/results/endpoint-native-turns.csv"
)
SCALE_COMMAND = "python benchmarks/bench_scale.py --skip-faults --speed-runs 1000 --scaffold aided"
SCALE_COMMIT = "1407c11"
"""The commit the ``scale39/after-*.txt`` outputs measured (docs/benchmarks.md, "Issue 38: harness
cost and 2 workers, after batching short runs"): the outputs themselves do not print it."""


@dataclass(frozen=True)
class Figure:
    """A claim's figure as computed now: its text, and the worst value against the target."""

    text: str
    worst: float
    commit: str
    best: float | None = None
    """For a range of rounds: the best value (``worst`` is the other end); None for one value."""


@dataclass(frozen=True)
class Claim:
    claim: str
    target: str
    goal: str
    """``<= x``, ``>= x`` or ``> x``: how the worst value meets the target."""
    unit: str
    raw: str
    command: str
    how: str
    compute: Callable[[Path], Figure]


def _scale(results: Path, field: str) -> list[float]:
    """``field`` (both worker counts) from every ``scale39/after-*.txt``; the speed-up line for
    ``speedup``."""
    values: list[float] = []
    for out in sorted((results / "scale39").glob("after-*.txt")):
        text = out.read_text(encoding="utf-8")
        if field == "speedup":
            values += [float(m) for m in re.findall(r"speed-up 2 vs 1 worker: ([0-9.]+)x", text)]
        else:
            values += [
                float(v) for m in re.findall(rf"^\s*{field}\s+([0-9.]+)\s+([0-9.]+)", text, re.M) for v in m
            ]
    if not values:
        raise ValueError(f"{results / 'scale39'}: no {field} in after-*.txt")
    return values


def _range(values: list[float], unit: str) -> str:
    low, high = min(values), max(values)
    return f"{low:.1f}{unit}" if low == high else f"{low:.1f}–{high:.1f}{unit}"


def cpu_per_tool_call(results: Path) -> Figure:
    values = _scale(results, "worker_cpu_ms_per_tool_call")
    return Figure(f"{_range(values, ' ms')} ({len(values) // 2} rounds, 1 and 2 workers)",
                  max(values), SCALE_COMMIT, min(values))  # fmt: skip


def speedup(results: Path) -> Figure:
    values = _scale(results, "speedup")
    return Figure(f"{min(values):.2f}–{max(values):.2f}× ({len(values)} rounds)", min(values), SCALE_COMMIT,
                  max(values))  # fmt: skip


def _table(results: Path, name: str) -> pd.DataFrame:
    return pd.read_csv(results / name)


def _commit(df: pd.DataFrame) -> str:
    return ", ".join(sorted({str(v)[:7] for v in df["code_version"].dropna()}))


def median_wall(arm: str, name: str = MINED_TEST) -> Callable[[Path], Figure]:
    def compute(results: Path) -> Figure:
        df = _table(results, name)
        part = df[df["model_choice"] == arm]
        value = float(part["elapsed_s"].median())
        return Figure(f"{value:.1f} s (median of {len(part)} runs)", round(value, 1), _commit(df))

    return compute


def sitting_minutes(results: Path) -> Figure:
    meta = json.loads((results / "rs-mined-test60.meta.json").read_text(encoding="utf-8"))
    minutes = float(meta["wall_s"]) / 60
    runs = int(meta["runs"])
    return Figure(f"{minutes:.1f} min ({runs} runs, floors included)", round(minutes, 1),
                  _commit(_table(results, MINED_TEST)))  # fmt: skip


LOW_END = " at the interval's low end"
"""The unit of a claim judged by its interval's low end, not its mean (issue 49: "above 0 with 95%
intervals that exclude 0")."""


def lift(
    a: str, b: str, value: str, name: str = MINED_TEST, by_low: bool = False
) -> Callable[[Path], Figure]:
    """``a − b`` paired by task; ``by_low``: judged by the interval's low end."""

    def compute(results: Path) -> Figure:
        df = _table(results, name)
        d = paired_difference(df, a, b, value=value)
        text = (
            f"{d.diff.mean:+.2f} [{d.diff.low:+.2f}, {d.diff.high:+.2f}] "
            f"(W/L/T {d.wins}/{d.losses}/{d.ties}, {d.diff.n} tasks)"
        )
        return Figure(text, round(d.diff.low if by_low else d.diff.mean, 2), _commit(df))

    return compute


def floor_level(results: Path) -> Figure:
    """The scaffold's own floor (``none`` under it) less the strongest other floor (``retrieval``)."""
    df = _table(results, MINED_TEST)
    means = {arm: mean_ci(df[df["model_choice"] == arm], "quality") for arm in ("none", "retrieval")}
    gap = round(means["none"].mean - means["retrieval"].mean, 2)
    text = (
        f"`none` {means['none'].mean:.2f} [{means['none'].low:.2f}, {means['none'].high:.2f}], "
        f"`retrieval` {means['retrieval'].mean:.2f} "
        f"[{means['retrieval'].low:.2f}, {means['retrieval'].high:.2f}]"
    )
    return Figure(f"{text}: {gap:+.2f}", gap, _commit(df))


def quality(results: Path) -> Figure:
    df = _table(results, MINED_TEST)
    parts = []
    for arm in ("light", "main"):
        ci = mean_ci(df[df["model_choice"] == arm], "quality")
        parts.append(f"{arm} {ci.mean:.2f} [{ci.low:.2f}, {ci.high:.2f}]")
    d = paired_difference(df, "main", "none", value="quality")
    parts.append(f"main − floor {d.diff.mean:+.2f} [{d.diff.low:+.2f}, {d.diff.high:+.2f}]")
    return Figure("; ".join(parts), round(d.diff.mean, 2), _commit(df))


def contract_valid(name: str) -> Callable[[Path], Figure]:
    def compute(results: Path) -> Figure:
        df = _table(results, name)
        counts = df.groupby("model_choice")["contract_valid"].agg(["sum", "count"])
        repairs = int(df["repairs_used"].sum())
        text = ", ".join(f"{arm} {int(r['sum'])}/{int(r['count'])}" for arm, r in counts.iterrows())
        share = float((counts["sum"] / counts["count"]).min())
        return Figure(f"{text}; {repairs} repairs", share, _commit(df))

    return compute


CREDIT_COMMIT = "ed5098f"
"""The commit ``credit3.csv`` was recorded and replayed at (docs/benchmarks.md, "Issue 40: per-child
credit"): its rows carry no code stamp."""


def replay_identity(results: Path) -> Figure:
    """Each recorded parent replayed with nothing swapped: 0 live calls and the recorded ending."""
    df = _table(results, "credit3.csv")
    parents = df.drop_duplicates("parent_run")
    exact = int((parents["identity_exact"].astype(bool) & (parents["identity_misses"] == 0)).sum())
    misses = int(parents["identity_misses"].sum())
    text = f"{exact}/{len(parents)} parents reproduced exactly; {misses} live calls"
    return Figure(text, exact / len(parents) if len(parents) else 0.0, CREDIT_COMMIT)


def timing(what: str) -> Callable[[Path], Figure]:
    def compute(results: Path) -> Figure:
        with (results / "timings.csv").open(encoding="utf-8") as fh:
            row = next(r for r in csv.DictReader(fh) if r["what"] == what)
        seconds = float(row["seconds"])
        text = f"{int(seconds // 60)} min {int(seconds % 60)} s ({row['date']}; {row['conditions']})"
        return Figure(text, round(seconds / 60, 2), row["commit"])

    return compute


def _timing_command(results: Path, what: str) -> str:
    with (results / "timings.csv").open(encoding="utf-8") as fh:
        return next(r["command"] for r in csv.DictReader(fh) if r["what"] == what)


FLOOR_HOW = "paired by task over the 60 tasks, bootstrap 95% (`analysis.stats.paired_difference`, seed 0)"


def mined(
    claim: str, target: str, goal: str, unit: str, how: str, compute: Callable[[Path], Figure]
) -> Claim:
    """A claim read from the mined test sitting's rows."""
    return Claim(claim, target, goal, unit, MINED_TEST, MINED_COMMAND, how, compute)


def timed(claim: str, target: str, goal: str, what: str, how: str) -> Claim:
    """A claim read from a row of ``timings.csv`` (its command is the row's)."""
    return Claim(claim, target, goal, " min", "timings.csv", what, how, timing(what))


SCALE_END_COMMIT = "28583ba"
"""The commit the ``scale-end/scale-new-*.txt`` outputs measured (the base side: ``3cb5cb3``;
docs/benchmarks.md, "Issues 51 and 52: harness CPU per tool call"): the outputs do not print it."""
SCALE_END_COMMAND = (
    "python benchmarks/bench_scale.py --skip-faults --speed-runs 400 --scaffold aided "
    "(this commit and 3cb5cb3, three alternating rounds)"
)


def cost_ratio(results: Path) -> Figure:
    """This stop's worker CPU per tool call over ``3cb5cb3``'s, round by round, 1 and 2 workers."""
    ratios: list[float] = []
    for new in sorted((results / "scale-end").glob("scale-new-*.txt")):
        base = new.with_name(new.name.replace("scale-new-", "scale-base-"))
        pattern = r"^\s*worker_cpu_ms_per_tool_call\s+([0-9.]+)\s+([0-9.]+)"
        now = [float(v) for v in re.findall(pattern, new.read_text(encoding="utf-8"), re.M)[0]]
        was = [float(v) for v in re.findall(pattern, base.read_text(encoding="utf-8"), re.M)[0]]
        ratios += [a / b for a, b in zip(now, was, strict=True)]
    if not ratios:
        raise ValueError(f"{results / 'scale-end'}: no scale-new-*.txt")
    rounds = f"{len(ratios) // 2} rounds, 1 and 2 workers; not a quiet machine"
    text = f"{min(ratios):.2f}–{max(ratios):.2f}× ({rounds})"
    return Figure(text, max(ratios), SCALE_END_COMMIT, min(ratios))


def strongest_floor(split: str) -> Callable[[Path], Figure]:
    """The strongest no-model floor's function Acc@5 on a whole mined split, as ``bench_split.py``
    printed it (``floors-final/<split>.txt``)."""

    def compute(results: Path) -> Figure:
        text = (results / "floors-final" / f"{split}.txt").read_text(encoding="utf-8")
        found = re.search(r"strongest floor on all tasks by func_acc_at5: (\S+) \(([0-9.]+)\)", text)
        if found is None:
            raise ValueError(f"floors-final/{split}.txt: no strongest floor")
        cell = r"\S+ \[\S+ \S+\]"  # a mean and its interval; func Acc@5 is the third
        line = rf"^\s*{re.escape(found.group(1))}\s+all\s+\d+(?:\s+{cell}){{2}}\s+({cell})"
        row = re.search(line, text, re.M)
        value = row.group(1) if row else found.group(2)
        return Figure(f"{found.group(1)}: {value}", float(found.group(2)), "28583ba")

    return compute


RANK_TEST2 = "rank-mined-test2-100.csv"
RANK_TEST = "rank-mined-test60.csv"


def _rank_command(split: str, n: int, name: str) -> str:
    return (
        f"python benchmarks/bench_explore.py --splits {split} --sample {n} "
        "--models none,retrieval,light,main --scaffolds rank --retrieval 0 --temperature 0 "
        f"--save benchmarks/results/{name}"
    )


RANK_HOW = (
    "paired by task, bootstrap 95% (`analysis.stats.paired_difference`, seed 0); the floor is `none` "
    "under `rank` (the retrieval's fused best four with no model)"
)


def candidate_recall(name: str) -> Callable[[Path], Figure]:
    """The pool's ceiling: the share of tasks whose K judged candidates hold a gold unit."""

    def compute(results: Path) -> Figure:
        df = _table(results, name)
        part = df[df["model_choice"] == "main"]
        ci = mean_ci(part, "candidate_recall")
        pool = int(part["pool_size"].max())
        text = f"{ci.mean:.2f} [{ci.low:.2f}, {ci.high:.2f}] (K = {pool}, {len(part)} tasks)"
        return Figure(text, round(ci.mean, 2), _commit(df))

    return compute


def sitting_scaled(name: str, tasks: int) -> Callable[[Path], Figure]:
    """A sitting of ``tasks`` tasks (floors, light, main, one at a time) scaled from a recorded one."""

    def compute(results: Path) -> Figure:
        meta = json.loads((results / name).with_suffix(".meta.json").read_text(encoding="utf-8"))
        recorded = int(meta["runs"]) // 4  # four arms a task: none, retrieval, light, main
        minutes = float(meta["wall_s"]) / 60 * tasks / recorded
        text = f"{minutes:.0f} min ({recorded}-task sitting: {float(meta['wall_s']) / 60:.1f} min)"
        return Figure(text, round(minutes, 1), _commit(_table(results, name)))

    return compute


def ranked(claim: str, target: str, goal: str, unit: str, how: str, compute: Callable[[Path], Figure],
           name: str = RANK_TEST2) -> Claim:
    """A claim read from a ``rank`` sitting's rows (issue 49)."""
    split, n = ("mined-test2", 100) if name == RANK_TEST2 else ("mined-test", 60)
    return Claim(claim, target, goal, unit, name, _rank_command(split, n, name), how, compute)


EXCLUDING_0 = "> 0, interval excluding 0"
RANK_CLAIMS = [
    ranked("main − floor, function Acc@5, mined-test2, shipped `rank` (issue 49)", EXCLUDING_0, "> 0",
           LOW_END, f"`func_acc_at5`, {RANK_HOW}",
           lift("main", "none", "func_acc_at5", RANK_TEST2, by_low=True)),
    ranked("main − floor, unit recall@4, mined-test2, shipped `rank` (issue 49)", EXCLUDING_0, "> 0",
           LOW_END, f"`unit_recall_at4`, {RANK_HOW}",
           lift("main", "none", "unit_recall_at4", RANK_TEST2, by_low=True)),
    ranked("light − floor, function Acc@5, mined-test2, shipped `rank` (issue 49)", "none set", "", "",
           f"`func_acc_at5`, {RANK_HOW}", lift("light", "none", "func_acc_at5", RANK_TEST2)),
    ranked("main − light, function Acc@5, mined-test2, shipped `rank` (issue 49)", "none set", "", "",
           f"`func_acc_at5`, {RANK_HOW}", lift("main", "light", "func_acc_at5", RANK_TEST2)),
    ranked("Candidate recall@K, mined-test2 (issue 49)", "none set", "", "",
           "mean of `candidate_recall` over main's rows, bootstrap 95% (`mean_ci`)",
           candidate_recall(RANK_TEST2)),
    ranked("main − floor, function Acc@5, mined test, shipped `rank` (issue 49, second reading)",
           EXCLUDING_0, "> 0", LOW_END, f"`func_acc_at5`, {RANK_HOW}",
           lift("main", "none", "func_acc_at5", RANK_TEST, by_low=True), RANK_TEST),
    ranked("light − floor, function Acc@5, mined test, shipped `rank` (issue 49, second reading)",
           "none set", "", "", f"`func_acc_at5`, {RANK_HOW}",
           lift("light", "none", "func_acc_at5", RANK_TEST), RANK_TEST),
    ranked("main − light, function Acc@5, mined test, shipped `rank` (issue 49, second reading)",
           "none set", "", "", f"`func_acc_at5`, {RANK_HOW}",
           lift("main", "light", "func_acc_at5", RANK_TEST), RANK_TEST),
    ranked("main's wall time per task, shipped `rank`, mined-test2 (issue 49)", "≤ 30 s", "<= 30", " s",
           "median of `elapsed_s` over main's rows", median_wall("main", RANK_TEST2)),
    ranked("light's wall time per task, shipped `rank`, mined-test2 (issue 49)", "≤ 15 s", "<= 15", " s",
           "median of `elapsed_s` over light's rows", median_wall("light", RANK_TEST2)),
    ranked("A 200-task sitting of floors, light and main under `rank` (issue 49)", "≤ 150 min", "<= 150",
           " min", "the 100-task sitting's `wall_s` scaled to 200 tasks (`bench_explore.py`'s meta)",
           sitting_scaled(RANK_TEST2, 200)),
]  # fmt: skip


CLAIMS = [
    Claim("Harness CPU per tool call (issue 38)", "≤ 20 ms", "<= 20", " ms", "scale39/after-*.txt",
          SCALE_COMMAND, "min–max of `worker_cpu_ms_per_tool_call`, 1 and 2 workers, over the four rounds "
          "as printed", cpu_per_tool_call),
    Claim("2 workers against 1 (issue 38)", "≥ 1.7×", ">= 1.7", "×", "scale39/after-*.txt", SCALE_COMMAND,
          "min–max of the printed `speed-up 2 vs 1 worker` over the four rounds", speedup),
    mined("Shipped default's floor is the strongest floor, mined test (issue 37)",
          "`none` − `retrieval` ≥ 0", ">= 0", "",
          "quality means over the 60 tasks with bootstrap 95% intervals (`analysis.stats.mean_ci`): the "
          "scaffold's own floor (`none` under `retrieval-start`) less the retrieval floor", floor_level),
    mined("Quality of the shipped default, mined test, beside its floor (issue 37)", "main − floor > 0",
          "> 0", "", f"`quality` means (`mean_ci`); main − `none` {FLOOR_HOW}", quality),
    mined("main − floor, function Acc@5, mined test (issue 37)", "> 0", "> 0", "",
          f"`func_acc_at5`, {FLOOR_HOW}", lift("main", "none", "func_acc_at5")),
    mined("main − floor, unit recall@4, mined test (issue 37)", "> 0", "> 0", "",
          f"`unit_recall_at4`, {FLOOR_HOW}", lift("main", "none", "unit_recall_at4")),
    mined("light − floor, function Acc@5, mined test (issue 37)", "> 0", "> 0", "",
          f"`func_acc_at5`, {FLOOR_HOW}", lift("light", "none", "func_acc_at5")),
    mined("main − light, quality, mined test", "none set", "", "", f"`quality`, {FLOOR_HOW}",
          lift("main", "light", "quality")),
    mined("main's wall time per task, mined test (issue 37)", "≤ 60 s", "<= 60", " s",
          "median of `elapsed_s` over main's 60 rows", median_wall("main")),
    mined("light's wall time per task, mined test (issue 37)", "≤ 25 s", "<= 25", " s",
          "median of `elapsed_s` over light's 60 rows", median_wall("light")),
    Claim("main's wall time per task, legacy test split (issue 37)", "≤ 60 s", "<= 60", " s",
          "rs-test-main.csv", LEGACY_COMMAND,
          "median of `elapsed_s` over main's 33 rows (a busy machine: docs/benchmarks.md)",
          median_wall("main", "rs-test-main.csv")),
    Claim("The 60-task mined test sitting (issue 36)", "≤ 75 min", "<= 75", " min",
          "rs-mined-test60.meta.json", MINED_COMMAND,
          "the sitting's `wall_s` / 60, as `bench_explore.py` recorded it", sitting_minutes),
    Claim("Native tools, no grammar: contract-valid answers, 6 smoke tasks (issue 40)",
          "6/6 for both models", ">= 1", "", "endpoint-native-turns.csv", NATIVE_COMMAND,
          "`contract_valid` per model over its rows; `repairs_used` summed",
          contract_valid("endpoint-native-turns.csv")),
    Claim("A recorded parent replays with 0 live calls (identity, issue 40)", "every parent, 0 live calls",
          ">= 1", "", "credit3.csv",
          "python benchmarks/bench_credit.py --tasks 3 --save benchmarks/results/credit3.csv",
          "per distinct `parent_run`: `identity_exact` and `identity_misses` = 0 (the replay with nothing "
          "swapped, on the real models)", replay_identity),
    Claim("Harness CPU per tool call against 3cb5cb3 (issues 51, 52)", "≤ 1.2×", "<= 1.2", "×",
          "scale-end/scale-*.txt", SCALE_END_COMMAND,
          "`worker_cpu_ms_per_tool_call` of this stop's code over 3cb5cb3's, round by round, 1 and 2 "
          "workers (both sides make the same 800 tool calls)", cost_ratio),
    Claim("The strongest no-model floor, function Acc@5, frozen mined-test2 (issue 48)", "none set", "",
          "", "floors-final/mined-test2.txt",
          "python benchmarks/bench_split.py --tasks mined-test2 --save floors-mined-test2.csv",
          "the floor `bench_split.py` names strongest on all 350 tasks, with its bootstrap 95% interval",
          strongest_floor("mined-test2")),
    timed("The main job, end to end (`scripts/main.sh`)", "≤ 10 min", "<= 10", "main_job",
          "the timed row (`time`; the job's own output is not kept)"),
    timed("The test suite, set up", "none set", "", "test_suite",
          "the timed row (pytest's own summary on a fresh-clone CI run)"),
    timed("The test suite with set-up, fresh clone", "none set", "", "test_suite_fresh", "the timed row"),
    *RANK_CLAIMS,
]  # fmt: skip


def verdict(goal: str, figure: Figure, unit: str) -> str:
    """``met`` (by the worst value's margin), or ``missed by`` how much (a range over rounds: from
    the best round's gap to the worst's; ``met in some rounds`` when only some meet it)."""
    if not goal:
        return "no target"
    op, bound = goal.split()
    limit = float(bound)

    def meets(value: float) -> bool:
        return {"<=": value <= limit, ">=": value >= limit, ">": value > limit}[op]

    worst, best = figure.worst, figure.best
    if unit == "" and limit == 1 and op == ">=":  # a share: all of them or not
        return "**met**" if meets(worst) else f"missed: {worst:.0%} of the runs"
    digits = 2 if unit in ("", "×", LOW_END) else 1

    def gap(value: float) -> str:
        return f"{abs(value - limit):.{digits}f}"

    if meets(worst):
        return f"**met** (by {gap(worst)}{unit})"
    if best is not None and meets(best):
        return f"met in some rounds, missed by up to {gap(worst)}{unit}"
    if best is not None and gap(best) != gap(worst):
        return f"missed by {gap(best)}–{gap(worst)}{unit}"
    return f"missed by {gap(worst)}{unit}"


def render(results: Path = RESULTS) -> str:
    lines = [
        "# Results: the project's claims, each figure computed from committed raw files",
        "",
        "Printed by `python benchmarks/results_page.py --write` from the rows and outputs under",
        "`benchmarks/results/`; no figure on this page is typed by hand, and `tests/test_results_page.py`",
        "fails when a committed row and this page disagree. How each run was taken (the machine, how quiet",
        "it was, what was tried) is in the dated log, [docs/benchmarks.md](benchmarks.md). A claim with no",
        "committed raw output (server speed, the stand-in identity checks of `bench_identity.py`) is in the",
        "log only.",
        "",
        "| claim | figure now | target | met? | commit | command | raw file |",
        "|---|---|---|---|---|---|---|",
    ]
    hows = []
    for claim in CLAIMS:
        figure = claim.compute(results)
        command = _timing_command(results, claim.command) if claim.raw == "timings.csv" else claim.command
        status = verdict(claim.goal, figure, claim.unit)
        lines.append(
            f"| {claim.claim} | {figure.text} | {claim.target} | {status} | `{figure.commit}` | `{command}` "
            f"| `benchmarks/results/{claim.raw}` |"
        )
        hows.append(f"- **{claim.claim}**: {claim.how}.")
    lines += ["", "## How each figure is computed", "", *hows, ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--results", type=Path, default=RESULTS, help="the raw files' folder")
    parser.add_argument("--write", action="store_true", help="write docs/results.md")
    parser.add_argument("--check", action="store_true", help="exit 1 when docs/results.md differs")
    args = parser.parse_args(argv)
    page = render(args.results)
    if args.check:
        same = PAGE.is_file() and PAGE.read_text(encoding="utf-8") == page
        print(
            "docs/results.md is the page" if same else "docs/results.md differs: run --write", file=sys.stderr
        )
        return 0 if same else 1
    if args.write:
        PAGE.write_text(page, encoding="utf-8")
    else:
        print(page, end="")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
