"""Models loaded on a worker, kept for the shards that follow (:mod:`dobrushin.experiments.sweep`):
an LRU cache per Dask worker (held by :class:`dobrushin.experiments.sweep_dask.ModelCachePlugin`) or one
per process outside Dask."""
from __future__ import annotations

import collections
import threading
from typing import Callable, Dict, Tuple

PLUGIN_NAME = "dobrushin-model-cache"

_LOAD_LOCK = threading.Lock()  # loading seeds torch's global generator: one load at a time per process


class ModelCache:
    """Models loaded on this worker (LRU, ``capacity`` models), each with a lock so that one shard at a
    time uses it; also the inputs of each kind."""

    def __init__(self, capacity: int = 2):
        self.capacity = capacity
        self._models: "collections.OrderedDict[tuple, tuple]" = collections.OrderedDict()
        self._inputs: Dict[tuple, object] = {}
        self._lock = threading.Lock()

    def model(self, key: tuple, load: Callable[[], object]) -> Tuple[object, threading.Lock, bool]:
        """``(model, its lock, whether it was loaded now)``."""
        with self._lock:
            hit = self._models.get(key)
            if hit is not None:
                self._models.move_to_end(key)
                return (*hit, False)
        with _LOAD_LOCK:
            with self._lock:  # another thread may have loaded it meanwhile
                hit = self._models.get(key)
                if hit is not None:
                    return (*hit, False)
            lm = load()
            with self._lock:
                self._models[key] = (lm, threading.Lock())
                while len(self._models) > self.capacity:
                    self._models.popitem(last=False)
                return (*self._models[key], True)

    def inputs(self, key: tuple, load: Callable[[], object]):
        with self._lock:
            if key not in self._inputs:
                self._inputs[key] = load()
            return self._inputs[key]


LOCAL_CACHE = ModelCache()


def current_cache():
    """``(this worker's cache, its name)``; the process's cache outside Dask."""
    try:
        from distributed import get_worker

        w = get_worker()
    except (ImportError, ValueError):
        return LOCAL_CACHE, "local"
    plugin = w.plugins.get(PLUGIN_NAME)
    cache = getattr(plugin, "cache", None) or LOCAL_CACHE
    return cache, str(w.name)
