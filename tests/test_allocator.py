"""torch's huge-page allocation (``THP_MEM_ALLOC_ENABLE=1``, which the Makefile exports for every command it
runs) changes where tensors live, never what they hold: the measurement of an untrained DINOv2-S at 224 px
(attention maps of several megabytes, the sizes the setting applies to) gives the same tables, bit for bit,
with it on and off.  torch reads the variable once, at its first allocation, so each setting runs in a
process of its own."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from tools.bench_stages import thp_mode

ROOT = Path(__file__).resolve().parents[1]

CHILD = r"""
import json, re, sys, tempfile
import torch
from dobrushin.data.inputs import load_images
from dobrushin.experiments.pipeline import MeasureConfig, measure_model
from dobrushin.models.loading import load_model
from dobrushin.store.results import ResultStore

out = sys.argv[1]
lm = load_model("facebook/dinov2-small", pretrained=False, seed=0, image_size=224)
cfg = MeasureConfig(weights=("untrained",), batch_size=4, image_size=224, device="cpu", progress=False,
                    force=True, recheck_unavailable=False, head_inputs=2)
with tempfile.TemporaryDirectory() as tmp:
    run = measure_model(lm.model_id, load_images(None, 4, seed=0), store=ResultStore(tmp, "t"), config=cfg,
                        loader=lambda *a, **k: lm, provenance={"untrained": {"source": "test"}})
for name in ("table", "rollout", "heads"):
    getattr(run, name).to_parquet(f"{out}/{name}.parquet")
# whether this process got huge pages for a large tensor (the setting in force, where the kernel allows them)
big = torch.ones(64 * 2**20 // 4)
rollup = open("/proc/self/smaps_rollup").read() if sys.platform.startswith("linux") else ""
m = re.search(r"AnonHugePages:\s+(\d+) kB", rollup)
json.dump({"huge_kb": int(m.group(1)) if m else None}, open(f"{out}/huge.json", "w"))
"""


def _run(setting: str, out: Path) -> dict:
    out.mkdir()
    env = dict(os.environ, THP_MEM_ALLOC_ENABLE=setting, PYTHONPATH=str(ROOT / "lib"))
    r = subprocess.run([sys.executable, "-c", CHILD, str(out)], env=env, capture_output=True, text=True,
                       timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads((out / "huge.json").read_text())


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="torch's huge-page allocation is Linux only")
def test_huge_page_allocation_changes_no_number(tmp_path):
    off, on = _run("0", tmp_path / "off"), _run("1", tmp_path / "on")
    for name in ("table", "rollout", "heads"):
        a, b = pd.read_parquet(tmp_path / "off" / f"{name}.parquet"), pd.read_parquet(tmp_path / "on" / f"{name}.parquet")
        assert len(a) > 0
        pd.testing.assert_frame_equal(a, b, check_exact=True)
    if thp_mode() == "madvise":  # torch's madvise is what gives huge pages here: the comparison was not vacuous
        # (other libraries may madvise a few megabytes of their own: the 64 MB tensor makes the difference)
        assert on["huge_kb"] - off["huge_kb"] >= 32 * 1024, (on, off)
