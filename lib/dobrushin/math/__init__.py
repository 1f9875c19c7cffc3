"""The mathematics: validation, the Dobrushin coefficient and the equality test (``coefficient``), the
pairwise-distance kernel (``kernel``, numba in ``_kernel_numba``) and binomial statistics (``stats``).
Depends on numpy, torch and numba only."""
