"""Token estimation and deterministic compaction that keep every prompt inside its budget."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any

from subagent_lab.types import Message

PER_MESSAGE_OVERHEAD = 6
"""Chat-template tokens around each message (role markers, separators)."""
PROTOCOL_OVERHEAD = 400
"""Room for what an adapter adds to the prompt (the JSON action protocol and its tool list)."""
SAFETY = 1.10
"""Margin on estimates; the loop never starts a call whose estimated prompt + output could overshoot."""
COMPACT_TARGET = 0.7
"""Compaction shrinks the prompt to this share of the context budget, so it does not re-run every step."""
KEEP_RECENT_RESULTS = 2


def estimate_text(text: str) -> int:
    """Conservative token estimate: UTF-8 bytes / 3 (BPE tokenizers average 3.5-4 bytes per token
    on code and ~3 bytes per CJK character)."""
    return math.ceil(len(text.encode("utf-8", errors="replace")) / 3)


def estimate_messages(messages: list[Message], tools: list[dict[str, Any]] | None = None) -> int:
    """Estimated prompt tokens of ``messages`` plus the tool schemas sent with them."""
    total = PROTOCOL_OVERHEAD
    for msg in messages:
        total += PER_MESSAGE_OVERHEAD + estimate_text(msg.content)
        for call in msg.tool_calls:
            total += estimate_text(call.name) + estimate_text(json.dumps(call.arguments)) + 8
    if tools:
        total += estimate_text(json.dumps(tools))
    return total


@dataclass
class ContextMeter:
    """Estimates prompt size, calibrated by the real prompt_tokens the server reported last time.

    The calibration factor only ever raises estimates (never below the raw estimate), so an
    estimator that undershoots on some text is corrected after one call.
    """

    calibration: float = 1.0

    def estimate(self, messages: list[Message], tools: list[dict[str, Any]] | None = None) -> int:
        return math.ceil(estimate_messages(messages, tools) * self.calibration * SAFETY)

    def observe(self, raw_estimate: int, actual_prompt_tokens: int) -> None:
        if raw_estimate > 0 and actual_prompt_tokens > 0:
            self.calibration = max(1.0, actual_prompt_tokens / raw_estimate)


def compact(
    messages: list[Message],
    *,
    budget: int,
    meter: ContextMeter,
    tools: list[dict[str, Any]] | None = None,
) -> tuple[list[Message], int]:
    """Replace the oldest tool observations with a short stub until the prompt fits ``budget``.

    Deterministic: the same history and budget always give the same result. The system prompt,
    the task and the most recent observations are kept. Returns (messages, stubs written).
    """
    target = int(budget * COMPACT_TARGET)
    out = list(messages)
    tool_idx = [i for i, m in enumerate(out) if m.role == "tool" and not m.content.startswith("[compacted")]
    candidates = tool_idx[:-KEEP_RECENT_RESULTS] + tool_idx[-KEEP_RECENT_RESULTS:]
    done = 0
    for i in candidates:
        if meter.estimate(out, tools) <= target:
            break
        old = out[i]
        stub = (
            f"[compacted: {old.name or 'tool'} output of {len(old.content)} characters was removed "
            "to fit the context budget; call the tool again if you need it]"
        )
        out[i] = old.model_copy(update={"content": stub})
        done += 1
    return out, done
