"""The digest of the source code that computes the numbers: what keys the caches instead of hand-bumped
version integers.

:func:`code_digest` hashes, at run time, the bytes of every ``.py`` file of the named subpackages of
``dobrushin`` (or of single files named by their path inside the package), in sorted order of their
paths.  Any edit to those files — one added line in ``capture/hooks.py`` — gives another digest, so a
cached table or checkpoint computed by other code is never served; an edit elsewhere (``report/``, the
presentation, is not in :data:`NUMBERS_PACKAGES`) leaves the digest, and the cache, as they are.
Whitespace and comments count too: the digest cannot tell a harmless edit from one that changes numbers,
so it errs on recomputing.
"""
from __future__ import annotations

import hashlib
from pathlib import Path
from typing import List, Sequence

#: the root of the ``dobrushin`` package whose files are hashed
PACKAGE_ROOT = Path(__file__).resolve().parents[1]

#: the subpackages the measured numbers depend on (``report/`` and ``tools/`` are presentation and tooling)
NUMBERS_PACKAGES = ("math", "capture", "models", "data", "experiments", "random", "store")


def code_files(packages: Sequence[str] = NUMBERS_PACKAGES, root: "Path | None" = None) -> List[Path]:
    """The ``.py`` files behind ``packages`` (subpackage names such as ``"math"`` or file paths such as
    ``"models/ft_transformer.py"``, relative to the package root), sorted by path, without duplicates."""
    root = Path(root) if root is not None else PACKAGE_ROOT
    if isinstance(packages, str):
        raise TypeError("packages must be a sequence of names, e.g. ('math', 'capture'), not a string")
    files = set()
    for name in packages:
        p = root / name
        if p.is_dir():
            files.update(f for f in p.rglob("*.py") if "__pycache__" not in f.parts)
        elif p.is_file() and p.suffix == ".py":
            files.add(p)
        else:
            raise ValueError(f"code_digest: {name!r} is neither a subpackage nor a .py file of {root}")
    return sorted(files, key=lambda f: f.relative_to(root).as_posix())


def code_digest(packages: Sequence[str] = NUMBERS_PACKAGES, root: "Path | None" = None) -> str:
    """SHA-256 (hex) of the named subpackages' / files' sources: each file's path relative to the package
    root and its bytes, in sorted path order (so a renamed or moved file changes it too)."""
    root = Path(root) if root is not None else PACKAGE_ROOT
    h = hashlib.sha256()
    for f in code_files(packages, root):
        data = f.read_bytes()
        h.update(f.relative_to(root).as_posix().encode())
        h.update(b"\0%d\0" % len(data))
        h.update(data)
    return h.hexdigest()


__all__ = ["NUMBERS_PACKAGES", "PACKAGE_ROOT", "code_digest", "code_files"]
