"""Token estimation and deterministic compaction that keep every prompt inside its budget.

Compaction shortens old tool observations instead of deleting them: the oldest first, keeping the
most recent ones whole, so the newest evidence always stays in view. A shortened observation
keeps its first lines and says so; calling the tool again is then not a repeat (see dispatch).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from typing import Any

from subagent_lab.core.types import Message

PER_MESSAGE_OVERHEAD = 6
"""Chat-template tokens around each message (role markers, separators)."""
PROTOCOL_OVERHEAD = 400
"""Room for what an adapter adds to the prompt (the JSON action protocol and its tool list)."""
KEEP_RECENT_RESULTS = 2
"""Tool observations at the end of the conversation that compaction leaves whole."""
SHORTENED_PREFIX = "[shortened"
STUB_PREFIX = "[compacted"
HEAD_LINES = 4


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


def is_compacted(message: Message) -> bool:
    """Whether compaction shortened or replaced this tool observation."""
    return message.content.startswith((SHORTENED_PREFIX, STUB_PREFIX))


def _shorten(message: Message) -> Message:
    lines = message.content.splitlines()
    head = "\n".join(lines[:HEAD_LINES])
    note = (
        f"{SHORTENED_PREFIX}: {message.name or 'tool'} output of {len(lines)} lines, first {HEAD_LINES} "
        "kept to fit the context budget; call the tool again to see it all]"
    )
    return message.model_copy(update={"content": f"{note}\n{head}"})


def _stub(message: Message) -> Message:
    note = f"{STUB_PREFIX}: {message.name or 'tool'} output removed to fit the context budget]"
    return message.model_copy(update={"content": note})


def compact(
    messages: list[Message], fits: Callable[[list[Message]], bool], *, keep_recent: int = KEEP_RECENT_RESULTS
) -> tuple[list[Message], int]:
    """Shorten tool observations, oldest first, until ``fits(messages)``; returns (messages, edits).

    Deterministic: the same history and budget always give the same result. The system prompt,
    the task and the ``keep_recent`` newest observations are kept whole for as long as anything
    else can give way; only then are they shortened too, and last of all old ones become stubs.
    """
    out = list(messages)
    tool_idx = [i for i, m in enumerate(out) if m.role == "tool"]
    older, recent = tool_idx[: max(len(tool_idx) - keep_recent, 0)], tool_idx[-keep_recent:]
    edits = 0
    for indexes, edit in ((older, _shorten), (recent, _shorten), (older, _stub)):
        for i in indexes:
            if fits(out):
                return out, edits
            if (edit is _shorten and is_compacted(out[i])) or out[i].content.startswith(STUB_PREFIX):
                continue
            out[i] = edit(out[i])
            edits += 1
    return out, edits
