"""Command line: ``python -m dobrushin check FILE``, ``measure MODEL_ID``, ``sweep MODEL_ID... --out DIR`` and ``report DIR`` (also installed as ``dobrushin``).

``check``: FILE is ``.npy`` (a matrix or a stack ``(..., n, n)``) or ``.csv`` (one matrix, no header); prints
κ(A), κ(½(I+A)), the bound, the verdict and a witness per matrix; a bad file exits 2 with a one-line error.
The other commands are defined in ``experiments.measure_cli``, ``experiments.sweep`` and ``report.sweep_report``.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np


def _load(path: Path) -> np.ndarray:
    if not path.exists():
        raise ValueError(f"{path}: no such file")
    suffix = path.suffix.lower()
    try:
        if suffix == ".npy":
            arr = np.load(path, allow_pickle=False)
        elif suffix == ".csv":
            arr = np.loadtxt(path, delimiter=",", ndmin=2, dtype=np.float64)
        else:
            raise ValueError(f"{path}: unsupported file type {suffix or '(none)'}; use .npy or .csv")
    except ValueError as e:
        if str(e).startswith(str(path)):
            raise
        raise ValueError(f"{path}: cannot read: {e}") from None
    except (OSError, EOFError) as e:
        raise ValueError(f"{path}: cannot read: {e}") from None
    return arr


def check(path: Path, tol: float, atol: float, out=None) -> int:
    from .math.coefficient import analyse
    from .math.validation import check_stochastic

    out = sys.stdout if out is None else out  # the stream of the moment, not the one at import time

    A = _load(path)
    try:
        A = check_stochastic(A, atol=atol)
    except ValueError as e:
        raise ValueError(f"{path}: {e}") from None
    res = analyse(A, tol, validate=False)
    lead = A.shape[:-2]
    n = A.shape[-1]
    for idx in np.ndindex(*lead) if lead else [()]:
        label = f"matrix {idx}: " if lead else ""
        k, kf, b = float(res.kappa[idx]), float(res.kappa_factor[idx]), float(res.bound[idx])
        holds = bool(res.holds[idx])
        i, j = (int(v) for v in res.witness[idx])
        print(f"{label}n = {n}", file=out)
        print(f"  kappa(A)          = {k:.17g}", file=out)
        print(f"  kappa((I+A)/2)    = {kf:.17g}", file=out)
        print(f"  bound (1+kappa)/2 = {b:.17g}", file=out)
        print(f"  equality holds    = {'yes' if holds else 'no'}", file=out)
        if n < 2:
            print("  witness: none (n = 1: no pair of tokens exists)", file=out)
        elif holds:
            print(f"  witness: pair ({i}, {j}) attains kappa(A) and is mutually self-dominant "
                  f"(A[{i},{i}]={A[idx + (i, i)]:.6g} >= A[{j},{i}]={A[idx + (j, i)]:.6g}, "
                  f"A[{j},{j}]={A[idx + (j, j)]:.6g} >= A[{i},{j}]={A[idx + (i, j)]:.6g})", file=out)
        else:
            print(f"  witness: none — no pair attaining kappa(A) is mutually self-dominant "
                  f"(e.g. attaining pair ({i}, {j}): A[{i},{i}]={A[idx + (i, i)]:.6g} vs A[{j},{i}]={A[idx + (j, i)]:.6g}, "
                  f"A[{j},{j}]={A[idx + (j, j)]:.6g} vs A[{i},{j}]={A[idx + (i, j)]:.6g})", file=out)
    return 0


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m dobrushin", description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("check", help="test the equality condition on the matrices in FILE (.npy or .csv)")
    c.add_argument("file", type=Path)
    c.add_argument("--tol", type=float, default=None, help="absolute tolerance of the test (default 1e-12)")
    c.add_argument("--atol", type=float, default=1e-6, help="tolerance on row sums when validating (default 1e-6)")
    from .experiments.measure_cli import add_parser as add_measure_parser

    from .experiments.sweep import add_parser as add_sweep_parser
    from .report.sweep_report import add_parser as add_report_parser

    add_measure_parser(sub)
    add_sweep_parser(sub)
    add_report_parser(sub)
    args = p.parse_args(argv)
    if args.cmd != "check":
        return args.func(args)
    from .math.coefficient import DEFAULT_TOL

    try:
        return check(args.file, DEFAULT_TOL if args.tol is None else args.tol, args.atol)
    except ValueError as e:
        print(f"error: {e}".replace("\n", " "), file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
