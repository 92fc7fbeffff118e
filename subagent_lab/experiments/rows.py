"""A sweep's rows: one flat, scored row per run, and the durable results log they go to.

Rows are appended to ``results.jsonl`` as runs finish (one flushed line each), so a killed sweep
loses only the runs in flight; a torn last line is skipped when read.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd

from subagent_lab.analysis.evidence_origin import evidence_origin
from subagent_lab.bench.score import LOC_COLUMNS
from subagent_lab.core.trace import Event
from subagent_lab.experiments.spec import RunSpec
from subagent_lab.tools.symbols import SYMBOL_TOOLS

TOOLS = ("Read", "Grep", "Glob", *SYMBOL_TOOLS)
"""The tools a row counts calls of: a child's read-only tools, the symbol tools included (rows
written before these counted Read, Grep and Glob only: the symbol tools' columns are then absent)."""
SCORE_COLUMNS = (
    "evidence_count", "evidence_unique", "evidence_counted", "unseen_evidence",
    "evidence_precision_file", "evidence_precision_line", "gold_recall_file", "gold_recall_line",
    "strict_line_precision", "strict_line_recall", "gold_line_share", *LOC_COLUMNS, "keyword_recall",
    "keywords_in_task", "keywords_listed", "keywords_tool_only", "admits_absence", "absence_restated",
    "invented_evidence", "trace_checked", "quality", "quality_legacy",
)  # fmt: skip
"""The score's columns in a row (docs/numbers.md); list-valued ones as their counts. Rows written
before issue 36 lack ``evidence_counted``, the localization columns (``LOC_COLUMNS``) and
``keywords_tool_only``."""
OUTCOMES = ("executed", "repeated", "denied", "failed")
ORIGIN_COLUMNS = (
    "candidates_given", "candidates_dropped", "evidence_kept", "evidence_narrowed", "evidence_added",
    "evidence_from_retrieval", "evidence_from_model", "evidence_origin",
)  # fmt: skip
"""What the model made of the retrieval it was given (``analysis.evidence_origin``; docs/numbers.md):
None in a row whose run was given no candidates."""


def base_row(run: RunSpec) -> dict[str, Any]:
    return {
        "run_key": run.run_key,
        "task_id": run.task.id,
        "kind": run.task.kind,
        "package": run.task.package,
        "split": run.suite,  # the suite's name: dev-tree runs dev's tasks in other workspaces
        "profile": run.profile,
        "model_choice": run.model,
        "variant": run.variant.label,
        "overrides": json.dumps(run.variant.overrides, sort_keys=True),
        "scaffold": run.scaffold or "profile",
        **run.stamp,
        "repeat": run.repeat,
        "seed": run.seed,
        "temperature": run.temperature,
        "task_meta": json.dumps(run.task.meta, sort_keys=True, default=str),
        # The task's own gold as its suite had it: an export reads it here, never by id elsewhere.
        "gold": json.dumps([span.label for span in run.task.gold]),
    }


def result_row(run: RunSpec, result: dict[str, Any], score: dict[str, Any]) -> dict[str, Any]:
    """Flatten a SubagentResult (as a dict) and its Score into one table row.

    ``score`` is empty for a task without gold (``BenchTask.scored``): its score columns are None.
    """
    usage = result["usage"]
    row = {
        **base_row(run),
        "model_used": result["model_used"],
        "model_id": result["model_id"],
        "seed": result["seed"],
        "temperature": result["temperature"],
        "fallback": result["fallback"],
        "terminal_reason": result["terminal_reason"],
        "status": result["status"],
        "detail": result["detail"][-800:],
        "steps": result["steps"],
        "model_calls": result["model_calls"],
        "prompt_tokens": usage["prompt_tokens"],
        "completion_tokens": usage["completion_tokens"],
        "cached_tokens": usage["cached_tokens"],
        "total_tokens": usage["prompt_tokens"] + usage["completion_tokens"],
        "usage_estimated": usage["estimated"],
        "cost_usd": result["cost_usd"],
        "elapsed_s": result["elapsed_s"],
        "model_time_s": result["model_time_s"],
        "harness_time_s": max(result["elapsed_s"] - result["model_time_s"], 0.0),
        "contract_valid": result["contract"] is not None,
        "repairs_used": result["repairs_used"],
        "grace_used": result["grace_used"],
        "aids_grammar": ",".join(result.get("aids_grammar") or []),
        "aids_checked": ",".join(result.get("aids_checked") or []),
        "grounded_ratio": result["grounded_ratio"],
        "seen_ratio": result["seen_ratio"],
        "prompt_counts_exact": result["prompt_counts_exact"],
        "trace_path": result["trace_path"],
        # The cited items themselves, not only their scores: where a model cites (library code,
        # tests, docs) is read from a saved table, without the traces that may be gone.
        "evidence": json.dumps(list((result["contract"] or {}).get("evidence") or [])),
        "error": None,
    }
    for tool in TOOLS:
        for outcome in OUTCOMES:
            row[f"{tool}_{outcome}"] = result["tool_usage"].get(tool, {}).get(outcome, 0)
    for key in SCORE_COLUMNS:
        value = score.get(key)
        row[key] = len(value) if isinstance(value, list) else value  # a list column: its count
    return row


def origin_columns(events: list[Event]) -> dict[str, Any]:
    """The ``ORIGIN_COLUMNS`` of one run's trace: counts, and each item's origin as JSON."""
    origin = evidence_origin(events)
    if origin is None:
        return dict.fromkeys(ORIGIN_COLUMNS)
    return {
        "candidates_given": len(origin.candidates),
        "candidates_dropped": len(origin.dropped),
        "evidence_kept": origin.count(action="kept"),
        "evidence_narrowed": origin.count(action="narrowed"),
        "evidence_added": origin.count(action="added"),
        "evidence_from_retrieval": origin.count(source="retrieval"),
        "evidence_from_model": origin.count(source="model"),
        "evidence_origin": json.dumps([i.model_dump() for i in origin.items]),
    }


class ResultLog:
    """Append-only results.jsonl with one flushed, fsynced line per finished run; ``rows`` reads
    the paths a row saved relative to the log's directory back as absolute ones."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()

    def rows(self) -> list[dict[str, Any]]:
        if not self.path.exists():
            return []
        rows = []
        for line in self.path.read_text(encoding="utf-8").splitlines():
            try:
                row = json.loads(line)
            except json.JSONDecodeError:
                continue  # a torn last line from a killed sweep; that run is simply redone
            rows.append(absolute_row(row, self.path.parent.resolve()) if isinstance(row, dict) else row)
        return rows

    def append(self, row: dict[str, Any]) -> None:
        with self._lock, self.path.open("a+", encoding="utf-8") as fh:
            # A sweep killed mid-write leaves a torn line without its newline: never glue onto it.
            if fh.tell() > 0:
                fh.seek(fh.tell() - 1)
                torn = fh.read(1) != "\n"
                fh.seek(0, os.SEEK_END)
                if torn:
                    fh.write("\n")
            fh.write(json.dumps(row, default=str) + "\n")
            fh.flush()
            os.fsync(fh.fileno())


PATH_COLUMNS = ("trace_path", "child_traces")
"""Row columns holding file paths (``child_traces``: comma-separated): saved relative to the sweep
directory (``relative_row``), so a sweep directory can be moved, shared or committed."""


def _rewrite(value: object, change: Callable[[str], str]) -> object:
    if not isinstance(value, str) or not value:
        return value
    return ",".join(change(part) for part in value.split(","))


def relative_row(row: dict[str, Any], out: Path) -> dict[str, Any]:
    """``row`` with each path under ``out`` written relative to it (URLs and paths elsewhere as
    they are)."""
    base = out.resolve()

    def rel(path: str) -> str:
        if "://" in path or not Path(path).is_absolute():
            return path
        try:
            return Path(path).resolve().relative_to(base).as_posix()
        except ValueError:
            return path

    return {k: _rewrite(v, rel) if k in PATH_COLUMNS else v for k, v in row.items()}


def absolute_row(row: dict[str, Any], out: Path) -> dict[str, Any]:
    """``relative_row`` undone: each relative path resolved under ``out``."""

    def absolute(path: str) -> str:
        return path if "://" in path or Path(path).is_absolute() else str(out / path)

    return {k: _rewrite(v, absolute) if k in PATH_COLUMNS else v for k, v in row.items()}


def relative_table(df: pd.DataFrame, out: str | Path) -> pd.DataFrame:
    """``df`` with its path columns relative to the sweep directory ``out`` (for a saved table)."""
    shown = df.copy()
    for column in (c for c in PATH_COLUMNS if c in shown.columns):
        shown[column] = [relative_row({column: v}, Path(out))[column] for v in shown[column]]
    return shown


def load_results(out: str | Path) -> pd.DataFrame:
    """The table of a sweep directory (latest row per run key), readable in a fresh kernel; the
    saved relative paths resolved under ``out`` (wherever it now lives, ``ResultLog.rows``)."""
    rows = ResultLog(Path(out) / "results.jsonl").rows()
    latest = {row["run_key"]: row for row in rows}
    return pd.DataFrame(list(latest.values()))
