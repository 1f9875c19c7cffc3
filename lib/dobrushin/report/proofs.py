"""The machine-checked proofs in ``proofs/`` (Coq 8.16 + MathComp 1.15): which theory-chapter results they cover
(``statements_text``).  ``make proofs`` checks that each theorem in a ``Print Assumptions`` line of
``proofs/Assumptions.v`` is "Closed under the global context"."""
from __future__ import annotations

import re
from pathlib import Path

from ..store.paths import project_root

#: (Coq name, label of the prose result in the theory chapter)
CHECKED = (
    ("pair_identity", "lem-pair"), ("pair_bound", "lem-pair"), ("pair_eq", "lem-pair"),
    ("layer_bound", "thm-layer-bound"), ("layer_bound_eq", "thm-equality"), ("kappa_mul", "lem-submult"),
    ("rollout_bound_factors", "cor-rollout"), ("rollout_bound", "cor-rollout"),
)
#: the Coq files, in the order make proofs compiles them (Assumptions.v, compiled last, only prints)
SOURCES = ("Dobrushin.v", "Rollout.v")


def proofs_dir() -> Path:
    root = project_root()
    if root is None:
        raise FileNotFoundError("cannot find the project root (a folder with _config.yml and lib/dobrushin)")
    return root / "proofs"


def source_of(name: str) -> str:
    """The file of ``SOURCES`` that states ``name``."""
    for f in SOURCES:
        text = (proofs_dir() / f).read_text(encoding="utf-8")
        if re.search(rf"^(?:Theorem|Lemma|Corollary|Definition) {re.escape(name)}\b", text, re.M):
            return f
    raise KeyError(f"no Theorem, Lemma or Definition named {name!r} in proofs/ ({', '.join(SOURCES)})")


def checked_names() -> list:
    """The theorems whose assumptions ``make proofs`` checks (``Print Assumptions`` lines of Assumptions.v)."""
    text = (proofs_dir() / "Assumptions.v").read_text(encoding="utf-8")
    return re.findall(r"^Print Assumptions (\w+)\.\s*$", text, re.M)


def statements_text() -> str:
    """Markdown table of each prose result, the Coq theorems proving it and their files (download links); raises if
    a listed theorem is not checked by Assumptions.v."""
    checked = set(checked_names())
    rows = {}
    for name, label in CHECKED:
        if name not in checked:
            raise ValueError(f"{name} is shown as machine-checked but proofs/Assumptions.v does not check it")
        f = source_of(name)
        names, files = rows.setdefault(label, ([], {}))  # files: a dict, each once in order
        names.append(f"`{name}`")
        files[f] = None
    lines = ["| result | Coq theorems | file |", "|:---|:---|:---|"]
    for label, (names, files) in rows.items():
        lines.append(f"| {{prf:ref}}`{label}` | {', '.join(names)} | "
                     + ", ".join(f"{{download}}`{f} <../proofs/{f}>`" for f in files) + " |")
    return "\n".join(lines)
