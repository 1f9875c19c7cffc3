"""Test-session settings shared by every test file."""
import numba
import pytest
from hypothesis import settings

# Hypothesis draws the same examples on every run and machine: a failure found once reproduces, and CI
# cannot turn red on an example no earlier run drew (tests that set their own settings keep this default).
settings.register_profile("project", derandomize=True)
settings.load_profile("project")

# The kernel compiles with LLVM's SLP vectoriser on (dobrushin.math._kernel_numba.slp_enabled, around every
# call the library makes).  Tests also call its inner functions directly; compiled here without the flag,
# they would enter numba's on-disk cache (keyed by signature, not by this flag) and every later run in the
# checkout, the benchmarks included, would load the slower code.  So the whole session compiles with it.
numba.config.SLP_VECTORIZE = 1
