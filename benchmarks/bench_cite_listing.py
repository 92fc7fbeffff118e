"""What each final-answer listing lets a model cite once Find has shown the right definitions (issue 23).

No model runs. For every dev task whose gold spans start at a definition (``def``/``class``
anchors), Find is called on each of those names, as a model that walked the structure well would;
then the final answer's evidence choices are built as each preset builds them, and an answer that
cites the first ``max_evidence`` items listed (small models fill every slot with what is listed
first) is scored with the benchmark's scorer:

- ``symbols-guided``: the citable lines ranked by the task's words, within ``cite_margin`` of the best;
- ``symbols-units``: the units the structure tools showed, ``path:start-end``, in the order shown.

It measures the listing, not a model: the ceiling each listing leaves to a model that found the
right units. Dev by default; ``--split test`` prints the same ceiling on the test split, to read a
model's test figures against once the preset is fixed (it chooses nothing: test is never used to
choose an aid).

    .venv/bin/python benchmarks/bench_cite_listing.py [--split dev|test]
"""

from __future__ import annotations

import argparse
import re
import statistics
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import pandas as pd  # noqa: E402

from subagent_lab.analysis.stats import paired_difference  # noqa: E402
from subagent_lab.bench.scoring import score_run  # noqa: E402
from subagent_lab.bench.suite import load_suite  # noqa: E402
from subagent_lab.config.profiles import load_config  # noqa: E402
from subagent_lab.scaffold.cite_from_seen import citable, unit_items  # noqa: E402
from subagent_lab.scaffold.ranking import line_texts, rank_citable  # noqa: E402
from subagent_lab.tools.symbols.tools import find  # noqa: E402
from subagent_lab.workspace.sandbox import Workspace  # noqa: E402

DEFINITION = re.compile(r"^\s*(?:async\s+)?(?:def|class)\s+([A-Za-z_][A-Za-z0-9_]*)")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--split", default="dev", choices=("dev", "test"))
    split = parser.parse_args().split
    lab = load_config()
    guided = lab.scaffold("symbols-guided").scaffold
    units_preset = lab.scaffold("symbols-units").scaffold
    assert units_preset.param("CiteFromSeen", "units") and not guided.param("CiteFromSeen", "units")
    slots = guided.param("CiteFromSeen", "max_evidence")
    rows = []
    for task in load_suite(split):
        names = [m.group(1) for g in task.gold if g.anchor and (m := DEFINITION.match(g.anchor))]
        if not names:
            continue
        root = task.workspace_root()
        ws = Workspace(root)
        observations = [find(ws, name) for name in dict.fromkeys(names)]
        groups = [list(o.spans) for o in observations]
        items = citable(groups)
        units = [s for g in groups for s in g if s.end > s.start]
        ranked = rank_citable(
            items, line_texts(items, root), task.prompt, guided.param("CiteFromSeen", "margin")
        )
        listed = {
            "symbols-guided": ranked[:slots],
            "symbols-units": list(
                unit_items(units, line_texts([f"{u.path}:{u.start}" for u in units], root))
            )[:slots],
        }
        row: dict[str, object] = {
            "task": task.id,
            "kind": task.kind,
            "gold": len(task.gold),
            "def_gold": len(names),
        }
        for preset, evidence in listed.items():
            payload = {"status": "completed", "summary": "s", "findings": [], "evidence": evidence}
            score = score_run(task, payload, root)
            row[preset] = (score.gold_recall_file, score.strict_line_recall, score.quality)
        rows.append(row)
    print(f"{len(rows)} {split} tasks with definition-anchored gold; answer = the first {slots} items listed")
    print(f"{'task':34} {'kind':10} gold  def   guided file/strict/quality    units file/strict/quality")
    for r in rows:
        g, u = r["symbols-guided"], r["symbols-units"]
        assert isinstance(g, tuple) and isinstance(u, tuple)
        print(
            f"{r['task']:34} {r['kind']:10} {r['gold']:>4} {r['def_gold']:>4}   "
            f"{g[0]:.2f} / {g[1]:.2f} / {g[2]:.2f}             {u[0]:.2f} / {u[1]:.2f} / {u[2]:.2f}"
        )
    for preset in ("symbols-guided", "symbols-units"):
        values = [r[preset] for r in rows]
        means = [statistics.fmean(v[i] for v in values) for i in range(3)]  # type: ignore[index]
        print(f"mean {preset:15} file {means[0]:.2f}  strict {means[1]:.2f}  quality {means[2]:.2f}")
    long = pd.DataFrame(
        [
            {"task_id": r["task"], "arm": p, "file": v[0], "strict": v[1], "quality": v[2]}
            for r in rows
            for p in ("symbols-units", "symbols-guided")
            for v in [r[p]]
            if isinstance(v, tuple)
        ]
    )
    for value in ("file", "strict", "quality"):
        d = paired_difference(long, "symbols-units", "symbols-guided", arm="arm", value=value)
        print(
            f"units - guided, {value:8}: {d.diff.mean:+.2f} [{d.diff.low:+.2f}, {d.diff.high:+.2f}]"
            f"  (W/L/T {d.wins}/{d.losses}/{d.ties}; bootstrap 95% over tasks)"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
