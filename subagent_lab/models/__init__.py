"""Models: any object with ``complete(request) -> response``."""

from subagent_lab.core.model import Model, ModelCallError

__all__ = ["Model", "ModelCallError"]
