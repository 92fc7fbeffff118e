"""The default model factory: every model served over HTTP through the ``openai`` client.

A model without a ``base_url`` is one of the embedded models; the embedded server is started the
first time such a model is made, never at import and never for a scripted or remote model.
"""

from __future__ import annotations

import os
from collections.abc import Callable

from subagent_lab.config.endpoints import ModelConfig
from subagent_lab.config.profiles import LabConfig
from subagent_lab.core.model import Model
from subagent_lab.core.types import ModelChoice

ModelFactory = Callable[[ModelChoice, ModelConfig], Model]
"""Makes the model for a choice; the launcher, the parent and sweeps take one."""


def default_model_factory(config: LabConfig) -> ModelFactory:
    """Models served over HTTP via the ``openai`` client; the embedded server is started on demand.
    The ``none`` choice is the no-model baseline and ``retrieval`` the retrieval floor: neither
    needs a server."""
    from subagent_lab.models.openai_chat import OpenAIChatModel

    def make(choice: ModelChoice, cfg: ModelConfig) -> Model:
        if choice == "none":
            from subagent_lab.models.baseline import BaselineModel

            return BaselineModel()
        if choice == "retrieval":
            from subagent_lab.models.retrieval import RetrievalModel

            return RetrievalModel()
        hint = ""
        if cfg.base_url is None:
            from subagent_lab.local_models.server import ensure_server

            handle = ensure_server(config)
            hint = f"embedded server log: {handle.log_path}"
        return OpenAIChatModel(
            base_url=config.endpoint_url(cfg),
            model=cfg.model,
            api_key=os.environ.get(cfg.api_key_env) if cfg.api_key_env else None,
            tool_protocol=cfg.tool_protocol,
            constrain_output=cfg.constrain_output,
            strict_tools=cfg.strict_tools,
            max_retries=cfg.max_retries,
            timeout_s=cfg.timeout_s,
            error_hint=hint,
            # The embedded server counts prompts with the model's own template and vocabulary.
            count_url=config.server.root_url if cfg.base_url is None else None,
        )

    return make
