"""The paper's values in one place (Rola 2026 and the published FT-Transformer metrics), which models each claim is
about, and the verdict rule (``judge``).  Nothing else types a paper value."""
from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Optional

@dataclass(frozen=True)
class Claim:
    key: str
    text: str  # the claim in words
    paper_value: str  # as the paper states it
    low: float
    high: float
    point: Optional[float] = None  # a value the paper states as one rounded number (91%): [low, high] rounds to it


CLAIMS = {
    "baseline": Claim("baseline", "uniformly random stochastic matrices satisfy the condition", "24–30%", 0.24, 0.30),
    "essentially_all": Claim("essentially_all", "holds for essentially every input and layer (content tokens)",
                             "≈100%", 0.99, 1.0),
    "deit": Claim("deit", "DeiT-B: fraction of input-layer pairs (content tokens)", "91%", 0.905, 0.915, 0.91),
    "vit": Claim("vit", "ViT-B/16: fraction of input-layer pairs (content tokens)", "64%", 0.635, 0.645, 0.64),
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


#: An interval overlapping the paper's range but reaching more than this beyond it on either side is "inconclusive".
TOO_WIDE = 0.05

class Verdict(StrEnum):
    """The verdicts, from most to least said; ``colour`` is the figures' colour.  A row may add a qualifier after
    the word ("reproduced (proxy weights)"); ``of`` reads the verdict back from such a text."""
    REPRODUCED = "reproduced"
    CONSISTENT = "consistent"
    DIFFERS = "differs"
    INCONCLUSIVE = "inconclusive"
    NOT_RUN = "not run"
    RELATED = "related"  # shown beside the claims, never judged (no paper value)

    @classmethod
    def of(cls, text) -> "Verdict":
        """The verdict ``text`` starts with; ``RELATED`` for a text that names none."""
        t = str(text)
        return next((v for v in cls if v is not cls.RELATED and t.startswith(v.value)), cls.RELATED)

    @property
    def colour(self) -> str:
        return _VERDICT_COLOURS[self]


_VERDICT_COLOURS = {Verdict.REPRODUCED: "#009E73", Verdict.CONSISTENT: "#56B4E9", Verdict.DIFFERS: "#D55E00",
                    Verdict.INCONCLUSIVE: "#CC79A7", Verdict.NOT_RUN: "#999999", Verdict.RELATED: "#4D4D4D"}


def judge(estimate: float, ci_low: float, ci_high: float, claim: "Claim", n: int = 1) -> str:
    """Verdict on ``estimate`` with its input-clustered interval ``[ci_low, ci_high]`` against ``claim``'s range:
    ``not run: no measurement`` if no pairs (``n <= 0``) or non-finite values; ``differs`` if the interval excludes the
    range; ``inconclusive`` if it overlaps but reaches more than ``TOO_WIDE`` beyond it; ``reproduced`` if the estimate
    lies in the range or, for a value stated as one rounded number (``claim.point``, "91%"), the interval contains
    that number (a ±0.5-point range is almost never hit); else ``consistent`` (overlapping, estimate outside)."""
    import math

    if n <= 0 or not (math.isfinite(ci_low) and math.isfinite(ci_high) and math.isfinite(estimate)):
        return "not run: no measurement"
    if ci_high < claim.low or ci_low > claim.high:
        return Verdict.DIFFERS
    if ci_low < claim.low - TOO_WIDE or ci_high > claim.high + TOO_WIDE:
        return Verdict.INCONCLUSIVE
    if claim.low <= estimate <= claim.high:
        return Verdict.REPRODUCED
    return (Verdict.REPRODUCED if claim.point is not None and ci_low <= claim.point <= ci_high
            else Verdict.CONSISTENT)


def combine(verdicts) -> str:
    """One verdict for models judged separately against one range: differs, inconclusive or consistent if any is (in
    that order), reproduced if all are, else ``not run: no measurement``."""
    vs = [Verdict.of(v) for v in verdicts]
    for v in (Verdict.DIFFERS, Verdict.INCONCLUSIVE, Verdict.CONSISTENT):
        if v in vs:
            return v
    return Verdict.REPRODUCED if vs and all(v is Verdict.REPRODUCED for v in vs) else "not run: no measurement"


@dataclass(frozen=True)
class ScorecardRow:
    """A scorecard row: a claim about the models of ``families`` (narrowed by id fragments ``models``), judged
    against ``CLAIMS[band]``.  ``kind``: fraction, late, baseline, theorem, pooled (per-model rows name it as
    ``parent``) or related (shown, never judged)."""
    key: str
    short: str  # the claim's name in a sentence ("DeiT-B")
    text: str  # the claim in words
    band: Optional[str]  # key of CLAIMS (None: no paper value)
    families: tuple = ()
    variant: str = "content"
    kind: str = "fraction"
    models: tuple = ()
    parent: Optional[str] = None


_DINO_SIZES = (("s", "S", "dinov2-small"), ("b", "B", "dinov2-base"), ("l", "L", "dinov2-large"))

#: The scorecard: the paper's claims in the order the book presents them.
SCORECARD = (
    ScorecardRow("theorem", "the equality theorem",
                 "Equality in the layer bound iff some pair attaining κ(A) is mutually self-dominant",
                 None, kind="theorem"),
    ScorecardRow("baseline", "the random baseline",
                 "Random stochastic matrices (rows uniform on the simplex)",
                 "baseline", kind="baseline"),
    *(ScorecardRow(f"dinov2_{k}", f"DINOv2-{size}", f"DINOv2-{size}: essentially every input and layer",
                   "essentially_all", families=("dinov2",), models=(frag,)) for k, size, frag in _DINO_SIZES),
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
    # the paper names no benchmark: these two are this build's choice, each judged on its own (seeds pooled)
    *(ScorecardRow(f"tabular_{k}", f"FT-Transformer on {name}",
                   f"FT-Transformer on {name} (one of this build's two benchmarks; the paper names none)",
                   "tabular", families=("ft-transformer",), models=(k,))
      for k, name in (("adult", "Adult"), ("california", "California Housing"))),
    ScorecardRow("special", "with special tokens",
                 "DINOv2, RoBERTa, DistilBERT with special tokens (one range over all of them)", "special",
                 families=("dinov2", "roberta", "distilbert"), variant="with_special", kind="pooled"),
    *(ScorecardRow(f"special_dinov2_{k}", f"DINOv2-{size} with special tokens", f"↳ DINOv2-{size}", "special",
                   families=("dinov2",), variant="with_special", models=(frag,), parent="special")
      for k, size, frag in _DINO_SIZES),
    ScorecardRow("special_roberta", "RoBERTa with special tokens", "↳ RoBERTa", "special",
                 families=("roberta",), variant="with_special", parent="special"),
    ScorecardRow("special_distilbert", "DistilBERT with special tokens", "↳ DistilBERT", "special",
                 families=("distilbert",), variant="with_special", parent="special"),
    ScorecardRow("related_text", "other text encoders",
                 "Not in the paper: other trained text encoders", None,
                 families=("bert", "mpnet"), kind="related"),
)


#: Gorishniy et al. (2021), Table 2 (single models): test RMSE on California Housing, test accuracy on Adult
PUBLISHED_FT_TRANSFORMER = {"california": 0.459, "adult": 0.859}


def band(key: str) -> tuple:
    """``(low, high)`` of a claim, e.g. ``band("baseline") == (0.24, 0.30)``."""
    c = CLAIMS[key]
    return c.low, c.high


def band_label(key: str) -> str:
    """The claim's range in words for legends, e.g. ``"paper: 24–30%"``."""
    return f"paper: {CLAIMS[key].paper_value}"
