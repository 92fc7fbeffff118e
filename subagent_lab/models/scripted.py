"""A deterministic scripted model for unit tests (never used in the default path)."""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterable
from typing import Any

from subagent_lab.core.context import estimate_messages, estimate_text
from subagent_lab.core.model import ModelCallError
from subagent_lab.core.tokens import TokenCount
from subagent_lab.core.types import ModelRequest, ModelResponse, ToolCall, Usage

Turn = ModelResponse | ModelCallError | Callable[[ModelRequest], ModelResponse]


def tool_call(name: str, _id: str | None = None, **arguments: Any) -> ModelResponse:
    """A turn that calls one tool."""
    return ModelResponse(tool_calls=[ToolCall(id=_id or f"c-{name}", name=name, arguments=arguments)])


def tool_calls(*calls: tuple[str, dict[str, Any]]) -> ModelResponse:
    """A turn that calls several tools."""
    return ModelResponse(
        tool_calls=[
            ToolCall(id=f"c{i}-{name}", name=name, arguments=args) for i, (name, args) in enumerate(calls)
        ]
    )


def final(payload: dict[str, Any] | str) -> ModelResponse:
    """A turn that answers with ``payload`` (a dict is JSON-encoded)."""
    return ModelResponse(text=payload if isinstance(payload, str) else json.dumps(payload))


class ScriptedModel:
    """Pops scripted turns in order; fills in usage like a real server would.

    Its "tokenizer" counts ``prompt_scale`` x the harness's raw byte estimate of a request: with a
    scale above 1.1 it reports more prompt tokens than any estimate the harness could make. With
    ``counts_prompts`` (the default) it exposes that count as ``count_prompt``, like the embedded
    server, so the loop's pre-call decision is exact; without, the loop must fall back on its
    estimate. Completion = the estimate of the reply, capped at ``max_tokens`` as a server caps it.
    """

    def __init__(
        self,
        turns: Iterable[Turn],
        *,
        completion_tokens: int | None = None,
        prompt_scale: float = 1.0,
        counts_prompts: bool = True,
    ) -> None:
        self.turns = list(turns)
        self.requests: list[ModelRequest] = []
        self.completion_tokens = completion_tokens
        self.prompt_scale = prompt_scale
        if counts_prompts:
            self.count_prompt = self._count

    def _tokens(self, request: ModelRequest) -> int:
        return math.ceil(estimate_messages(request.messages, request.tools) * self.prompt_scale)

    def _count(self, request: ModelRequest) -> TokenCount:
        return TokenCount(tokens=self._tokens(request), exact=True)

    def complete(self, request: ModelRequest) -> ModelResponse:
        self.requests.append(request)
        if not self.turns:
            raise AssertionError("ScriptedModel ran out of turns")
        turn = self.turns.pop(0)
        if isinstance(turn, ModelCallError):
            raise turn
        response = turn(request) if callable(turn) and not isinstance(turn, ModelResponse) else turn
        response = response.model_copy(deep=True)
        if response.spent_attempts > request.max_spent_attempts:  # as the adapter: no unaffordable retry
            spent = request.max_spent_attempts + 1
            raise ModelCallError("scripted: attempts lost, no budget for a retry", retryable=True,
                                 attempts=spent, spent_attempts=spent)  # fmt: skip
        if response.usage.total_tokens == 0:
            body = response.text + "".join(json.dumps(c.arguments) + c.name for c in response.tool_calls)
            completion = (
                self.completion_tokens if self.completion_tokens is not None else estimate_text(body) + 5
            )
            response.usage = Usage(
                prompt_tokens=self._tokens(request),
                completion_tokens=min(completion, request.max_tokens),
            )
        response.model_id = response.model_id or "scripted"
        return response


class ScriptedFactory:
    """A picklable model factory (for process and Dask executors): a fresh ScriptedModel per model.

    ``turns`` maps a model choice (``light``/``main``) to its script; ``"*"`` serves any choice.
    """

    def __init__(self, turns: dict[str, list[ModelResponse]]) -> None:
        self.turns = turns

    def __call__(self, choice: str, cfg: object) -> ScriptedModel:
        return ScriptedModel(list(self.turns.get(choice, self.turns.get("*", []))))
