"""Whether data can be obtained: the one :class:`DataUnavailable` and the one offline check."""
from __future__ import annotations

import os

_TRUE = ("1", "true", "yes", "on")


class DataUnavailable(RuntimeError):
    """The requested data could not be obtained (offline, missing package, missing or corrupt file).
    ``reason``: short explanation (also ``str(exc)``); ``status``: ``"data unavailable: <reason>"``."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason
        self.status = f"data unavailable: {reason}"


def hub_offline(*, datasets: bool = False) -> bool:
    """True when the Hugging Face hub must not be contacted: ``HF_HUB_OFFLINE`` or
    ``TRANSFORMERS_OFFLINE`` is set to a true value (with ``datasets=True`` also ``HF_DATASETS_OFFLINE``)."""
    names = ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE") + (("HF_DATASETS_OFFLINE",) if datasets else ())
    return any(os.environ.get(v, "").strip().lower() in _TRUE for v in names)
