"""The digest of the code that makes each cached product (``PRODUCTS``), which keys the caches.

``product_digest`` is a SHA-256 over the product's files (the model tables: closed under their
``dobrushin`` imports), each hashed as its normalized source: the syntax tree without docstrings, so
comments, docstrings and formatting change no digest and anything that runs does.  ``code_digest`` also
applies attestations (``store.attest``) that carry published results over to changed code.
"""
from __future__ import annotations

import ast
import functools
import hashlib
import threading
from pathlib import Path
from typing import FrozenSet, Iterable, List, Optional, Sequence, Set

#: the root of the ``dobrushin`` package whose files are hashed
PACKAGE_ROOT = Path(__file__).resolve().parents[1]

def code_files(packages: Sequence[str], root: "Path | None" = None) -> List[Path]:
    """The ``.py`` files behind ``packages`` (subpackages such as ``"math"`` or files such as
    ``"models/ft_transformer.py"``, relative to the package root), sorted by path."""
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


#: one ``ast.parse`` at a time (not thread-safe on CPython 3.11; Dask workers run threads)
_PARSE_LOCK = threading.Lock()


@functools.lru_cache(maxsize=None)
def _imported(root: Path, f: Path, data: bytes) -> FrozenSet[Path]:
    """The ``dobrushin`` files ``f`` (its content ``data``) imports anywhere, with the ``__init__.py`` of every
    package on the way."""
    rel = f.relative_to(root).with_suffix("").parts
    package = list(rel[:-1])  # the package ``f`` is in (for ``pkg/__init__.py``, ``pkg`` itself)
    with _PARSE_LOCK:
        tree = ast.parse(data, filename=str(f))
    names = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names += [a.name.split(".")[1:] for a in node.names if a.name.split(".")[0] == "dobrushin"]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                mod = package[:len(package) - node.level + 1] + (node.module.split(".") if node.module else [])
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
    return frozenset(out)


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
        todo.extend(_imported(root, f, f.read_bytes()) - seen)
    return sorted(seen, key=lambda f: f.relative_to(root).as_posix())


@functools.lru_cache(maxsize=None)
def normalized_source(data: bytes, filename: str = "<source>") -> bytes:
    """What a digest hashes of one file: ``normalized_tree`` of its syntax tree (comments, formatting and
    docstrings do not count)."""
    with _PARSE_LOCK:
        tree = ast.parse(data, filename=filename)
    return normalized_tree(tree)


def normalized_tree(tree: ast.AST) -> bytes:
    """A syntax tree written out field by field, without bare-string statements (docstrings).  Empty or
    ``None`` fields and the empty strings of f-strings are left out, so the text is the same on Python
    3.11–3.13 (3.12 adds ``type_params`` and empty format-spec strings)."""
    out: List[str] = []

    def walk(node) -> None:
        if isinstance(node, ast.AST):
            out.append(type(node).__name__ + "(")
            for name, value in ast.iter_fields(node):
                if isinstance(node, ast.JoinedStr) and name == "values":
                    value = [v for v in value if not (isinstance(v, ast.Constant) and v.value == "")]
                if isinstance(value, list) and name in ("body", "orelse", "finalbody"):
                    value = [s for s in value if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant)
                                                      and isinstance(s.value.value, str))]
                if value is None or (isinstance(value, list) and not value):
                    continue
                out.append(name + "=")
                walk(value)
                out.append(",")
            out.append(")")
        elif isinstance(node, list):
            out.append("[")
            for v in node:
                walk(v)
                out.append(",")
            out.append("]")
        else:
            out.append(repr(node))

    walk(tree)
    return "".join(out).encode()


def _digest(files: Sequence[Path], root: Path) -> str:
    h = hashlib.sha256()
    for f in files:
        data = normalized_source(f.read_bytes(), str(f))
        h.update(f.relative_to(root).as_posix().encode())
        h.update(b"\0%d\0" % len(data))
        h.update(data)
    return h.hexdigest()


#: product -> (the code that makes it, relative to the package root; whether closed under its imports):
#: the model tables and keyed analyses, the baseline's cells, the FT-Transformer checkpoints, and the
#: FT-Transformer measured along training
PRODUCTS = {
    "tables": (("experiments/pipeline.py", "experiments/tabular.py", "experiments/ablation.py", "experiments/atlas.py"),
               True),
    "cells": (("math", "random", "store"), False),
    "training": (("models/ft_transformer.py", "data/tabular_data.py"), False),
    "epochs": (("experiments/epochs.py",), True),
}
#: the modules that only name the products compute no number: left out of every product's files
KEYING = ("store/code.py", "store/attest.py")


def product_files(product: str, root: "Path | None" = None) -> List[Path]:
    """The files behind ``product`` (:data:`PRODUCTS`)."""
    root = Path(root) if root is not None else PACKAGE_ROOT
    if product not in PRODUCTS:
        raise ValueError(f"unknown product {product!r}; expected one of {', '.join(PRODUCTS)}")
    spec, closed = PRODUCTS[product]
    files = import_closure([root / f for f in spec], root) if closed else code_files(spec, root)
    keying = {root / k for k in KEYING}
    return [f for f in files if f not in keying]


def product_digest(product: str, root: "Path | None" = None) -> str:
    """SHA-256 (hex) of the normalized source of ``product_files``, each with its relative path, in sorted
    path order (a renamed file changes it too)."""
    root = Path(root) if root is not None else PACKAGE_ROOT
    return _digest(product_files(product, root), root)


def code_digest(packages: Optional[Sequence[str]] = None, root: "Path | None" = None) -> str:
    """The digest that keys a cached product: no ``packages`` means the model tables; ``packages`` equal
    to a ``PRODUCTS`` spec means that product, otherwise their plain digest.  For a product, the published
    digest when an accepted attestation in ``DOBRUSHIN_PUBLISHED`` carries today's code over to it."""
    root = Path(root) if root is not None else PACKAGE_ROOT
    product = "tables" if packages is None else next(
        (p for p, (spec, _) in PRODUCTS.items() if tuple(packages) == spec), None)
    if product is None:
        return _digest(code_files(packages, root), root)
    digest = product_digest(product, root)
    from .paths import published_dir

    pub = published_dir()
    if pub is None or root.resolve() != PACKAGE_ROOT.resolve():
        return digest
    from .attest import resolve

    return resolve(product, digest, pub)
