"""Sentences as read from their sources, before any selection (:func:`dobrushin.data.inputs.load_texts` selects
and keys them): a GLUE-style TSV's ``sentence`` column, and the English sentences of the Python documentation."""
from __future__ import annotations

import re
from pathlib import Path
from typing import List

_CODEY = re.compile(r"[\"`*_=|\[\]{}<>\\#@$^~]|::|\.\.\.|\(\)|\w\.\w")


def embedded_sentences(min_chars: int = 40, max_chars: int = 200, min_words: int = 8) -> List[str]:
    """Real English sentences from the Python documentation shipped with the interpreter
    (``pydoc_data.topics``): prose sentences of ``min_chars..max_chars`` characters and at least
    ``min_words`` words, without code-like characters, deduplicated.  Deterministic for a given Python version.
    """
    from pydoc_data.topics import topics

    out, seen = [], set()
    for key in sorted(topics):
        for para in re.split(r"\n\s*\n", topics[key]):
            lines = para.splitlines()
            if any(ln.startswith("   ") or ln.lstrip().startswith(">>>") for ln in lines):
                continue
            text = " ".join(" ".join(lines).split())
            for s in re.split(r"(?:(?<=[.!?])|(?<=[.!?][\u2019\u201d')]))\s+(?=[A-Z])", text):
                s = s.strip()
                if not (min_chars <= len(s) <= max_chars) or not s.endswith("."):
                    continue
                if not re.match(r"^[A-Z][a-z]", s) or len(s.split()) < min_words or _CODEY.search(s):
                    continue
                if s not in seen:
                    seen.add(s)
                    out.append(s)
    return out


def read_sst2_tsv(path) -> List[str]:
    """The ``sentence`` column of a GLUE-style TSV (header row, tab separated, no quote processing)."""
    import pandas as pd

    p = Path(path).expanduser()
    if not p.is_file():
        raise ValueError(f"sentence file {str(path)!r} does not exist")
    try:
        df = pd.read_csv(p, sep="\t", quoting=3, dtype=str, keep_default_na=False)
    except Exception as e:  # noqa: BLE001
        raise ValueError(f"{p}: cannot read as a tab-separated table: {e}") from None
    if "sentence" not in df.columns:
        raise ValueError(f"{p}: no 'sentence' column in the header (columns: {list(df.columns)})")
    sents = [s.strip() for s in df["sentence"].tolist()]
    empty = [i for i, s in enumerate(sents) if not s]
    if empty:
        raise ValueError(f"{p}: row {empty[0]} has an empty sentence")
    return sents
