"""The CUDA record of ``make bench-gpu`` (``tools/gpu_check.py``). No test here needs a CUDA device: the script's
kernel part runs on the CPU (``device="cpu"``, its dry run)."""
from __future__ import annotations

import json

import pandas as pd
import torch

from tools import gpu_check


def test_without_cuda_the_script_times_nothing(tmp_path, monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert gpu_check.main(["--out", str(tmp_path)]) == 0
    assert not (tmp_path / "gpu_env.json").exists()
    assert "no CUDA device" in (tmp_path / "gpu_log.txt").read_text()


def test_the_script_writes_one_runs_record_as_it_goes(tmp_path, monkeypatch):
    """A dry run of the kernel part: the record says it is a dry run, the kernel table is written, and a file of
    an earlier run (here a stage table) does not survive into this run's record."""
    monkeypatch.setattr(gpu_check, "KERNEL_SIZES", ((20, 3),))
    (tmp_path / "gpu_stages.csv").write_text("config\nold\n")
    assert gpu_check.main(["--out", str(tmp_path), "--device", "cpu", "--parts", "kernel"]) == 0
    env = json.loads((tmp_path / "gpu_env.json").read_text())
    assert env["dry_run"] is True and env["device"] == "cpu" and env["gpu"] is None
    assert not (tmp_path / "gpu_stages.csv").exists()
    k = pd.read_csv(tmp_path / "gpu_kernel.csv")
    assert set(k["n"]) == {20} and len(k) == 4 and k.loc[k["method"].str.startswith("torch path"),
                                                          "same_bits_as_host_kernel"].all()
