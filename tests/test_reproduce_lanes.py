"""tools/reproduce_lanes.sh (make reproduce LANES=2) with a stand-in for make: both lanes run at once, each
logs to its own file, a failing lane stops the other at once, and the exit status says which failed; and
the dry run of make reproduce: the chapters that ran beside the baseline lane are rendered again before the
summary."""
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


def _dry_run(*args: str) -> list:
    """The commands ``make -n reproduce ARGS`` would run (no install: the stamp is taken as made)."""
    p = subprocess.run(["make", "-o", ".venv/.installed", "-n", "reproduce", *args], cwd=ROOT,
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    return p.stdout.splitlines()


def _notebook_runs(lines: list) -> list:
    """The NOTEBOOKS of each ``make notebooks`` the dry run starts after the lanes, in order."""
    import re

    return [m.group(1) for line in lines if " notebooks " in line and "reproduce_lanes" not in line
            for m in [re.search(r'NOTEBOOKS="?([^"]*)"?\s*$', line)] if m]


@pytest.mark.skipif(shutil.which("make") is None, reason="no make")
def test_chapters_beside_the_baseline_lane_are_rendered_again_before_the_summary():
    # LANES=3: every model chapter ran beside baseline_law (which writes law.csv and reference.csv, the
    # baseline their figures and prose read), so each is executed again (cached) once every lane is done
    lines = _dry_run("LANES=3")
    lanes = next(i for i, x in enumerate(lines) if "reproduce_lanes.sh" in x)
    from dobrushin.experiments.families import NOTEBOOKS as FAMILIES

    assert _notebook_runs(lines) == [" ".join(FAMILIES), "summary"]  # the model chapters, in the registry's order
    again = next(i for i, x in enumerate(lines) if f'NOTEBOOKS="{FAMILIES[0]}' in x)
    assert again > lanes  # after every lane is done
    assert "RESUME=1" in lines[again]  # its pass is added to the chapters' wall time, not put in its place
    # seeded (RESUME=1 already among the run's variables): said once
    assert all(x.count("RESUME=1") <= 1 for x in _dry_run("LANES=3", "SEED=1") if " notebooks " in x)
    # LANES=2: the baselines run before the other model chapters in their lane; only tabular ran beside them
    assert _notebook_runs(_dry_run("LANES=2")) == ["tabular", "summary"]
    # no tabular chapter asked for: its lane is empty (reproduce_lanes.sh skips it) and nothing is rendered again
    no_tab = _dry_run("LANES=2", "NOTEBOOKS=baseline_law language summary")
    assert any('"tabular="' in x for x in no_tab) and _notebook_runs(no_tab) == ["summary"]
    # no baseline chapter in the run: nothing to wait for
    assert _notebook_runs(_dry_run("LANES=3", "NOTEBOOKS=theory language tabular summary")) == ["summary"]
    # one lane: one make notebooks, the chapters in order, the baselines first
    one = _dry_run("LANES=1")
    assert sum(" make notebooks " in x for x in one) == 1 and not any("RESUME=1" in x for x in one)


@pytest.mark.skipif(shutil.which("make") is None, reason="no make")
def test_the_baselines_run_before_the_chapters_that_read_them_and_summary_last():
    # whatever order NOTEBOOKS is given in: theory, the baselines, the others in their given order, summary
    p = subprocess.run(["make", "-o", ".venv/.installed", "-n", "notebooks",
                        "NOTEBOOKS=summary dinov2 baseline_law theory language baseline"],
                       cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    loop = next(x for x in p.stdout.splitlines() if "for nb in" in x)
    assert loop.split("for nb in ")[1].split(";")[0].split() == \
        ["theory", "baseline", "baseline_law", "dinov2", "language", "summary"]
    # LANES=3 with the baselines given last: the model chapters still wait for them (rendered again, in order)
    assert _notebook_runs(_dry_run("LANES=3", "NOTEBOOKS=tabular language baseline summary")) == \
        ["tabular language", "summary"]
    # a run without summary does not run it after the lanes
    assert _notebook_runs(_dry_run("LANES=2", "NOTEBOOKS=baseline language tabular")) == ["tabular"]


def test_lanes_with_nothing_to_run_end_at_once(tmp_path):
    p = subprocess.run(["bash", str(ROOT / "tools" / "reproduce_lanes.sh"), "tabular=", "others="], cwd=tmp_path,
                       env={**os.environ, "SUBMAKE": "false", "REPRO_ENV": "", "REPRO_NB": ""},
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0 and "no lane has a chapter to run" in p.stdout, p.stdout + p.stderr
    assert not list((tmp_path / "results" / "paper-run" / "logs").glob("*.log"))


@pytest.mark.skipif(shutil.which("make") is None, reason="no make")
def test_a_run_of_some_chapters_is_neither_benchmarked_nor_published():
    # publishing a subset would drop the other chapters' published entries (publish.py refuses it, after the
    # stage benchmark's minutes): the run says so and stops before both
    part = _dry_run("NOTEBOOKS=baseline language summary")
    assert not any("publish" in x and "dobrushin.experiments" in x for x in part)
    assert not any("tools.bench" in x for x in part)
    said = next(x for x in part if "leaves out" in x)
    left_out = said.split("leaves out ")[1].split(":")[0].split()
    assert sorted(left_out) == ["baseline_law", "dinov2", "supervised_vit", "tabular", "theory"]
    # in lanes too
    lanes = _dry_run("LANES=2", "NOTEBOOKS=baseline language tabular summary")
    assert not any("dobrushin.experiments.publish" in x or "tools.bench" in x for x in lanes)
    assert any("leaves out" in x for x in lanes)

    def publishes(lines):
        return (any("dobrushin.experiments.publish results/paper-run published/paper" in x for x in lines)
                and any("tools.bench --stages-only" in x for x in lines) and not any("leaves out" in x for x in lines))

    assert publishes(_dry_run())
    # every chapter, in another order: published
    assert publishes(_dry_run("LANES=3", "NOTEBOOKS=summary tabular dinov2 supervised_vit language baseline_law "
                                         "baseline theory"))
