"""``python -m dobrushin check FILE``: what it prints is checked against brute force computed here."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from dobrushin.__main__ import main

ROOT = Path(__file__).resolve().parents[1]


def bf_dist(A, i, j):
    s = 0.0
    for a, c in zip(A[i], A[j]):
        s += abs(float(a) - float(c))
    return 0.5 * s


def bf(A, tol=1e-12):
    """κ(A), κ(½(I+A)) (from the factor's own rows), holds, and the set of attaining pairs."""
    n = len(A)
    B = 0.5 * (np.eye(n) + A)
    pairs = [(i, j) for i in range(n) for j in range(i + 1, n)]
    k = max((bf_dist(A, i, j) for i, j in pairs), default=0.0)
    kb = max((bf_dist(B, i, j) for i, j in pairs), default=0.0)
    att = [(i, j) for i, j in pairs if bf_dist(A, i, j) >= k - tol]
    good = [(i, j) for i, j in att if A[i, i] - A[j, i] >= -tol and A[j, j] - A[i, j] >= -tol]
    return k, kb, bool(good), att, good


def parse(out: str):
    """Blocks of the report, one per matrix: label, n, the three numbers, holds, witness line."""
    blocks = re.split(r"^(?=(?:matrix \([\d, ]*\): )?n = )", out, flags=re.M)
    res = []
    for b in filter(None, blocks):
        m = re.match(r"(?:matrix (\([\d, ]*\)): )?n = (\d+)", b)
        num = lambda name: float(re.search(rf"{re.escape(name)}\s*= (\S+)", b).group(1))  # noqa: E731
        res.append(dict(
            label=m.group(1), n=int(m.group(2)), kappa=num("kappa(A)"), kappa_factor=num("kappa((I+A)/2)"),
            bound=num("bound (1+kappa)/2"), holds=re.search(r"equality holds\s*= (yes|no)", b).group(1) == "yes",
            witness=re.search(r"witness: (.*)", b).group(1),
        ))
    return res


def run(capfd, *argv):
    code = main(["check", *map(str, argv)])
    cap = capfd.readouterr()
    return code, cap.out, cap.err


def check_block(blk, A, tol=1e-12):
    k, kb, holds, att, good = bf(A, tol)
    assert blk["n"] == len(A)
    assert blk["kappa"] == k
    assert abs(blk["kappa_factor"] - kb) <= 1e-12
    assert blk["bound"] == 0.5 * (1 + k)
    assert blk["holds"] == holds
    w = re.search(r"pair \((\d+), (\d+)\)", blk["witness"])
    if len(A) < 2:
        assert w is None and "n = 1" in blk["witness"]
    elif holds:
        assert blk["witness"].startswith("pair") and (int(w.group(1)), int(w.group(2))) in good
        assert "mutually self-dominant" in blk["witness"]
    else:
        assert blk["witness"].startswith("none") and (int(w.group(1)), int(w.group(2))) in att
        assert "no pair attaining" in blk["witness"]


def matrices():
    rng = np.random.default_rng(0)
    yield "dirichlet", rng.dirichlet(np.full(6, 0.2), size=6)
    yield "identity", np.eye(4)
    yield "swap", np.array([[0.0, 1.0], [1.0, 0.0]])
    yield "n1", np.array([[1.0]])
    yield "binary", np.array([[0.5, 0.25, 0.25], [0.0, 0.75, 0.25], [0.125, 0.125, 0.75]])


@pytest.mark.parametrize("name, A", list(matrices()), ids=[m[0] for m in matrices()])
@pytest.mark.parametrize("fmt", ["npy", "csv"])
def test_single_matrix_report(tmp_path, capfd, name, A, fmt):
    f = tmp_path / f"{name}.{fmt}"
    np.save(f, A) if fmt == "npy" else np.savetxt(f, A, delimiter=",", fmt="%.17g")
    code, out, err = run(capfd, f)
    assert code == 0 and err == ""
    (blk,) = parse(out)
    assert blk["label"] is None
    check_block(blk, A)


def test_stack_report(tmp_path, capfd):
    rng = np.random.default_rng(1)
    S = rng.dirichlet(np.full(5, 0.3), size=(2, 3, 5))
    S[0, 1] = np.eye(5)
    f = tmp_path / "stack.npy"
    np.save(f, S)
    code, out, _ = run(capfd, f)
    assert code == 0
    blocks = parse(out)
    assert [b["label"] for b in blocks] == [str(idx) for idx in np.ndindex(2, 3)]
    for blk, idx in zip(blocks, np.ndindex(2, 3)):
        check_block(blk, S[idx])


def test_tol_option_changes_the_answer(tmp_path, capfd):
    # pairs (0, 1) and (1, 2) attain κ = 1, neither is self-dominant; pair (0, 2) is, at distance 7/8
    A = np.array([[0.0, 1.0, 0.0], [1.0, 0.0, 0.0], [0.0, 1 / 8, 7 / 8]])
    f = tmp_path / "a.npy"
    np.save(f, A)
    strict = parse(run(capfd, f, "--tol", "0")[1])[0]
    loose = parse(run(capfd, f, "--tol", "0.2")[1])[0]
    check_block(strict, A, 0.0)
    check_block(loose, A, 0.2)
    assert not strict["holds"] and loose["holds"]


BAD = {
    "missing.npy": (None, "no such file"),
    "matrix.txt": (lambda p: p.write_text("1"), "unsupported file type .txt"),
    "corrupt.npy": (lambda p: p.write_bytes(b"not an npy file"), "cannot read"),
    "words.csv": (lambda p: p.write_text("a,b\nc,d\n"), "cannot read"),
    "ragged.csv": (lambda p: p.write_text("0.5,0.5\n1\n"), "cannot read"),
    "nonsquare.npy": (lambda p: np.save(p, np.full((2, 3), 1 / 3)), "not square"),
    "badrow.csv": (lambda p: p.write_text("0.5,0.5\n0.2,0.2\n"), "row 1 sums to 0.4"),
    "negative.npy": (lambda p: np.save(p, np.array([[1.5, -0.5], [0.5, 0.5]])), "negative entry"),
    "nan.npy": (lambda p: np.save(p, np.array([[np.nan, 1.0], [0.5, 0.5]])), "NaN"),
    "empty.npy": (lambda p: np.save(p, np.zeros((0, 0))), "empty"),
    "vector.npy": (lambda p: np.save(p, np.ones(3)), "shape"),
    "pickle.npy": (lambda p: np.save(p, np.array([[{}]], dtype=object), allow_pickle=True), "cannot read"),
}


@pytest.mark.parametrize("name", sorted(BAD))
def test_bad_files_give_one_line_and_status_2(tmp_path, capfd, name):
    make, message = BAD[name]
    f = tmp_path / name
    if make:
        make(f)
    code, out, err = run(capfd, f)
    assert code == 2
    assert out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("error: ") and str(f) in lines[0]
    assert message in lines[0]


def test_python_dash_m_entry_point(tmp_path):
    """The real command line, in a subprocess: output on success, status 2 and one line on error."""
    A = np.array([[0.75, 0.25], [0.25, 0.75]])
    good = tmp_path / "a.csv"
    np.savetxt(good, A, delimiter=",")
    env = dict(os.environ, PYTHONPATH=str(ROOT / "lib"), HF_HUB_OFFLINE="1")
    p = subprocess.run([sys.executable, "-m", "dobrushin", "check", str(good)], capture_output=True, text=True,
                       env=env, timeout=300)
    assert p.returncode == 0, p.stderr
    check_block(parse(p.stdout)[0], A)
    p = subprocess.run([sys.executable, "-m", "dobrushin", "check", str(tmp_path / "nope.npy")],
                       capture_output=True, text=True, env=env, timeout=300)
    assert p.returncode == 2 and p.stdout == ""
    assert len(p.stderr.strip().splitlines()) == 1 and "no such file" in p.stderr
