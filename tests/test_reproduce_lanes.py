"""tools/reproduce_lanes.sh (make reproduce LANES=2) with a stand-in for make: both lanes run at once, each
logs to its own file, a failing lane stops the other at once, and the exit status says which failed."""
from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
#: a stand-in for make: says what it was asked to run, fails for "bad", and otherwise marks its start and
#: waits (up to $SLEEP s) until the other lane has started too: lanes run one after the other never meet
FAKE_MAKE = """#!/usr/bin/env bash
for a in "$@"; do case "$a" in NOTEBOOKS=*) nb="${a#NOTEBOOKS=}";; esac; done
echo "ran $nb with OMP_NUM_THREADS=$OMP_NUM_THREADS X=$X"
case "$nb" in *bad*) exit 3;; esac
me=other; [ "$nb" = tabular ] && me=tabular
touch "started.$me"
for i in $(seq $((SLEEP * 10))); do
  [ -e started.tabular ] && [ -e started.other ] && { echo met; exit 0; }
  sleep 0.1
done
echo "never met"; exit 4
"""

pytestmark = pytest.mark.skipif(shutil.which("bash") is None, reason="no bash")


def _run(tmp_path, others: str, sleep: int, timeout: int = 120):
    fake = tmp_path / "fake_make"
    fake.write_text(FAKE_MAKE)
    fake.chmod(0o755)
    env = {**os.environ, "SUBMAKE": str(fake), "REPRO_ENV": "X=7", "REPRO_NB": "PROFILE=paper", "SLEEP": str(sleep)}
    return subprocess.run(["bash", str(ROOT / "tools" / "reproduce_lanes.sh"), "tabular=tabular", f"others={others}"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=timeout)


def test_both_lanes_run_at_once_and_log_apart(tmp_path):
    p = _run(tmp_path, "theory language", sleep=60)
    assert p.returncode == 0 and "every lane done" in p.stdout, p.stdout + p.stderr
    logs = tmp_path / "results" / "paper-run" / "logs"
    # each lane saw the other one running (side by side, not one after the other)
    assert (logs / "tabular.log").read_text().split("\n")[:2] == ["ran tabular with OMP_NUM_THREADS=1 X=7", "met"]
    assert (logs / "others.log").read_text().split("\n")[:2] == ["ran theory language with OMP_NUM_THREADS=1 X=7", "met"]


def test_a_failing_lane_stops_the_other(tmp_path):
    # the tabular lane waits up to 600 s for a partner that never starts: unless it is stopped, the 120 s
    # timeout of the run fails the test
    p = _run(tmp_path, "bad", sleep=600)
    assert p.returncode == 1 and "a chapter FAILED: see results/paper-run/logs/others.log" in p.stdout, p.stdout
    assert "tabular chapter FAILED" not in p.stdout
    assert "never met" not in (tmp_path / "results" / "paper-run" / "logs" / "tabular.log").read_text()
    left = subprocess.run(["pgrep", "-f", str(tmp_path / "fake_make")], capture_output=True, text=True).stdout
    assert left.strip() == ""


def test_a_resumed_pass_adds_to_the_wall_time_record(tmp_path):
    import json
    import sys

    rec = tmp_path / "timings" / "paper" / "dinov2.json"
    tool = [sys.executable, str(ROOT / "tools" / "record_timing.py"), str(rec), "dinov2", "paper"]
    subprocess.run(tool + ["100"], check=True)
    assert json.loads(rec.read_text()) | {"finished": ""} == {"notebook": "dinov2", "profile": "paper", "seconds": 100,
                                                             "passes": 1, "last_pass_seconds": 100, "finished": ""}
    subprocess.run(tool + ["30", "--add"], check=True)  # resumed: the time of both passes
    r = json.loads(rec.read_text())
    assert (r["seconds"], r["passes"], r["last_pass_seconds"]) == (130, 2, 30)
    subprocess.run(tool + ["7"], check=True)  # a fresh run replaces the record
    r = json.loads(rec.read_text())
    assert (r["seconds"], r["passes"]) == (7, 1)
    assert subprocess.run(tool[:3] + ["x"], capture_output=True).returncode == 2
