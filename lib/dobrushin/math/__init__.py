"""The mathematics: validation of stochastic matrices, the Dobrushin coefficient and the equality test
(:mod:`.coefficient`), the pairwise-distance kernel (:mod:`.kernel`, numba in :mod:`._kernel_numba`)
and binomial statistics (:mod:`.stats`).  Depends on numpy, torch and numba only."""
