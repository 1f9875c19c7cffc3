"""Why a model could not be provided: the exceptions of the loading layer (no dependencies)."""
from __future__ import annotations


class ModelUnavailable(RuntimeError):
    """Base class: a model could not be provided."""


class WeightsUnavailable(ModelUnavailable):
    """Trained weights could not be obtained (not cached, offline, or the hub failed). ``reason``
    is a short human-readable explanation; ``str(exc)`` is the same."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


class ArchitectureUnavailable(ModelUnavailable):
    """The architecture of an id is unknown offline (no embedded config, no cached config, not in
    timm's registry), so not even the untrained control can be built."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason
