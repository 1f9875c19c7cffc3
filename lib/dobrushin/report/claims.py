"""The paper's values, in one place: every number this build compares with (Rola 2026, and the published
FT-Transformer metrics it relies on), and which models each claim is about.  Notebooks, the summary
and the figures read them from here; nothing else types a paper value."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

@dataclass(frozen=True)
class Claim:
    key: str
    text: str  # the claim in words
    paper_value: str  # as the paper states it
    low: float
    high: float


CLAIMS = {
    "baseline": Claim("baseline", "uniformly random stochastic matrices satisfy the condition", "24–30%", 0.24, 0.30),
    "essentially_all": Claim("essentially_all", "holds for essentially every input and layer (content tokens)",
                             "≈100%", 0.99, 1.0),
    "deit": Claim("deit", "DeiT-B: fraction of input-layer pairs (content tokens)", "91%", 0.905, 0.915),
    "vit": Claim("vit", "ViT-B/16: fraction of input-layer pairs (content tokens)", "64%", 0.635, 0.645),
    "late": Claim("late", "supervised ViTs: all failures occur late in depth", "all failures late", 1.0, 1.0),
    "tabular": Claim("tabular", "FT-Transformer on tabular benchmarks (content tokens)", "11–44%", 0.11, 0.44),
    "special": Claim("special", "with special tokens included (DINOv2 and language models)", "82–97%", 0.82, 0.97),
}

# model-id fragments -> the content claim and whether the paper reports the special-token variant
MODEL_CLAIMS = [
    ("dinov2", "essentially_all", True),
    ("roberta", "essentially_all", True),
    ("distilbert", "essentially_all", True),
    # the paper's supervised models exactly (HF ids and timm names); other DeiT/ViT sizes get no claim
    ("deit-base-patch16-224", "deit", False),
    ("deit_base_patch16_224", "deit", False),
    ("deit-base-distilled-patch16-224", "deit", False),
    ("deit_base_distilled_patch16_224", "deit", False),
    ("vit-base-patch16-224", "vit", False),
    ("vit_base_patch16_224", "vit", False),
    ("ft-transformer", "tabular", False),
]
# models the paper does not report, compared with nothing
EXTRA_MODELS = ("minilm",)


def _match(model: str):
    """The ``MODEL_CLAIMS`` entry for ``model`` (None for extra models and models the paper lacks)."""
    m = model.lower()
    if any(e in m for e in EXTRA_MODELS):
        return None
    return next((entry for entry in MODEL_CLAIMS if entry[0] in m), None)


def content_claim(model: str) -> Optional[str]:
    """Key of the paper's content-token claim for ``model`` (None: no claim)."""
    hit = _match(model)
    return hit[1] if hit else None


def special_claim(model: str) -> Optional[str]:
    """``"special"`` when the paper states the special-token figure for ``model``'s family, else None."""
    hit = _match(model)
    return "special" if hit and hit[2] else None


@dataclass(frozen=True)
class ScorecardRow:
    """One row of the summary's scorecard: one claim of the paper, about the models of ``families``
    (:func:`dobrushin.models.model_family` values), judged against the range of ``CLAIMS[band]``.

    ``kind``: ``"fraction"`` (share of (input, layer) pairs where the condition holds, on ``variant``),
    ``"late"`` (all failures in the second half of the network), ``"baseline"`` (random matrices) or
    ``"related"`` (trained models of ``families`` that no claim covers: shown, never judged)."""
    key: str
    short: str  # the claim's name in a sentence ("DeiT-B")
    text: str  # the claim in words
    band: Optional[str]  # key of CLAIMS (None: no paper value)
    families: tuple = ()
    variant: str = "content"
    kind: str = "fraction"


#: The scorecard: the paper's claims in the order the book presents them.
SCORECARD = (
    ScorecardRow("baseline", "the random baseline",
                 "Random stochastic matrices (rows uniform on the simplex)",
                 "baseline", kind="baseline"),
    ScorecardRow("dinov2", "DINOv2 S/B/L", "DINOv2 S/B/L: essentially every input and layer",
                 "essentially_all", families=("dinov2",)),
    ScorecardRow("roberta", "RoBERTa", "RoBERTa: essentially every input and layer",
                 "essentially_all", families=("roberta",)),
    ScorecardRow("distilbert", "DistilBERT", "DistilBERT: essentially every input and layer",
                 "essentially_all", families=("distilbert",)),
    ScorecardRow("deit", "DeiT-B", "DeiT-B: share of (input, layer) pairs", "deit",
                 families=("deit", "deit-distilled")),
    ScorecardRow("vit", "ViT-B/16", "ViT-B/16: share of (input, layer) pairs", "vit",
                 families=("vit",)),
    ScorecardRow("late", "failures late in depth", "DeiT-B and ViT-B/16: all failures late in depth",
                 "late", families=("deit", "deit-distilled", "vit"), kind="late"),
    ScorecardRow("tabular", "FT-Transformer", "FT-Transformer on two tabular benchmarks",
                 "tabular", families=("ft-transformer",)),
    ScorecardRow("special", "with special tokens",
                 "DINOv2, RoBERTa, DistilBERT with special tokens", "special",
                 families=("dinov2", "roberta", "distilbert"), variant="with_special"),
    ScorecardRow("related_text", "other text encoders",
                 "Not in the paper: other trained text encoders", None,
                 families=("bert", "mpnet"), kind="related"),
)


#: FT-Transformer results published by Gorishniy et al. (2021), Table 2 (single models): test RMSE on
#: California Housing, test accuracy on Adult
PUBLISHED_FT_TRANSFORMER = {"california": 0.459, "adult": 0.859}


def band(key: str) -> tuple:
    """``(low, high)`` of a claim, e.g. ``band("baseline") == (0.24, 0.30)``."""
    c = CLAIMS[key]
    return c.low, c.high


def band_label(key: str) -> str:
    """The claim's range in words for legends, e.g. ``"paper: 24–30%"``."""
    return f"paper: {CLAIMS[key].paper_value}"


__all__ = ["CLAIMS", "Claim", "SCORECARD", "ScorecardRow", "EXTRA_MODELS", "MODEL_CLAIMS", "PUBLISHED_FT_TRANSFORMER", "band", "band_label",
           "content_claim", "special_claim"]
