"""CPU time of building one request's wire form (the adapter's ``wire``, or ``_kwargs`` before it).

A 32-message conversation (a system prompt, the task, 15 searches and their results) with the
read-only tools and the ``ExploreResult`` contract, built 2,000 times per protocol and phase
(``process_time``); each build starts afresh (nothing held from the last). Messages are rendered
once per adapter either way (the render memo). ``send`` is one build (prompts estimated);
``count+send`` what a call with exact counts (``count_url``) builds: the count's body, then the
send's (``_count_body`` and ``_kwargs`` before; now one ``wire``, taken again to send).
Run it from a worktree root to measure that commit::

    PYTHONPATH=$PWD python benchmarks/bench_wire_build.py
"""

from __future__ import annotations

import time
from typing import Any

import subagent_lab
from subagent_lab.core.contracts import contract_schema
from subagent_lab.core.policy import FINISH_SCHEMA
from subagent_lab.core.types import Message, ModelRequest, ToolCall
from subagent_lab.models.openai_chat import OpenAIChatModel
from subagent_lab.tools.registry import READONLY_TOOLS

BUILDS = 2000


def conversation() -> list[Message]:
    messages = [Message(role="system", content="S" * 2000), Message(role="user", content="find login")]
    for i in range(15):
        call = ToolCall(id=f"c{i}", name="Grep", arguments={"pattern": "x"})
        messages.append(Message(role="assistant", content="look", tool_calls=[call]))
        messages.append(Message(role="tool", content="a.py:1: x\n" * 20, tool_call_id=f"c{i}", name="Grep"))
    return messages


def main() -> int:
    messages, answer = conversation(), contract_schema("ExploreResult")
    tools = [*(t.schema() for t in READONLY_TOOLS.values()), FINISH_SCHEMA]
    print(f"code: {subagent_lab.__file__}")
    for protocol in ("json", "native"):
        model = OpenAIChatModel(base_url="http://127.0.0.1:9/v1", model="m", tool_protocol=protocol)
        build: Any = getattr(model, "wire", None) or model._kwargs  # type: ignore[attr-defined]
        held = getattr(model, "_held", None)
        count: Any = build if held is not None else model._count_body  # type: ignore[attr-defined]

        def both(request: ModelRequest, count: Any = count, build: Any = build) -> None:
            count(request)
            build(request)

        for phase in ("act", "final"):
            for name, run in (("send", build), ("count+send", both)):
                requests = [
                    ModelRequest(
                        messages=messages,
                        tools=tools,
                        final_schema=answer,
                        phase=phase,
                        allowed_tools=["Grep", "Read", "finish"],
                    )
                    for _ in range(BUILDS)
                ]
                started = time.process_time()
                for request in requests:
                    run(request)
                    if held is not None:
                        held.wire = None
                per = (time.process_time() - started) / BUILDS * 1e6
                print(f"{protocol:6} {phase:5} {name:10} {per:6.1f} us per call")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
