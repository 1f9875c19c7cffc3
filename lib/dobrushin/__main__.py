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
    if suffix not in (".npy", ".csv"):
        raise ValueError(f"{path}: unsupported file type {suffix or '(none)'}; use .npy or .csv")
    try:
        if suffix == ".npy":
            return np.load(path, allow_pickle=False)
        return np.loadtxt(path, delimiter=",", ndmin=2, dtype=np.float64)
    except (ValueError, OSError, EOFError) as e:
        raise ValueError(f"{path}: cannot read: {e}") from None


def check(path: Path, tol: float, atol: float) -> int:
    from .math.coefficient import analyse
    from .math.validation import check_stochastic

    A = _load(path)
    try:
        A = check_stochastic(A, atol=atol)
    except ValueError as e:
        raise ValueError(f"{path}: {e}") from None
    res = analyse(A, tol, validate=False)
    lead, n = A.shape[:-2], A.shape[-1]
    for idx in np.ndindex(*lead):  # one empty index for a single matrix
        label = f"matrix {idx}: " if lead else ""
        holds = bool(res.holds[idx])
        i, j = (int(v) for v in res.witness[idx])
        a = lambda r, c: f"A[{r},{c}]={A[idx + (r, c)]:.6g}"  # noqa: E731
        print(f"{label}n = {n}")
        print(f"  kappa(A)          = {float(res.kappa[idx]):.17g}")
        print(f"  kappa((I+A)/2)    = {float(res.kappa_factor[idx]):.17g}")
        print(f"  bound (1+kappa)/2 = {float(res.bound[idx]):.17g}")
        print(f"  equality holds    = {'yes' if holds else 'no'}")
        if n < 2:
            print("  witness: none (n = 1: no pair of tokens exists)")
        elif holds:
            print(f"  witness: pair ({i}, {j}) attains kappa(A) and is mutually self-dominant "
                  f"({a(i, i)} >= {a(j, i)}, {a(j, j)} >= {a(i, j)})")
        else:
            print(f"  witness: none — no pair attaining kappa(A) is mutually self-dominant "
                  f"(e.g. attaining pair ({i}, {j}): {a(i, i)} vs {a(j, i)}, {a(j, j)} vs {a(i, j)})")
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
