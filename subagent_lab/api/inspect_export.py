"""Runs as an Inspect AI ``.eval`` log (``sl.to_inspect``, ``subagent-lab export --inspect``).

Written through inspect_ai's own writer (``write_eval_log``), so ``inspect view`` and
``read_eval_log`` open it. inspect_ai is an optional extra (``pip install 'subagent_lab[inspect]'``),
imported only when an export is asked for.

One sample per run: ``input`` the task, ``target`` the task's own gold spans (``path:start-end``;
``absent`` for a task whose answer is that the thing does not exist; empty for a run outside a
benchmark or a task without gold), ``scores`` the harness's (``quality`` and its parts for a scored
sweep row, its ``answer`` the evidence that was scored; ``contract_valid`` always), the run's start,
end and duration, ``metadata`` the model asked for and used, the scaffold and the provenance
hashes. The gold is the row's own (its ``gold`` column), else the sweep's task file's (its
``spec.json``), else a built-in suite's only when the row's suite is one: a task file's id that is
also a built-in id never gets the built-in task's gold. The transcript is the trace
(``api.inspect_events``): each run a span of type ``agent``, a parent's children spans inside it;
a trace is read only inside the directory exported (a row's or a child's path that leads out of
it is not followed), and a no-model run (``none``, ``retrieval``) shows no tokens.
"""

from __future__ import annotations

import importlib.util
import json
import math
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from subagent_lab.api.inspect_events import inside, transcript, when
from subagent_lab.core.trace import RunEnded, RunStarted, read_trace
from subagent_lab.core.types import FLOOR_CHOICES
from subagent_lab.experiments.rows import SCORE_COLUMNS, ResultLog

if TYPE_CHECKING:
    from inspect_ai.log import EvalSample
    from inspect_ai.model import ModelUsage

    from subagent_lab.bench.task import BenchTask

INSTALL_HINT = "pip install 'subagent_lab[inspect]' (or: pip install inspect_ai)"
PROVENANCE_COLUMNS = (
    "code_version", "code_hash", "config_hash", "prompts_hash", "suite_hash", "weights_sha256", "provenance",
)  # fmt: skip
"""A sweep row's provenance columns (``experiments.stamp.row_stamp``), kept in each sample."""
RUN_COLUMNS = (
    "run_key", "task_id", "kind", "split", "profile", "model_choice", "model_used", "model_id", "fallback",
    "variant", "scaffold", "repeat", "seed", "temperature", "terminal_reason", "status", "steps",
    "model_calls", "cost_usd", "elapsed_s", "trace_path",
)  # fmt: skip
SPEC_DEPTH = 4
"""How many folders above a row's trace a sweep's ``spec.json`` is looked for
(``<sweep>/traces/<session>/<run>.jsonl``)."""


def inspect_available() -> bool:
    """Whether inspect_ai can be imported (the ``inspect`` extra is installed)."""
    return importlib.util.find_spec("inspect_ai") is not None


def to_inspect(source: Any, path: str | Path, *, task: str = "subagent_lab") -> Path:
    """Write the runs ``source`` names as one Inspect ``.eval`` log and return its path.

    Args:
        source: A sweep directory (its scored ``results.jsonl`` rows), a directory of traces
            (each run that has no parent; children are spans of their parent's sample), a trace
            file, a run result, a sweep row, a sweep's DataFrame (``sl.sweep``'s, or one read
            back), or a list of these.
        path: The ``.eval`` file to write (parent folders are created).
        task: The task name the log shows.
    """
    if not inspect_available():
        raise ImportError(f"to_inspect needs inspect_ai, which is not installed: {INSTALL_HINT}")
    from inspect_ai.log import (
        EvalConfig,
        EvalDataset,
        EvalLog,
        EvalMetric,
        EvalPlan,
        EvalResults,
        EvalScore,
        EvalSpec,
        EvalStats,
        write_eval_log,
    )

    rows = _rows(source, None)
    golds = _Golds()
    samples = [_sample(row, root, i + 1, golds) for i, (row, root) in enumerate(rows)]
    models = sorted({str(s.metadata.get("model_id") or "unknown") for s in samples})
    now = datetime.now(UTC).isoformat()
    scores = []
    for name in ("quality", "contract_valid"):
        values = [float(s.scores[name].as_float()) for s in samples if s.scores and name in s.scores]
        if values:
            metric = EvalMetric(name="mean", value=sum(values) / len(values))
            scores.append(EvalScore(name=name, scorer="subagent_lab", metrics={"mean": metric}))
    usage: dict[str, ModelUsage] = {}
    for sample in samples:
        for model, used in (sample.model_usage or {}).items():
            usage[model] = usage[model] + used if model in usage else used
    starts = [s.started_at for s in samples if s.started_at]
    ends = [s.completed_at for s in samples if s.completed_at]
    log = EvalLog(
        version=2,
        status="success",
        eval=EvalSpec(
            created=now,
            task=task,
            dataset=EvalDataset(name=task, samples=len(samples)),
            model=f"subagent_lab/{models[0]}" if len(models) == 1 else "subagent_lab/mixed",
            config=EvalConfig(),
            metadata={"models": models, "source": str(source) if isinstance(source, str | Path) else "runs"},
        ),
        plan=EvalPlan(name="subagent_lab"),
        results=EvalResults(total_samples=len(samples), completed_samples=len(samples), scores=scores),
        stats=EvalStats(
            started_at=str(min(starts)) if starts else now,
            completed_at=str(max(ends)) if ends else now,
            model_usage=usage,
        ),
        samples=samples,
    )
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    write_eval_log(log, str(out), format="eval")
    return out


Row = tuple[dict[str, Any], Path | None]
"""One run to export and the directory its traces must lie in (None: its own trace's folder)."""


def _rows(source: Any, root: Path | None) -> list[Row]:
    """One dict per run (a sweep's rows, or ``{"trace_path": ...}`` for each trace named), each with
    the directory its traces are read in."""
    if isinstance(source, list | tuple):
        return [row for item in source for row in _rows(item, root)]
    if isinstance(source, str | Path):
        where = Path(source)
        if where.name == "results.jsonl":
            where = where.parent
        if (where / "results.jsonl").is_file():
            latest = {row["run_key"]: row for row in ResultLog(where / "results.jsonl").rows()}
            return [({**row, "_sweep_dir": str(where)}, where) for row in latest.values()]
        if where.is_dir():
            traces = sorted(p for p in where.rglob("*.jsonl") if inside(p, where) and _is_root(p))
            return [({"trace_path": str(p)}, where) for p in traces]
        if where.is_file():
            return [({"trace_path": str(where)}, root)]
        raise FileNotFoundError(f"{source}: no sweep directory, trace directory or trace file there")
    if hasattr(source, "model_dump"):
        return [(source.model_dump(mode="json"), root)]
    if hasattr(source, "columns") and hasattr(source, "to_json"):  # a DataFrame: one row per record
        records: list[dict[str, Any]] = json.loads(source.to_json(orient="records", default_handler=str))
        # A sample per run: the give-up floor's rows (scored beside absent tasks, never run, not in
        # the sweep's log) are left out, as an export of the sweep's directory leaves them.
        from subagent_lab.bench.giveup import GIVE_UP

        records = [r for r in records if r.get("model_choice") != GIVE_UP]
        sweep = (getattr(source, "attrs", None) or {}).get("sweep_dir")
        return [({**r, "_sweep_dir": sweep} if sweep else r, root) for r in records]
    if hasattr(source, "to_dict"):  # a pandas row
        return [({k: _plain(v) for k, v in source.to_dict().items()}, root)]
    if isinstance(source, dict):
        return [(dict(source), root)]
    raise TypeError(f"cannot export {type(source).__name__}: pass a sweep directory, traces or run results")


def _plain(value: Any) -> Any:
    """A cell as plain Python: NaN (an empty cell) as None, a numpy scalar as its number."""
    if hasattr(value, "item") and not isinstance(value, list | dict | str):
        value = value.item()
    return None if isinstance(value, float) and math.isnan(value) else value


def _is_root(trace: Path) -> bool:
    """A trace that is a run of its own (not a child of a parent), by its first event."""
    with trace.open(encoding="utf-8") as fh:
        first = fh.readline()
    try:
        event = json.loads(first)
    except ValueError:
        return False
    return isinstance(event, dict) and event.get("kind") == "run_started" and not event.get("parent_run_id")


def _sample(row: dict[str, Any], root: Path | None, number: int, golds: _Golds) -> EvalSample:
    from inspect_ai.log import EvalSample
    from inspect_ai.model import ChatMessageAssistant, ChatMessageUser, ModelOutput
    from inspect_ai.scorer import Score

    trace = Path(str(row.get("trace_path") or ""))
    readable = bool(row.get("trace_path")) and (inside(trace, root) if root is not None else trace.is_file())
    events = read_trace(trace) if readable else []
    started = next((e for e in events if isinstance(e, RunStarted)), None)
    ended = next((e for e in reversed(events) if isinstance(e, RunEnded)), None)
    meta = {k: row[k] for k in (*RUN_COLUMNS, *PROVENANCE_COLUMNS) if row.get(k) is not None}
    if started is not None:
        meta.setdefault("profile", started.profile)
        meta.setdefault("model_choice", started.model_choice)
        meta.setdefault("model_used", started.model_used)
        meta.setdefault("model_id", started.model_id)
        meta.setdefault("trace_path", str(trace))
    if ended is not None:
        meta.setdefault("terminal_reason", ended.terminal_reason)
        meta.setdefault("status", ended.status)
    contract = (
        row.get("contract") if isinstance(row.get("contract"), dict) else ended.contract if ended else None
    )
    task_text, target = golds.task_and_target(row, started)
    evidence = _evidence(row, contract)
    valid = bool(contract) or bool(row.get("contract_valid"))
    scores = {"contract_valid": Score(value=float(valid), answer=evidence)}
    if row.get("quality") is not None:
        parts = {k: row[k] for k in SCORE_COLUMNS if row.get(k) is not None and k != "quality"}
        scores["quality"] = Score(
            value=float(row["quality"]),
            answer=evidence,
            explanation=meta.get("terminal_reason"),
            metadata=parts,
        )
    answer = _answer(contract)
    child_root = root if root is not None else trace.resolve().parent
    transcript_events, usage = transcript(events, None, child_root) if started is not None else ([], {})
    if str(meta.get("model_used") or meta.get("model_choice")) in FLOOR_CHOICES:
        usage = {}  # no model ran: whatever the harness estimated for its budgets was never spent
    begun, elapsed = _times(row, started, ended)
    return EvalSample(
        id=str(row.get("run_key") or (started.run_id if started else number)),
        epoch=1,
        input=task_text,
        target=target,
        messages=[ChatMessageUser(content=task_text), ChatMessageAssistant(content=answer)],
        output=ModelOutput.from_content(str(meta.get("model_id") or "unknown"), answer),
        scores=scores,
        metadata=meta,
        events=transcript_events,
        model_usage=usage,
        started_at=when(begun).isoformat() if begun is not None else None,
        completed_at=when(begun + elapsed).isoformat() if begun is not None and elapsed is not None else None,
        total_time=elapsed,
        working_time=elapsed,
    )


def _times(
    row: dict[str, Any], started: RunStarted | None, ended: RunEnded | None
) -> tuple[float | None, float | None]:
    """When the run began (epoch seconds) and how long it took: the trace's, else the row's."""
    elapsed = ended.elapsed_s if ended is not None else None
    if elapsed is None and isinstance(row.get("elapsed_s"), int | float):
        elapsed = float(row["elapsed_s"])
    return (started.ts if started is not None else None), elapsed


def _evidence(row: dict[str, Any], contract: dict[str, Any] | None) -> str:
    """The evidence the score was computed from, one item a line: the row's ``evidence`` column,
    else the contract's, else the ``path:line`` items of a parent's answer (as the delegation study
    scores it, ``delegation_ledger.answer_evidence``)."""
    from subagent_lab.experiments.delegation.ledger import answer_evidence

    items: Any = row.get("evidence")
    if isinstance(items, str):
        try:
            items = json.loads(items)
        except ValueError:
            items = [items]
    if not isinstance(items, list):
        items = (contract or {}).get("evidence")
    if not isinstance(items, list):
        text = row.get("answer") if isinstance(row.get("answer"), str) else (contract or {}).get("answer")
        items = answer_evidence(text) if isinstance(text, str) else []
    return "\n".join(str(item) for item in items)


def _answer(contract: dict[str, Any] | None) -> str:
    if not contract:
        return ""
    for key in ("summary", "answer", "verdict"):
        if isinstance(contract.get(key), str):
            return str(contract[key])
    return str(contract)


class _Golds:
    """Each row's task and gold: the row's ``gold``, else its sweep's task file, else a built-in
    suite named by its ``split`` (read once per file)."""

    def __init__(self) -> None:
        self._suites: dict[str, dict[str, BenchTask] | None] = {}

    def task_and_target(self, row: dict[str, Any], started: RunStarted | None) -> tuple[str, str | list[str]]:
        """The task as the user gave it, and its gold (``absent``; empty outside a benchmark)."""
        text = str(row.get("task") or (started.request_task or started.task if started else "") or "")
        task_id = row.get("task_id")
        if not task_id:
            return text or "(no task recorded)", ""
        task = self._task(row, str(task_id))
        if isinstance(row.get("gold"), str | list):
            return text or (task.prompt if task else str(task_id)), _target(
                _labels(row["gold"]), row.get("kind")
            )
        if task is None:
            return text or str(task_id), ""
        return text or task.prompt, _target([span.label for span in task.gold], task.kind)

    def _task(self, row: dict[str, Any], task_id: str) -> BenchTask | None:
        from subagent_lab.bench.suite import is_suite_id

        suite = _spec_split(row)
        label = row.get("split")
        if suite is None and (label is None or (isinstance(label, str) and is_suite_id(label))):
            suite = label or ""  # "": the dev and test suites, as ``bench_task`` looks
        if suite is None:
            return None  # a task file's task whose file is not known: no gold rather than another's
        if suite not in self._suites:
            self._suites[suite] = _load(suite)
        return (self._suites[suite] or {}).get(task_id)


def _load(suite: str) -> dict[str, BenchTask] | None:
    from subagent_lab.bench.suite import load_suite
    from subagent_lab.core.types import ConfigError

    try:
        tasks = load_suite(suite) if suite else [*load_suite("dev"), *load_suite("test")]
    except (ConfigError, OSError, ValueError):
        return None
    return {task.id: task for task in tasks}


def _spec_split(row: dict[str, Any]) -> str | None:
    """The suite (a built-in id or a task file's path) of the sweep a row belongs to, from its
    ``spec.json``: the sweep directory given, or one above the row's trace."""
    places = [Path(str(row["_sweep_dir"]))] if row.get("_sweep_dir") else []
    if row.get("trace_path"):
        places += list(Path(str(row["trace_path"])).parents)[:SPEC_DEPTH]
    for place in places:
        spec = place / "spec.json"
        try:
            split = json.loads(spec.read_text(encoding="utf-8")).get("split") if spec.is_file() else None
        except (OSError, ValueError, AttributeError):
            continue
        if isinstance(split, str) and split:  # a task file's path is saved relative to the sweep
            relative = place / split
            return str(relative) if not Path(split).is_absolute() and relative.is_file() else split
    return None


def _labels(gold: str | list[Any]) -> list[str]:
    if isinstance(gold, str):
        try:
            parsed = json.loads(gold)
        except ValueError:
            return [gold] if gold else []
        gold = parsed if isinstance(parsed, list) else [parsed]
    return [str(item) for item in gold]


def _target(labels: list[str], kind: Any) -> str | list[str]:
    if labels:
        return labels
    return "absent" if kind == "absent" else ""
