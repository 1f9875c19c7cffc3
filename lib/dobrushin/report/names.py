"""Display names of models and families, for tables, figures and the manifest (strings only)."""
from __future__ import annotations

from ..math.stats import pct  # noqa: F401  (one formatter for report and the command line)
from ..models.configs import display_name, model_family

#: family labels of the report, by :func:`dobrushin.models.model_family` value
FAMILY_LABELS = {"dinov2": "DINOv2", "dinov2-registers": "DINOv2", "deit": "DeiT", "deit-distilled": "DeiT",
                 "vit": "ViT", "roberta": "RoBERTa", "distilbert": "DistilBERT", "bert": "BERT",
                 "minilm": "MiniLM", "mpnet": "MPNet", "ft-transformer": "FT-Transformer"}
WEIGHTS_LABELS = {"pretrained": "trained weights", "untrained": "untrained control"}
VARIANT_LABELS = {"content": "content tokens", "with_special": "with special tokens"}
#: the variant as a table cell (summary.csv's ``variant`` column, the chapters' tables)
VARIANT_TABLE_LABELS = {"content": "content", "with_special": "with special tokens"}


def family_label(model: str, notebook: str = "") -> str:
    """The family of a model id as the report names it (``"DINOv2"``, ``"MiniLM"``, ...); ``notebook``
    (or ``"other"``) when the id names no known family."""
    fam = model_family(model)
    if fam == "bert" and "minilm" in str(model).lower():
        fam = "minilm"
    return FAMILY_LABELS.get(fam, notebook or "other")


def weights_label(weights: str) -> str:
    return WEIGHTS_LABELS.get(weights, weights)


__all__ = ["FAMILY_LABELS", "VARIANT_LABELS", "VARIANT_TABLE_LABELS", "WEIGHTS_LABELS", "display_name", "family_label", "weights_label"]



