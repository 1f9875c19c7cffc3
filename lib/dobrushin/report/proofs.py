"""The machine-checked proofs in ``proofs/`` (Coq 8.16 + MathComp 1.15): which results of the theory
chapter they cover, and their Coq statements read from the ``.v`` file (so a statement shown in the book is
never typed twice).

``make proofs`` (``proofs/check.sh``) compiles ``proofs/Dobrushin.v`` and checks that each theorem named in a
``Print Assumptions`` line of ``proofs/Assumptions.v`` is "Closed under the global context".
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Optional

from ..store.paths import project_root

#: (Coq name, label of the prose result in the theory chapter, what the Coq theorem states)
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
)
#: Coq definitions the statements use, in the order the chapter shows them
DEFINITIONS = ("stochastic", "dist", "kappa", "layer", "self_dominant")
SOURCE = "Dobrushin.v"


def proofs_dir(root: Optional[Path] = None) -> Path:
    root = Path(root) if root is not None else project_root()
    if root is None:
        raise FileNotFoundError("cannot find the project root (a folder with _config.yml and lib/dobrushin)")
    return root / "proofs"


def _source(path: Optional[Path]) -> str:
    p = Path(path) if path is not None else proofs_dir() / SOURCE
    if not p.is_file():
        raise FileNotFoundError(f"Coq source not found: {p}")
    return p.read_text(encoding="utf-8")


def coq_statement(name: str, path: Optional[Path] = None) -> str:
    """The statement of the Coq ``Theorem``/``Lemma`` ``name``: from its keyword up to ``Proof.``."""
    m = re.search(rf"^((?:Theorem|Lemma|Corollary) {re.escape(name)}\b.*?)^Proof\.", _source(path), re.M | re.S)
    if not m:
        raise KeyError(f"no Theorem or Lemma named {name!r} in {path or SOURCE}")
    return m.group(1).strip()


def coq_definition(name: str, path: Optional[Path] = None) -> str:
    """The Coq ``Definition name ...`` sentence (it ends at the first full stop that ends a line)."""
    m = re.search(rf"^(Definition {re.escape(name)}\b.*?\.)\s*$", _source(path), re.M | re.S)
    if not m:
        raise KeyError(f"no Definition named {name!r} in {path or SOURCE}")
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


def statements_text(path: Optional[Path] = None, link: str = "../proofs/Dobrushin.v") -> str:
    """Markdown: each machine-checked result, the prose result it corresponds to and its Coq statement."""
    checked = set(checked_names(None if path is None else Path(path).with_name("Assumptions.v")))
    parts = []
    for name, label, what in CHECKED:
        if name not in checked:
            raise ValueError(f"{name} is shown as machine-checked but proofs/Assumptions.v does not check it")
        parts.append(f"**`{name}`** ({{prf:ref}}`{label}`): {what}.\n\n{_block(coq_statement(name, path))}")
    parts.append(f"All in {{download}}`proofs/Dobrushin.v <{link}>`.")
    return "\n\n".join(parts)
