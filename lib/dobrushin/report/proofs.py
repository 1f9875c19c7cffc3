"""The machine-checked proofs in ``proofs/`` (Coq 8.16 + MathComp 1.15): which results of the theory
chapter they cover, and their Coq statements read from the ``.v`` file (so a statement shown in the book is
never typed twice).

``make proofs`` (``proofs/check.sh``) compiles ``proofs/Dobrushin.v`` (the layer bound and its equality case) and
``proofs/Rollout.v`` (submultiplicativity and the rollout bounds) and checks that each theorem named in a
``Print Assumptions`` line of ``proofs/Assumptions.v`` is "Closed under the global context".
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Optional

from ..store.paths import project_root

#: (Coq name, label of the prose result in the theory chapter, what the Coq theorem states); the file holding
#: each is found by :func:`coq_statement`
CHECKED = (
    ("pair_identity", "lem-pair",
     "the pair identity, in the form the prose proof reaches before its last step: "
     r"$D_{ij}(B)=\tfrac14\bigl(2+x+y+\sum_{k\ne i,j}|A_{ik}-A_{jk}|\bigr)$ for $i\ne j$"),
    ("pair_bound", "lem-pair", r"its consequence $D_{ij}(B)\le\tfrac12(1+D_{ij}(A))$, for every pair"),
    ("pair_eq", "lem-pair",
     r"equality in that bound holds iff $(i,j)$ is mutually self-dominant ($x\ge0$ and $y\ge0$), for $i\ne j$"),
    ("layer_bound", "thm-layer-bound", r"the layer bound $\kappa(B)\le\tfrac12(1+\kappa(A))$"),
    ("layer_bound_eq", "thm-equality",
     r"the equality characterisation; the Coq statement needs no $n\ge2$: for $n\le1$ both sides are false"),
    ("kappa_mul", "lem-submult",
     r"submultiplicativity $\kappa(PQ)\le\kappa(P)\,\kappa(Q)$; only $P$ needs to be stochastic"),
    ("rollout_bound_factors", "cor-rollout",
     r"the corollary's first inequality $\kappa(B_L\cdots B_1)\le\prod_\ell\kappa(B_\ell)$; `rollout` multiplies "
     r"the factors of the list `[:: A_1; ...; A_L]` as $B_L\cdots B_1$"),
    ("rollout_bound", "cor-rollout",
     r"and its second, $\kappa(B_L\cdots B_1)\le\prod_\ell\tfrac12(1+\kappa(A_\ell))$"),
)
#: Coq definitions the statements use, in the order the chapter shows them
DEFINITIONS = ("stochastic", "dist", "kappa", "layer", "self_dominant", "rollout")
#: the Coq files, in the order make proofs compiles them (Assumptions.v, compiled last, only prints)
SOURCES = ("Dobrushin.v", "Rollout.v")


def proofs_dir(root: Optional[Path] = None) -> Path:
    root = Path(root) if root is not None else project_root()
    if root is None:
        raise FileNotFoundError("cannot find the project root (a folder with _config.yml and lib/dobrushin)")
    return root / "proofs"


def _source(path: Optional[Path]) -> str:
    """The text of ``path``, or of every file in :data:`SOURCES` (joined) when it is None."""
    files = [Path(path)] if path is not None else [proofs_dir() / f for f in SOURCES]
    for p in files:
        if not p.is_file():
            raise FileNotFoundError(f"Coq source not found: {p}")
    return "\n".join(p.read_text(encoding="utf-8") for p in files)


def source_of(name: str, root: Optional[Path] = None) -> str:
    """The file of :data:`SOURCES` that states ``name``."""
    for f in SOURCES:
        if re.search(rf"^(?:Theorem|Lemma|Corollary|Definition) {re.escape(name)}\b", _source(proofs_dir(root) / f), re.M):
            return f
    raise KeyError(f"no Theorem, Lemma or Definition named {name!r} in proofs/ ({', '.join(SOURCES)})")


def coq_statement(name: str, path: Optional[Path] = None) -> str:
    """The statement of the Coq ``Theorem``/``Lemma`` ``name``: from its keyword up to ``Proof.``."""
    m = re.search(rf"^((?:Theorem|Lemma|Corollary) {re.escape(name)}\b.*?)^Proof\.", _source(path), re.M | re.S)
    if not m:
        raise KeyError(f"no Theorem or Lemma named {name!r} in {path or ', '.join(SOURCES)}")
    return m.group(1).strip()


def coq_definition(name: str, path: Optional[Path] = None) -> str:
    """The Coq ``Definition name ...`` sentence (it ends at the first full stop that ends a line)."""
    m = re.search(rf"^(Definition {re.escape(name)}\b.*?\.)\s*$", _source(path), re.M | re.S)
    if not m:
        raise KeyError(f"no Definition named {name!r} in {path or ', '.join(SOURCES)}")
    return m.group(1).strip()


def checked_names(path: Optional[Path] = None) -> list:
    """The theorems whose assumptions ``make proofs`` checks (``Print Assumptions`` lines of Assumptions.v)."""
    p = Path(path) if path is not None else proofs_dir() / "Assumptions.v"
    return re.findall(r"^Print Assumptions (\w+)\.\s*$", p.read_text(encoding="utf-8"), re.M)


def _block(code: str) -> str:
    return f"```coq\n{code}\n```"


def definitions_text(path: Optional[Path] = None) -> str:
    """The Coq definitions as one code block, for the chapter."""
    return _block("\n".join(coq_definition(d, path) for d in DEFINITIONS))


def statements_text(link: str = "../proofs") -> str:
    """Markdown: each machine-checked result, the prose result it corresponds to, its Coq statement and
    a download link to its file (``link``: the proofs folder relative to the page, executed/ in the book)."""
    checked = set(checked_names())
    parts = []
    for name, label, what in CHECKED:
        if name not in checked:
            raise ValueError(f"{name} is shown as machine-checked but proofs/Assumptions.v does not check it")
        f = source_of(name)
        parts.append(f"**`{name}`** ({{prf:ref}}`{label}`; in {{download}}`{f} <{link}/{f}>`): {what}.\n\n"
                     f"{_block(coq_statement(name))}")
    return "\n\n".join(parts)
