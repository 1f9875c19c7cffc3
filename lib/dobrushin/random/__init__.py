"""Random stochastic matrices: the ensembles, their simulation and the statistics of the baseline law."""
