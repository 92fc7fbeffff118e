"""Runs as an Inspect AI ``.eval`` log (``sl.to_inspect``, ``subagent-lab export --inspect``).

Written through inspect_ai's own writer (``write_eval_log``), so ``inspect view`` and
``read_eval_log`` open it. inspect_ai is an optional extra (``pip install 'subagent_lab[inspect]'``),
imported only when an export is asked for.

One sample per run: ``input`` the task, ``target`` the benchmark's gold spans (``path:start-end``;
``absent`` for a task whose answer is that the thing does not exist; empty for a run outside the
benchmark), ``scores`` the harness's (``quality`` and its parts for a scored sweep row,
``contract_valid`` always), ``metadata`` the model asked for and used, the scaffold and the
provenance hashes. The transcript is the trace: each run is a span of type ``agent`` (its token
totals in the span's metadata) holding a ``ModelEvent`` per model call (its reply, tool calls and
usage; its ``input`` the messages the harness added since the call before) and a ``ToolEvent`` per
tool call; a parent's children are spans inside the parent's, where the parent's trace says they
ended.
"""

from __future__ import annotations

import importlib.util
import json
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from subagent_lab.core.trace import (
    Event,
    ModelCalled,
    PromptAdded,
    RunEnded,
    RunStarted,
    SubagentEvent,
    ToolFinished,
    ToolStarted,
    read_trace,
)
from subagent_lab.core.types import Usage
from subagent_lab.experiments.rows import SCORE_COLUMNS, ResultLog

if TYPE_CHECKING:
    from inspect_ai.event import Event as InspectEvent
    from inspect_ai.event import ModelEvent as InspectModelEvent
    from inspect_ai.log import EvalSample
    from inspect_ai.model import ModelUsage, StopReason

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
STOP_REASONS = {"stop": "stop", "length": "max_tokens", "tool_calls": "tool_calls"}
"""The trace's ``finish_reason`` -> Inspect's ``stop_reason`` (any other: ``unknown``)."""


def inspect_available() -> bool:
    """Whether inspect_ai can be imported (the ``inspect`` extra is installed)."""
    return importlib.util.find_spec("inspect_ai") is not None


def to_inspect(source: Any, path: str | Path, *, task: str = "subagent_lab") -> Path:
    """Write the runs ``source`` names as one Inspect ``.eval`` log and return its path.

    Args:
        source: A sweep directory (its scored ``results.jsonl`` rows), a directory of traces
            (each run that has no parent; children are spans of their parent's sample), a trace
            file, a run result, a sweep row, or a list of these.
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

    rows = _rows(source)
    samples = [_sample(row, i + 1) for i, row in enumerate(rows)]
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
        stats=EvalStats(started_at=now, completed_at=now, model_usage=usage),
        samples=samples,
    )
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    write_eval_log(log, str(out), format="eval")
    return out


def _rows(source: Any) -> list[dict[str, Any]]:
    """One dict per run: a sweep's rows, or ``{"trace_path": ...}`` for each trace named."""
    if isinstance(source, list | tuple):
        return [row for item in source for row in _rows(item)]
    if isinstance(source, str | Path):
        where = Path(source)
        if where.name == "results.jsonl":
            where = where.parent
        if (where / "results.jsonl").is_file():
            latest = {row["run_key"]: row for row in ResultLog(where / "results.jsonl").rows()}
            return list(latest.values())
        if where.is_dir():
            traces = sorted(p for p in where.rglob("*.jsonl") if _is_root(p))
            return [{"trace_path": str(p)} for p in traces]
        if where.is_file():
            return [{"trace_path": str(where)}]
        raise FileNotFoundError(f"{source}: no sweep directory, trace directory or trace file there")
    if hasattr(source, "model_dump"):
        return [source.model_dump(mode="json")]
    if hasattr(source, "to_dict"):  # a pandas row
        return [dict(source.to_dict())]
    if isinstance(source, dict):
        return [dict(source)]
    raise TypeError(f"cannot export {type(source).__name__}: pass a sweep directory, traces or run results")


def _is_root(trace: Path) -> bool:
    """A trace that is a run of its own (not a child of a parent), by its first event."""
    with trace.open(encoding="utf-8") as fh:
        first = fh.readline()
    try:
        event = json.loads(first)
    except ValueError:
        return False
    return isinstance(event, dict) and event.get("kind") == "run_started" and not event.get("parent_run_id")


def _sample(row: dict[str, Any], number: int) -> EvalSample:
    from inspect_ai.log import EvalSample
    from inspect_ai.model import ChatMessageAssistant, ChatMessageUser, ModelOutput
    from inspect_ai.scorer import Score

    trace = Path(str(row.get("trace_path") or ""))
    events = read_trace(trace) if trace.is_file() else []
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
    task_text, target = _task_and_target(row, started)
    scores = {"contract_valid": Score(value=float(bool(contract) or bool(row.get("contract_valid"))))}
    if row.get("quality") is not None:
        parts = {k: row[k] for k in SCORE_COLUMNS if row.get(k) is not None and k != "quality"}
        scores["quality"] = Score(
            value=float(row["quality"]), explanation=meta.get("terminal_reason"), metadata=parts
        )
    answer = _answer(contract)
    transcript, usage = _transcript(events, None) if events else ([], {})
    return EvalSample(
        id=str(row.get("run_key") or (started.run_id if started else number)),
        epoch=1,
        input=task_text,
        target=target,
        messages=[ChatMessageUser(content=task_text), ChatMessageAssistant(content=answer)],
        output=ModelOutput.from_content(str(meta.get("model_id") or "unknown"), answer),
        scores=scores,
        metadata=meta,
        events=transcript,
        model_usage=usage,
    )


def _task_and_target(row: dict[str, Any], started: RunStarted | None) -> tuple[str, str | list[str]]:
    """The task as the user gave it, and the benchmark's gold for it (empty outside the benchmark)."""
    text = str(row.get("task") or (started.request_task or started.task if started else "") or "")
    task_id = row.get("task_id")
    if not task_id:
        return text or "(no task recorded)", ""
    from subagent_lab.api.views import bench_task

    try:
        bench = bench_task(str(task_id))
    except (KeyError, ValueError, LookupError):
        return text or str(task_id), ""
    gold = [span.label for span in bench.gold]
    return text or bench.prompt, gold if gold else "absent"


def _answer(contract: dict[str, Any] | None) -> str:
    if not contract:
        return ""
    for key in ("summary", "answer", "verdict"):
        if isinstance(contract.get(key), str):
            return str(contract[key])
    return str(contract)


def _transcript(
    events: Sequence[Event], parent: str | None
) -> tuple[list[InspectEvent], dict[str, ModelUsage]]:
    """A run's trace as Inspect events inside one agent span (children nested), and its usage
    (children included) per model."""
    from inspect_ai.event import SpanBeginEvent, SpanEndEvent, ToolEvent
    from inspect_ai.tool import ToolCallError

    started = next(e for e in events if isinstance(e, RunStarted))
    ended = next((e for e in reversed(events) if isinstance(e, RunEnded)), None)
    span, own = started.run_id, ended.usage if ended is not None else Usage()
    totals = {
        "input_tokens": own.prompt_tokens,
        "output_tokens": own.completion_tokens,
        "total_tokens": own.total_tokens,
    }
    metadata = {"run_id": span, "profile": started.profile, "model_used": started.model_used, **totals}
    metadata["terminal_reason"] = ended.terminal_reason if ended else None
    name = f"{started.profile} ({started.model_used})"
    begin = SpanBeginEvent(
        id=span, span_id=span, parent_id=parent, name=name, type="agent", metadata=metadata
    )
    out: list[InspectEvent] = [begin.model_copy(update={"timestamp": _when(started.ts)})]
    usage: dict[str, ModelUsage] = {}
    pending: list[Any] = [started.task]
    arguments: dict[str, dict[str, Any]] = {}
    for event in events:
        if isinstance(event, PromptAdded):
            pending.append(event.content)
        elif isinstance(event, ModelCalled):
            model_event = _model_event(event, started.model_id, pending, span)
            out.append(model_event)
            key, used = model_event.model, model_event.output.usage
            if used is not None:
                usage[key] = usage[key] + used if key in usage else used
            pending = []
        elif isinstance(event, ToolStarted):
            arguments[event.call_id] = event.arguments
        elif isinstance(event, ToolFinished):
            error = None
            if event.status != "ok":
                denied = event.status == "denied"
                text = event.text[:2000]
                error = ToolCallError("permission", text) if denied else ToolCallError("unknown", text)
            tool = ToolEvent(
                id=event.call_id,
                function=event.tool,
                arguments=arguments.get(event.call_id, {}),
                result=event.text,
                error=error,
                span_id=span,
                working_time=event.duration_s,
                agent_span_id=span,
            )
            out.append(tool.model_copy(update={"timestamp": _when(event.ts)}))
        elif isinstance(event, SubagentEvent) and event.kind in ("subagent_completed", "subagent_failed"):
            child = Path(event.child_trace)
            if child.is_file():
                nested, child_usage = _transcript(read_trace(child), span)
                out.extend(nested)
                for key, used in child_usage.items():
                    usage[key] = usage[key] + used if key in usage else used
    end = SpanEndEvent(id=span, span_id=span)
    out.append(end.model_copy(update={"timestamp": _when(ended.ts if ended else started.ts)}))
    return out, usage


def _model_event(event: ModelCalled, asked: str, pending: list[str], span: str) -> InspectModelEvent:
    """One model call: the messages the harness added since the call before, the reply, its usage."""
    from inspect_ai.event import ModelEvent
    from inspect_ai.model import (
        ChatCompletionChoice,
        ChatMessageAssistant,
        ChatMessageUser,
        GenerateConfig,
        ModelOutput,
    )
    from inspect_ai.tool import ToolCall

    calls = [
        ToolCall(id=str(c.get("id", "")), function=str(c.get("name", "")), arguments=c.get("arguments") or {})
        for c in event.tool_calls
    ]
    model = event.model_id or asked
    reply = ChatMessageAssistant(content=event.text, tool_calls=calls or None, model=model)
    stop = cast("StopReason", STOP_REASONS.get(event.finish_reason, "unknown"))
    choice = ChatCompletionChoice(message=reply, stop_reason=stop)
    output = ModelOutput(model=model, choices=[choice], usage=_usage(event.usage))
    called = ModelEvent(
        model=model,
        requested_model=asked,
        input=[ChatMessageUser(content=text) for text in pending],
        tools=[],
        tool_choice="auto",
        config=GenerateConfig(max_tokens=event.max_tokens),
        output=output,
        span_id=span,
        working_time=event.latency_s,
        cache="read" if event.cache_hit else None,
        metadata={"purpose": event.purpose, "step": event.step},
    )
    return called.model_copy(update={"timestamp": _when(event.ts)})


def _usage(usage: Usage) -> ModelUsage:
    from inspect_ai.model import ModelUsage

    return ModelUsage(
        input_tokens=usage.prompt_tokens,
        output_tokens=usage.completion_tokens,
        total_tokens=usage.total_tokens,
        input_tokens_cache_read=usage.cached_tokens or None,
    )


def _when(ts: float) -> datetime:
    return datetime.fromtimestamp(ts, UTC)
