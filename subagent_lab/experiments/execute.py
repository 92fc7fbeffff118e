"""One cell of a grid, run: its profile resolved, the child launched, the trace scored, one row.

The unit a sweep's executor, a Dask worker (``experiments.cluster``) and the floors' benchmark
all call; it never raises (a crash becomes a row with the traceback).
"""

from __future__ import annotations

import time
import traceback
from pathlib import Path
from typing import Any

from subagent_lab.agents.launcher import ModelFactory, SubagentLauncher, SubagentRequest
from subagent_lab.analysis.metrics import child_metrics
from subagent_lab.bench.pool import pool_recall
from subagent_lab.bench.scoring import context_from_events, score_run
from subagent_lab.config.endpoints import ModelConfig
from subagent_lab.config.parsed import parsed_config
from subagent_lab.config.profiles import LabConfig
from subagent_lab.config.scaffolds import scaffold_hash
from subagent_lab.core.model import Model
from subagent_lab.core.trace import CandidateJudged, Redactor, read_trace
from subagent_lab.core.types import ModelChoice
from subagent_lab.experiments.rows import base_row, origin_columns, result_row
from subagent_lab.experiments.spec import RunSpec
from subagent_lab.local_models import factory as local_factory
from subagent_lab.local_models.namespace import config_namespace
from subagent_lab.models.cache import CachingModel
from subagent_lab.models.pool import pooled_factory
from subagent_lab.scaffold.retrieval_start import pool_in_trace


def _caching_factory(
    inner: ModelFactory, lab: LabConfig, cache_dir: str, models: list[CachingModel]
) -> ModelFactory:
    def make(choice: ModelChoice, cfg: ModelConfig) -> Model:
        model = CachingModel(inner(choice, cfg), cache_dir, namespace=config_namespace(lab, cfg))
        models.append(model)
        return model

    return make


def _preset_named(lab: LabConfig, ran: str) -> str:
    """The preset whose scaffold the run ran (by hash), else ``profile``: a run that named no
    preset but ran one exactly is that preset's run."""
    names = ["plain", *lab.scaffolds]
    return next((n for n in names if scaffold_hash(lab.scaffold(n).scaffold) == ran), "profile")


def execute_run(run: RunSpec, model_factory: ModelFactory | None = None) -> dict[str, Any]:
    """Run one cell and return its row. Never raises: a crash becomes a row with the traceback."""
    started = time.time()
    lab: LabConfig | None = None
    try:
        lab = parsed_config(run.config_path)
        # A model with several ``endpoints`` is served by an endpoint pool; others as before.
        factory = model_factory or pooled_factory(lab, local_factory.default_model_factory(lab))
        cached: list[CachingModel] = []
        if run.cache_dir:
            factory = _caching_factory(factory, lab, run.cache_dir, cached)
        root = run.task.workspace_root(fetch=True)  # made before the sweep; a cluster worker makes its own
        launcher = SubagentLauncher(lab, root, model_factory=factory, trace_dir=run.trace_dir)
        request = SubagentRequest(
            task=run.task.prompt,
            profile=run.profile,
            model=run.model,
            overrides={**run.scaffold_fields, **run.variant.overrides},
            seed=run.seed,
            temperature=run.temperature,
        )
        profile = launcher.resolve_profile(request)
        result = launcher.launch(request)
        # The trace says what the harness listed and what the tools showed: scoring needs both.
        # Every arm must cite what its tools showed (a line cited from memory is a guess), so the
        # scaffolds are scored by one rule whether or not their grammar enforced it.
        trace = Path(result.trace_path) if result.trace_path else None
        exists = trace is not None and trace.is_file()
        events = read_trace(trace) if trace is not None and exists else None  # read once, for all three
        context = context_from_events(events, require_seen=True) if events is not None else None
        # A task without gold is run and tabulated (reason, tools, tokens) but not scored.
        score = score_run(run.task, result.contract, root, context=context) if run.task.scored else None
        folded = child_metrics(events) if events is not None else None
        row = result_row(run, result.model_dump(mode="json"), score.model_dump(mode="json") if score else {})
        row.update(origin_columns(events or []))
        pool = pool_in_trace(events or [])  # candidate recall@K: a gold unit anywhere in the pool
        row.update(candidate_recall=pool_recall(run.task, root, pool), pool_size=len(pool) or None)
        # Judged without logprobs (an endpoint that returns none): P(yes) from the generated word.
        judged = [e for e in events or [] if isinstance(e, CandidateJudged)]
        generated = sum(e.source == "generated" for e in judged)
        row.update(judged=len(judged) or None, judged_generated=generated if judged else None)
        ran = scaffold_hash(profile.scaffold)
        # The retrieval floor holds the symbol tools whatever the preset (its definition), so its
        # run is labelled by the preset it was asked under: the floor of that scaffold's models.
        asked = ran
        if run.model == "retrieval" and run.scaffold is None:
            as_none = launcher.resolve_profile(request.model_copy(update={"model": "none"}))
            asked = scaffold_hash(as_none.scaffold)
        row.update(
            max_steps=profile.max_steps,
            context_token_budget=profile.context_token_budget,
            total_token_budget=profile.total_token_budget,
            scaffold_hash=ran,
            scaffold=run.scaffold or _preset_named(lab, asked),
            policies=",".join(result.policies),
            model_steps=folded.action_calls if folded else None,
            forced_actions=folded.forced_actions if folded else None,
            cache_hits=sum(m.hits for m in cached),
            cache_misses=sum(m.misses for m in cached),
        )
        return row
    except Exception as exc:  # recorded, not lost: the sweep goes on
        redact = lab.redactor() if lab else Redactor()  # every configured key, too
        return {
            **base_row(run),
            "terminal_reason": "crashed",
            "status": "failed",
            "error": redact("".join(traceback.format_exception(exc))[-3000:]),
            "elapsed_s": time.time() - started,
        }
