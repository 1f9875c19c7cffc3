"""The digest of the source code that computes the numbers: what keys the caches instead of hand-bumped
version integers.

:func:`code_digest` hashes, at run time, the bytes of every ``.py`` file of the named subpackages of
``dobrushin`` (or of single files named by their path inside the package), in sorted order of their
paths.  Any edit to those files — one added line in ``capture/hooks.py`` — gives another digest, so a
cached table or checkpoint computed by other code is never served; an edit elsewhere (``report/``, the
presentation, is not in :data:`NUMBERS_PACKAGES`) leaves the digest, and the cache, as they are.
Whitespace and comments count too: the digest cannot tell a harmless edit from one that changes numbers,
so it errs on recomputing.

The default digest (:func:`code_digest` with no ``packages``) covers the *measuring* modules: every module
of :data:`NUMBERS_PACKAGES` except the :data:`ORCHESTRATION` modules (parameter parsing, the command line,
the sweep's scheduling, publishing and verification), together with everything those measuring modules
import from ``dobrushin``, found by reading their ``import`` statements (:func:`import_closure`).  The
orchestration modules never compute a number (what they pass on, the resolved parameters, is in the cache
key itself), so an edit to them keeps the published paper-scale results valid; should a measuring module
ever import one of them, the closure puts it back in the digest.
"""
from __future__ import annotations

import ast
import hashlib
import threading
from pathlib import Path
from typing import Iterable, List, Optional, Sequence, Set

#: the root of the ``dobrushin`` package whose files are hashed
PACKAGE_ROOT = Path(__file__).resolve().parents[1]

#: the subpackages the measured numbers depend on (``report/`` and ``tools/`` are presentation and tooling)
NUMBERS_PACKAGES = ("math", "capture", "models", "data", "experiments", "random", "store")

#: modules of :data:`NUMBERS_PACKAGES` that only parse, dispatch, schedule, publish or verify (they call the
#: measuring code and never compute a number themselves): outside the default digest unless imported by a
#: measuring module
ORCHESTRATION = ("experiments/params.py", "experiments/measure_cli.py", "experiments/sweep.py",
                 "experiments/sweep_dask.py", "experiments/model_cache.py", "experiments/publish.py",
                 "experiments/verify.py")


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


def _module_file(root: Path, parts: Sequence[str]) -> Optional[Path]:
    p = root.joinpath(*parts)
    if (p / "__init__.py").is_file():
        return p / "__init__.py"
    return p.with_suffix(".py") if p.with_suffix(".py").is_file() else None


#: one ``ast.parse`` at a time (CPython 3.11's AST constructor is not safe to run in two threads at once, as
#: the threads of a Dask worker would), and each file's imports parsed once per content
_PARSE_LOCK = threading.Lock()
_IMPORTS_MEMO: dict = {}


def _imported(root: Path, f: Path) -> Set[Path]:
    """The ``dobrushin`` files ``f`` imports (absolute or relative, at module level or inside functions), with
    the ``__init__.py`` of every package on the way."""
    data = f.read_bytes()
    memo_key = (str(root), str(f), hashlib.sha256(data).digest())
    with _PARSE_LOCK:
        if memo_key not in _IMPORTS_MEMO:
            _IMPORTS_MEMO[memo_key] = _parse_imports(root, f, data)
        return set(_IMPORTS_MEMO[memo_key])


def _parse_imports(root: Path, f: Path, data: bytes) -> Set[Path]:
    rel = f.relative_to(root).with_suffix("").parts
    package = list(rel[:-1])  # the package ``f`` is in (for ``pkg/__init__.py``, ``pkg`` itself)
    names = []
    for node in ast.walk(ast.parse(data, filename=str(f))):
        if isinstance(node, ast.Import):
            names += [a.name.split(".")[1:] for a in node.names if a.name.split(".")[0] == "dobrushin"]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[:len(package) - (node.level - 1)] if node.level > 1 else package
                mod = base + (node.module.split(".") if node.module else [])
            elif (node.module or "").split(".")[0] == "dobrushin":
                mod = node.module.split(".")[1:]
            else:
                continue
            names.append(mod)
            names += [mod + [a.name] for a in node.names]  # ``from . import loading`` names a module
    out = set()
    for parts in names:
        for i in range(len(parts) + 1):  # the packages on the way are imported too
            m = _module_file(root, parts[:i])
            if m is not None:
                out.add(m)
    return out


def import_closure(files: Iterable[Path], root: "Path | None" = None) -> List[Path]:
    """``files`` and every ``dobrushin`` file they import, transitively, sorted by path."""
    root = Path(root) if root is not None else PACKAGE_ROOT
    seen: Set[Path] = set()
    todo = [Path(f) for f in files]
    while todo:
        f = todo.pop()
        if f in seen:
            continue
        seen.add(f)
        todo.extend(_imported(root, f) - seen)
    return sorted(seen, key=lambda f: f.relative_to(root).as_posix())


def measuring_files(root: "Path | None" = None) -> List[Path]:
    """The files the default :func:`code_digest` covers: :data:`NUMBERS_PACKAGES` without
    :data:`ORCHESTRATION`, closed under imports (so an orchestration module a measuring one imports is in)."""
    root = Path(root) if root is not None else PACKAGE_ROOT
    skip = {root / o for o in ORCHESTRATION}
    return import_closure([f for f in code_files(NUMBERS_PACKAGES, root) if f not in skip], root)


def code_digest(packages: Optional[Sequence[str]] = None, root: "Path | None" = None) -> str:
    """SHA-256 (hex) of the named subpackages' / files' sources (default: :func:`measuring_files`): each
    file's path relative to the package root and its bytes, in sorted path order (so a renamed or moved
    file changes it too)."""
    root = Path(root) if root is not None else PACKAGE_ROOT
    h = hashlib.sha256()
    files = measuring_files(root) if packages is None else code_files(packages, root)
    for f in files:
        data = f.read_bytes()
        h.update(f.relative_to(root).as_posix().encode())
        h.update(b"\0%d\0" % len(data))
        h.update(data)
    return h.hexdigest()


__all__ = ["NUMBERS_PACKAGES", "ORCHESTRATION", "PACKAGE_ROOT", "code_digest", "code_files", "import_closure",
           "measuring_files"]
