"""The call cache's namespace of a configured model: its weights' hash where the embedded engine
ships them, else its endpoint (``models.cache`` keys each request under it).

It lives here, not in ``models/``, because it needs the embedded engine's weight specs: the engine
depends on the adapters, never the other way round.
"""

from __future__ import annotations

from subagent_lab.config.endpoints import ModelConfig
from subagent_lab.config.profiles import LabConfig
from subagent_lab.local_models.weights import WeightsError, spec_for
from subagent_lab.models.cache import weights_namespace

__all__ = ["config_namespace"]


def config_namespace(lab: LabConfig, cfg: ModelConfig) -> str:
    """The cache namespace of a configured model (``models.cache``'s module docstring)."""
    if cfg.base_url is None and not cfg.endpoints:
        try:
            return weights_namespace(spec_for(cfg.model).sha256, cfg)
        except WeightsError:
            pass  # an alias the embedded server does not ship: key by endpoint as before
    if cfg.endpoints:
        return f"{'|'.join(sorted(cfg.endpoints))}|{cfg.model}"
    return f"{lab.endpoint_url(cfg)}|{cfg.model}"
