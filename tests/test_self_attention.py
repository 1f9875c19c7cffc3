"""dobrushin.report.self_attention: the diagonal A_ii per layer against an independent computation from the
model's own output_attentions (numpy), the relative position bias at distance 0, and the chapter note."""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
import torch

transformers = pytest.importorskip("transformers")

from dobrushin.report.self_attention import diagonal_profile, relative_bias_profile, self_attention_note  # noqa: E402

LENGTHS = [7, 4, 9]  # tokens per sentence, <s> and </s> included


def _tiny(kind: str):
    torch.manual_seed(0)
    common = dict(vocab_size=50, hidden_size=32, num_hidden_layers=3, num_attention_heads=4, intermediate_size=64,
                  attn_implementation="eager")
    if kind == "mpnet":
        cfg = transformers.MPNetConfig(pad_token_id=1, bos_token_id=0, eos_token_id=2, **common)
        model = transformers.MPNetModel(cfg)
    else:
        cfg = transformers.BertConfig(pad_token_id=0, **common)
        model = transformers.BertModel(cfg)
    model.eval()
    cls, sep, pad = (0, 2, 1) if kind == "mpnet" else (3, 4, 0)

    def preprocess(texts):  # "text" k → a sentence of LENGTHS[k] tokens (deterministic ids)
        ns = [LENGTHS[int(t)] for t in texts]
        n = max(ns)
        ids = torch.full((len(ns), n), pad)
        for b, (t, m) in enumerate(zip(texts, ns)):
            ids[b, :m] = torch.tensor([cls] + [10 + (7 * int(t) + 3 * i) % 37 for i in range(m - 2)] + [sep])
        mask = (torch.arange(n)[None] < torch.tensor(ns)[:, None]).long()
        special = ((ids == cls) | (ids == sep) | (mask == 0)).long()
        return {"input_ids": ids, "attention_mask": mask, "special_tokens_mask": special}

    return SimpleNamespace(model=model, preprocess=preprocess)


def _reference(lm, texts, renormalise=True):
    """Independently: the model's output_attentions, averaged over heads in numpy; content = 1..n-2, its
    block's rows renormalised to sum to 1 (or the full rows)."""
    enc = lm.preprocess(texts)
    with torch.no_grad():
        att = lm.model(input_ids=enc["input_ids"], attention_mask=enc["attention_mask"],
                       output_attentions=True).attentions
    A = np.stack([a.double().numpy() for a in att], 1).mean(2)  # (B, L, n, n)
    diag, sup = [], []
    for b, t in enumerate(texts):
        n = LENGTHS[int(t)]
        content = range(1, n - 1)
        if renormalise:
            A = A.copy()
            A[b, :, 1:n - 1, :] /= A[b, :, 1:n - 1, 1:n - 1].sum(-1, keepdims=True)
        diag.append(np.stack([[A[b, l, i, i] for i in content] for l in range(A.shape[1])]))
        sup.append(np.stack([[A[b, l, i, i + 1] for i in range(1, n - 2)] for l in range(A.shape[1])]))
    return np.concatenate(diag, 1).mean(1), np.concatenate(sup, 1).mean(1)


@pytest.mark.parametrize("kind", ["mpnet", "bert"])
@pytest.mark.parametrize("batch_size", [1, 2, 8])
@pytest.mark.parametrize("renormalise", [True, False])
def test_diagonal_profile_matches_output_attentions(kind, batch_size, renormalise):
    lm = _tiny(kind)
    texts = ["0", "1", "2"]
    prof = diagonal_profile(lm, texts, batch_size=batch_size, renormalise=renormalise)
    d, s = _reference(lm, texts, renormalise)
    assert list(prof["layer"]) == [0, 1, 2]
    np.testing.assert_allclose(prof["diag"], d, rtol=0, atol=1e-6)
    np.testing.assert_allclose(prof["superdiag"], s, rtol=0, atol=1e-6)
    assert int(prof["n_tokens"].iloc[0]) == sum(n - 2 for n in LENGTHS)


def test_a_negative_distance_zero_bias_removes_self_attention():
    lm = _tiny("mpnet")
    before = diagonal_profile(lm, ["0", "2"])
    w = lm.model.encoder.relative_attention_bias.weight
    with torch.no_grad():
        w[0] = -30.0
    b = relative_bias_profile(lm.model)
    assert b["bucket0"] == pytest.approx(-30.0) and (b["buckets"], b["heads"]) == tuple(w.shape)
    assert b["others"] == pytest.approx(float(w[1:].detach().double().mean()))
    after = diagonal_profile(lm, ["0", "2"])
    assert float(after["diag"].max()) < 1e-9 < float(before["diag"].min())
    np.testing.assert_allclose(after["diag"], _reference(lm, ["0", "2"])[0], atol=1e-9)


def test_models_without_a_relative_bias_give_none():
    assert relative_bias_profile(_tiny("bert").model) is None


def test_bad_inputs_are_named():
    lm = _tiny("bert")
    with pytest.raises(ValueError, match="non-empty list of strings"):
        diagonal_profile(lm, [])
    with pytest.raises(ValueError, match="batch_size"):
        diagonal_profile(lm, ["0"], batch_size=0)


def _summ(f_subject):
    return pd.DataFrame([
        {"model": "sub", "weights": "pretrained", "variant": "content", "k": round(f_subject * 40), "n": 40,
         "fraction": f_subject, "ci_low": 0.0, "ci_high": 0.1},
        {"model": "sub", "weights": "untrained", "variant": "content", "k": 8, "n": 40, "fraction": 0.2,
         "ci_low": 0.1, "ci_high": 0.3},
        {"model": "ref", "weights": "pretrained", "variant": "content", "k": 38, "n": 40, "fraction": 0.95,
         "ci_low": 0.8, "ci_high": 0.99}])


def test_note_only_when_the_fraction_is_low_and_numbers_are_computed():
    models = {"sub": _tiny("mpnet"), "ref": _tiny("bert")}
    with torch.no_grad():
        models["sub"].model.encoder.relative_attention_bias.weight[0] = -7.0
    loader = lambda m, **kw: models[m]  # noqa: E731
    assert self_attention_note(_summ(0.5), ["0"], subject="sub", reference="ref", loader=loader) == (None, None)
    assert self_attention_note(_summ(0.0), ["0"], subject="absent", reference="ref", loader=loader) == (None, None)
    text, table = self_attention_note(_summ(0.0), ["0", "1", "2"], subject="sub", reference="ref", loader=loader)
    d = diagonal_profile(models["sub"], ["0", "1", "2"])["diag"]
    assert "**0 of 40**" in text and "20.0%" in text and "95.0%" in text
    assert f"is {d.min():.2g}" in text and f"{d.max():.2g} per layer" in text
    b = relative_bias_profile(models["sub"].model)
    assert f"it is {b['bucket0']:.1f} on average over the 4 heads, against {b['others']:.1f}".replace("-", "−") in text
    assert "−7.0" in text and "two-stream" in text  # an MPNet: its own explanation
    full = diagonal_profile(models["sub"], ["0", "1", "2"], renormalise=False)["diag"]
    assert (d > full).all()  # renormalising the content block raises the diagonal
    assert list(table.columns) == ["model", "layer", "self", "next"]
    assert list(table["model"]) == ["sub"] * 3 + ["ref"] * 3 and list(table["layer"]) == [1, 2, 3] * 2
    sup = diagonal_profile(models["sub"], ["0", "1", "2"])["superdiag"]
    assert ("less in every layer than" in text) == bool((d < sup).all())
    np.testing.assert_allclose(table["self"][:3], d)
    np.testing.assert_allclose(table["self"][3:], diagonal_profile(models["ref"], ["0", "1", "2"])["diag"])


def test_a_packaged_proxy_is_marked_once_whether_or_not_the_chapter_marked_it():
    from types import SimpleNamespace

    from dobrushin.report import self_attention as SA
    from dobrushin.report.names import mark_proxies

    mid = "sentence-transformers/all-mpnet-base-v2"
    lm = SimpleNamespace(provenance={"source": "package", "proxy_for": mid})
    assert SA._labelled(mid, lm) == "all-mpnet-base-v2 (packaged proxy)"
    mark_proxies([mid])  # as FamilyChapter.measure does (cleared after the test by conftest)
    assert SA._labelled(mid, lm) == "all-mpnet-base-v2 (packaged proxy)"
    assert SA._labelled(mid, SimpleNamespace(provenance={"source": "hub"})) == "all-mpnet-base-v2 (packaged proxy)"
    mark_proxies(())
    assert SA._labelled(mid, SimpleNamespace(provenance={"source": "hub"})) == "all-mpnet-base-v2"
