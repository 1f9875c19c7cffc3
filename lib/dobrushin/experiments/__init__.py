"""Experiments: the measurement of models on inputs, cached in the results store."""
