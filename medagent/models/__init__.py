"""Model resolution: explicit local path -> copy shipped inside a PyPI wheel -> model hub."""

from medagent.models.resolver import ModelNotFoundError, ModelSpec, resolve_model

__all__ = ["ModelNotFoundError", "ModelSpec", "resolve_model"]
