"""A measurement killed with SIGKILL resumes from the last completed batch, and its final tables equal
an uninterrupted run's, with no file corrupt or half-written.  A real subprocess runs
:func:`measure_model` on the tiny ViT of test_pipeline; the environment hook
``DOBRUSHIN_PAUSE_AT`` (:data:`dobrushin.experiments.partial.PAUSE_ENV`) makes it stop during the
forward pass of a batch, or while a batch's partial tables are being written, and say so in a file;
the test then kills it with SIGKILL and runs it again."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from dobrushin.store.results import ResultStore
from test_pipeline import images  # noqa: F401  (fixture)

TESTS = Path(__file__).resolve().parent

CHILD = """
import json, sys
sys.path.insert(0, {tests!r})
from test_pipeline import TinyLoader
from dobrushin.data.inputs import load_images
from dobrushin.experiments.pipeline import MeasureConfig, measure_model
from dobrushin.store.results import ResultStore
images = load_images(sys.argv[1], seed=0)
run = measure_model("tiny/vit", images, store=ResultStore(sys.argv[2], "nb"), loader=TinyLoader(),
                    config=MeasureConfig(batch_size=2, head_inputs=3, device="cpu", progress=False))
print(json.dumps({{w: r.get("resumed_inputs") for w, r in run.runs.items()}}))
"""


def _env(**extra):
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(TESTS.parent / "lib"), env.get("PYTHONPATH", "")])
    env.pop("DOBRUSHIN_PAUSE_AT", None)
    env.update(extra)
    return env


def _run(script, imgs, res, **extra) -> dict:
    out = subprocess.run([sys.executable, str(script), str(imgs), str(res)], env=_env(**extra), check=True,
                         capture_output=True, text=True, timeout=600)
    return json.loads(out.stdout.strip().splitlines()[-1])


def _kill_at(script, imgs, res, point: str, mark: Path) -> None:
    p = subprocess.Popen([sys.executable, str(script), str(imgs), str(res)],
                         env=_env(DOBRUSHIN_PAUSE_AT=point, DOBRUSHIN_PAUSE_FILE=str(mark)),
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        t0 = time.time()
        while not mark.exists():
            assert p.poll() is None, f"the child ended (rc {p.returncode}) before reaching {point}"
            assert time.time() - t0 < 600, f"the child never reached {point}"
            time.sleep(0.1)
        p.send_signal(signal.SIGKILL)
        assert p.wait(60) == -signal.SIGKILL
    finally:
        if p.poll() is None:
            p.kill()


def _tables(res: Path) -> dict:
    store = ResultStore(res, "nb")
    hit = store.load_all("tiny/vit", store.manifest()["entries"]["tiny--vit"]["params"])
    assert hit is not None, "the final tables are not all intact"
    return hit


@pytest.mark.parametrize("point, done_batches", [("forward:2", 2), ("write:1", 1)])
def test_killed_run_resumes_and_equals_an_uninterrupted_one(tmp_path, images, point, done_batches):  # noqa: F811
    imgs = tmp_path / "imgs"  # the folder of the images fixture
    assert len(images) == 7
    script = tmp_path / "child.py"
    script.write_text(CHILD.format(tests=str(TESTS)))
    # the uninterrupted run, in this process (the same code and machine as the child's)
    from dobrushin.experiments.pipeline import MeasureConfig, measure_model
    from test_pipeline import TinyLoader

    whole = measure_model("tiny/vit", images, store=ResultStore(tmp_path / "whole", "nb"), loader=TinyLoader(),
                          config=MeasureConfig(batch_size=2, head_inputs=3, device="cpu", progress=False))
    assert {w: r["resumed_inputs"] for w, r in whole.runs.items()} == {"pretrained": 0, "untrained": 0}

    res = tmp_path / "killed"
    _kill_at(script, imgs, res, point, tmp_path / "paused")
    part = res / "nb" / ".partial" / "tiny--vit"
    batches = sorted(part.glob("*/pretrained/batch-*"))
    assert [b.name for b in batches] == [f"batch-{i:05d}" for i in range(done_batches)]
    for b in batches:  # a completed batch folder is complete and readable
        assert sorted(f.name for f in b.iterdir()) == ["heads.parquet", "ids.json", "rollout.parquet", "table.parquet"]
        for f in b.glob("*.parquet"):
            pd.read_parquet(f)
    if point.startswith("write"):  # killed mid-write: only a temporary folder, never a half batch
        assert list(part.glob(f"*/pretrained/.batch-{done_batches:05d}.*"))
    assert not (res / "nb" / "tiny--vit.parquet").exists()

    again = _run(script, imgs, res)
    assert again == {"pretrained": 2 * done_batches, "untrained": 0}
    a, b = _tables(tmp_path / "whole"), _tables(res)
    for what in ("table", "heads", "rollout"):
        pd.testing.assert_frame_equal(a[what], b[what], check_exact=True)
    assert not (res / "nb" / ".partial").exists() or not any((res / "nb" / ".partial").iterdir())
    left = sorted(p.name for p in (res / "nb").iterdir() if p.name != ".partial")
    assert left == ["manifest.json", "progress.log", "tiny--vit.heads.parquet", "tiny--vit.parquet",
                    "tiny--vit.rollout.parquet"]
    log = (res / "nb" / "progress.log").read_text()
    assert "nb: vit [pretrained]" in log and "7/7 inputs" in log and "ETA" in log
