"""A one-token yes/no judgment read as a probability: P(yes) from the first generated token's
log-probabilities, or from the generated word where the endpoint returns none.

Pure. ``calls.call_judge`` makes the model call (budgeted and traced like any); the scaffold's
``RetrievalStart`` asks it of each candidate (issue 49: a small model's likelihood of "yes" ranks
candidates better than a ranking it writes; docs/design.md, "Scoring candidates").
"""

from __future__ import annotations

import math
from typing import Literal

YES = frozenset({"yes", "y"})
NO = frozenset({"no", "n"})
TOP_LOGPROBS = 10
"""Alternatives of the first token asked for: enough that both answers' spellings (``yes``,
``Yes``, `` yes``) are among them whatever the model's pick."""

Source = Literal["logprobs", "generated"]


def _word(token: str) -> str:
    return token.strip().strip(".,!:;\"'`*").lower()


def p_yes(top: dict[str, float] | None, text: str) -> tuple[float, Source]:
    """P(yes) and where it came from. With ``top`` (token -> log-probability) holding a yes or a no
    spelling: the yes spellings' probability mass over both answers' (``"logprobs"``). Otherwise the
    generated ``text``: 1.0 for yes, 0.0 for no, 0.5 for neither (``"generated"``)."""
    if top:
        yes = sum(math.exp(v) for t, v in top.items() if _word(t) in YES)
        no = sum(math.exp(v) for t, v in top.items() if _word(t) in NO)
        if yes + no > 0:
            return yes / (yes + no), "logprobs"
    words = text.split()
    first = _word(words[0]) if words else ""
    return (1.0 if first in YES else 0.0 if first in NO else 0.5), "generated"


def fused_score(p: float, rank: int, mix: float) -> float:
    """The fusion rule: ``mix · P(yes) + (1 − mix) / rank`` (a convex mix of the model's judgment
    and the retrieval's reciprocal rank; ``rank`` from 1)."""
    return mix * p + (1.0 - mix) / max(rank, 1)


def fused_order(judged: list[tuple[str, int, float]], mix: float) -> list[str]:
    """Items ``(item, rank, P(yes))`` in the fused order: ``fused_score`` best first, ties to the
    retrieval's rank. The one rule ``RankStart`` applies and ``benchmarks/bench_fusion.py`` replays."""
    return [item for item, _, _ in sorted(judged, key=lambda j: (-fused_score(j[2], j[1], mix), j[1]))]
