"""README, pyproject and the Makefile agree on Python 3.11+, and `make` on an older Python stops with one
clear line before it creates the virtual environment."""
from __future__ import annotations

import re
import os
import shutil
import subprocess
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def test_python_requirement_agrees():
    req = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["requires-python"]
    assert req == ">=3.11"
    assert "Python 3.11 or newer" in (ROOT / "README.md").read_text()
    assert re.search(r"sys\.version_info < \(3, 11\)", (ROOT / "Makefile").read_text())


@pytest.mark.skipif(shutil.which("make") is None, reason="no make here")
def test_make_on_an_old_python_stops_with_one_line(tmp_path):
    for f in ("Makefile", "pyproject.toml", "constraints.txt"):
        shutil.copy2(ROOT / f, tmp_path / f)
    old = tmp_path / "python3.10"  # answers like Python 3.10 would: the version check fails
    old.write_text("#!/bin/sh\nif [ \"$1\" = -V ]; then echo 'Python 3.10.12'; exit 0; fi\n"
                   "exec python3 -c 'import sys; sys.exit(1)'\n")
    old.chmod(0o755)
    # a user's top-level make: not a sub-make of the `make test` that may be running this suite (MAKELEVEL and
    # MAKEFLAGS would make it print "Entering directory" lines)
    env = {k: v for k, v in os.environ.items() if k not in ("MAKELEVEL", "MAKEFLAGS", "MFLAGS", "MAKEOVERRIDES")}
    p = subprocess.run(["make", f"PYTHON={old}", "install"], cwd=tmp_path, capture_output=True, text=True,
                       timeout=60, env=env)
    assert p.returncode != 0
    ours = [ln for ln in (p.stdout + p.stderr).splitlines() if not ln.startswith("make: ***")]
    assert len(ours) == 1 and "Python 3.11 or newer is required" in ours[0] and "Python 3.10.12" in ours[0], ours
    assert not (tmp_path / ".venv").exists()  # stopped before creating the venv
