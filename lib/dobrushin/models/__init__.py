"""Loading the measured models: trained weights (hub, local cache, packaged weights), the untrained
control, embedded configs and preprocessing (:mod:`.loading`); FT-Transformer (:mod:`.ft_transformer`)."""
from .loading import *  # noqa: F401,F403  (the public API: load_model, LoadedModel, WeightsUnavailable, ...)
from .loading import __all__  # noqa: F401
