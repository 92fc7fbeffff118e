"""The field's localization metrics as a table: file and function Acc@1/Acc@5 and unit recall@4
per split x scaffold x model, with bootstrap 95% intervals, over the headline's tasks and again
over the non-leaking ones, with the leak count (``analysis.headline.task_subsets``).

Absent tasks have no gold and no localization figure: they are left out here (their score stands
beside the give-up floor in ``headline.lift_table``).
"""

from __future__ import annotations

import math

import pandas as pd

from subagent_lab.analysis.headline import ARM, leak_count, task_subsets
from subagent_lab.analysis.stats import mean_ci

FIELD_METRICS: dict[str, str] = {
    "file_acc_at1": "file Acc@1",
    "file_acc_at5": "file Acc@5",
    "func_acc_at1": "func Acc@1",
    "func_acc_at5": "func Acc@5",
    "unit_recall_at4": "unit recall@4",
}
"""The columns shown and their headings (Acc@k counts k items; unit recall looks at 4)."""


def field_table(df: pd.DataFrame, metrics: dict[str, str] | None = None) -> pd.DataFrame:
    """One row per split x scaffold x model x subset (the headline's tasks, then ``no-leak``):
    ``tasks``, ``leaks`` (the leaking tasks among the headline's), and per metric its mean with
    the bootstrap 95% interval as text ("0.37 [0.25, 0.49]"). Empty without localization columns."""
    metrics = {k: v for k, v in (metrics or FIELD_METRICS).items() if k in df.columns}
    if df.empty or ARM not in df.columns or not metrics:
        return pd.DataFrame()
    keys = [c for c in ("split", "scaffold", "variant") if c in df.columns]
    if "variant" in keys and df["variant"].nunique(dropna=False) < 2:
        keys.remove("variant")
    rows: list[dict[str, object]] = []
    groups = df.groupby(keys, sort=True, dropna=False) if keys else [((), df)]
    for key, part in groups:
        labels = dict(zip(keys, key if isinstance(key, tuple) else (key,), strict=True))
        subsets = [(name, rows_) for name, rows_ in task_subsets(part) if name != "absent"]
        if not subsets:
            continue
        leaks = leak_count(subsets[0][1])
        for name, subset in subsets:
            for arm, arm_rows in subset.groupby(subset[ARM].astype(str), sort=True):
                row: dict[str, object] = {**labels, "model": arm, "on": name}
                row["tasks"] = int(arm_rows["task_id"].nunique())
                row["leaks"] = leaks
                for column, heading in metrics.items():
                    ci = mean_ci(arm_rows, column)
                    row[heading] = _cell(ci.mean, ci.low, ci.high)
                rows.append(row)
    return pd.DataFrame(rows)


def _cell(mean: float, low: float, high: float) -> str:
    if math.isnan(mean):
        return "–"
    return f"{mean:.2f}" if math.isnan(low) else f"{mean:.2f} [{low:.2f}, {high:.2f}]"
