"""Test-session settings shared by every test file."""
from hypothesis import settings

# Hypothesis draws the same examples on every run and machine: a failure found once reproduces, and CI
# cannot turn red on an example no earlier run drew (tests that set their own settings keep this default).
settings.register_profile("project", derandomize=True)
settings.load_profile("project")
