"""Models: any object with ``complete(request) -> response``."""

from subagent_lab.models.base import Model, ModelCallError

__all__ = ["Model", "ModelCallError"]
