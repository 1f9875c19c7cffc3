"""κ of random row-stochastic matrices of a model's size: the reference line of the chapters' κ(A) figures and tables."""
from __future__ import annotations

import numpy as np
import torch

from ..math.coefficient import kappa
from ..random.ensembles import sample_matrices


def random_kappa(n: int, *, count: int = 64, seed: int = 0, ensemble: str = "dirichlet(1)") -> np.ndarray:
    """κ of ``count`` random matrices of size ``n`` (seeded stream)."""
    X = sample_matrices(ensemble, int(n), 0, int(count), int(seed))
    return np.asarray(kappa(torch.from_numpy(X), validate=False).numpy(), dtype=np.float64)
