"""The Dask side of :mod:`dobrushin.experiments.sweep`: a client for ``--scheduler`` and the worker
plugin that holds each worker's model cache (imported only when a sweep runs on Dask)."""
from __future__ import annotations

from typing import Optional

from distributed import Client, LocalCluster
from distributed.diagnostics.plugin import WorkerPlugin

from .measure_cli import check_scheduler
from .model_cache import PLUGIN_NAME, ModelCache


class ModelCachePlugin(WorkerPlugin):
    """A worker's ``ModelCache``; ``torch_threads`` caps the worker process's torch threads (so K workers on
    K cores do not each start one thread per core)."""

    name = PLUGIN_NAME

    def __init__(self, torch_threads: Optional[int] = None):
        self.torch_threads, self.cache = torch_threads, None

    def setup(self, worker=None):
        self.cache = ModelCache()
        if self.torch_threads:
            import torch

            torch.set_num_threads(self.torch_threads)

    def teardown(self, worker=None):
        self.cache = None


def connect(scheduler: str):
    """``(client, cluster)`` for ``--scheduler local:K`` (K worker processes, one thread each; close ``cluster``
    after the client) or ``tcp://`` / ``tls://`` (a running scheduler; ``cluster`` None); CliError for what
    :func:`~.measure_cli.check_scheduler` refuses."""
    check_scheduler(scheduler)
    if scheduler.startswith("local:"):
        cluster = LocalCluster(n_workers=int(scheduler.split(":", 1)[1]), threads_per_worker=1, processes=True,
                               dashboard_address=None)
        return Client(cluster), cluster
    return Client(scheduler, timeout="30s"), None
