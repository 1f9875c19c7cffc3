"""The measurement pipeline on tiny random models (HF ViT and BERT layouts; no downloads):
numbers against an independent recomputation from the models' own ``output_attentions``, the
rollout table, per-head rows, the weights-unavailable status, caching, corrupt-file recovery,
padding invariance, and the shared plots."""
from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
import textwrap

import numpy as np
import pandas as pd
import pytest
import torch
from PIL import Image

from dobrushin.data.inputs import load_images, load_texts
from dobrushin.models import LoadedModel, WeightsUnavailable
from dobrushin.experiments.pipeline import MeasureConfig, measure_model
from dobrushin.report.tables import fractions, rollout_summary
from dobrushin.store.results import HEAD_COLUMNS, ROLLOUT_COLUMNS, SCHEMA, ResultStore

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")

L, H = 2, 4  # layers and heads of the tiny models


# ---------------------------------------------------------------------------------------------
# tiny models and loaders


def _tiny_vit(seed: int):
    from transformers import ViTConfig, ViTModel

    cfg = ViTConfig(hidden_size=32, num_hidden_layers=L, num_attention_heads=H, intermediate_size=64,
                    image_size=32, patch_size=8, attn_implementation="eager")
    torch.manual_seed(seed)
    return ViTModel(cfg, add_pooling_layer=False).eval()


def _pixels(images):
    arrs = [np.asarray(im.resize((32, 32), Image.BILINEAR), dtype=np.float32) / 255.0 for im in images]
    return torch.from_numpy(np.stack(arrs)).permute(0, 3, 1, 2).contiguous() * 2 - 1


def _tiny_bert(seed: int):
    from transformers import BertConfig, BertModel

    cfg = BertConfig(vocab_size=64, hidden_size=32, num_hidden_layers=L, num_attention_heads=H,
                     intermediate_size=64, pad_token_id=0, attn_implementation="eager")
    torch.manual_seed(seed)
    return BertModel(cfg, add_pooling_layer=False).eval()


def _tokens(sentences):
    """Whitespace tokenizer: [CLS]=1, words -> 3..63, [SEP]=2, padded with 0 to the longest."""
    seqs = [[1] + [3 + sum(w.encode()) % 61 for w in s.split()][:20] + [2] for s in sentences]
    T = max(map(len, seqs))
    ids = torch.zeros(len(seqs), T, dtype=torch.long)
    mask = torch.zeros_like(ids)
    special = torch.zeros_like(ids)
    for b, s in enumerate(seqs):
        ids[b, : len(s)] = torch.tensor(s)
        mask[b, : len(s)] = 1
        special[b, 0] = special[b, len(s) - 1] = 1
    return {"input_ids": ids, "attention_mask": mask, "special_tokens_mask": special}


class TinyLoader:
    """Stands in for dobrushin.models.load_model: "pretrained" = a fixed seed (1000), untrained = ``seed``."""

    def __init__(self, kind="vision", unavailable=False):
        self.kind, self.unavailable, self.calls = kind, unavailable, []

    def model(self, pretrained: bool, seed: int = 0):
        s = 1000 if pretrained else seed
        return _tiny_vit(s) if self.kind == "vision" else _tiny_bert(s)

    def __call__(self, model_id, *, pretrained=True, seed=0, image_size=224, max_length=128):
        self.calls.append(pretrained)
        if pretrained and self.unavailable:
            raise WeightsUnavailable("tiny/model is not in the local cache (test)")
        return LoadedModel(model=self.model(pretrained, seed), preprocess=_pixels if self.kind == "vision" else _tokens,
                           kind=self.kind, source="hf", weights="pretrained" if pretrained else "untrained",
                           model_id=model_id, family="vit" if self.kind == "vision" else "bert")


@pytest.fixture
def images(tmp_path):
    d = tmp_path / "imgs"
    d.mkdir()
    rng = np.random.default_rng(0)
    for i in range(6):
        Image.fromarray(rng.integers(0, 256, (40, 48, 3), dtype=np.uint8)).save(d / f"im{i}.png")
    Image.fromarray(rng.integers(0, 256, (40, 40), dtype=np.uint8), mode="L").save(d / "grey.jpg")
    return load_images(d, seed=0)


@pytest.fixture
def sentences(tmp_path):
    f = tmp_path / "dev.tsv"
    rows = ["a fine film .", "the plot is thin but the actors carry it well .", "no .",
            "an uneven , overlong and oddly touching story about two brothers .", "fun !"]
    f.write_text("sentence\tlabel\n" + "".join(f"{r}\t1\n" for r in rows))
    return load_texts(f, seed=0)


CFG = MeasureConfig(batch_size=3, head_inputs=2, device="cpu", progress=False)


# ---------------------------------------------------------------------------------------------
# independent brute-force maths


def bf_kappa(A):
    return float((0.5 * np.abs(A[:, None, :] - A[None, :, :]).sum(-1)).max())


def bf_numbers(A):
    """(κ(A), κ(½(I+A)), ½(1+κ(A))) by definition, no shared code with dobrushin."""
    k = bf_kappa(A)
    return k, bf_kappa(0.5 * (np.eye(len(A)) + A)), 0.5 * (1 + k)


def own_attention(model, x):
    """Per-layer attention from the model's own ``output_attentions`` (float64, (L, B, H, n, n))."""
    with torch.no_grad():
        if isinstance(x, dict):
            x = {k: v for k, v in x.items() if k != "special_tokens_mask"}
            out = model(**x, output_attentions=True)
        else:
            out = model(pixel_values=x, output_attentions=True)
    return np.stack([a.double().numpy() for a in out.attentions])


def renorm(A, keep):
    S = A[np.ix_(keep, keep)]
    return S / S.sum(1, keepdims=True)


# ---------------------------------------------------------------------------------------------


def test_vision_numbers_match_independent_recomputation(tmp_path, images):
    loader = TinyLoader()
    run = measure_model("tiny/vit", images, store=ResultStore(tmp_path / "res", "nb"), loader=loader,
                        config=CFG.replace(n_untrained=4))
    t = run.table
    assert list(t.columns) == list(SCHEMA) and run.status == "ok"
    # rows: inputs x layers x variants, per weights; untrained on a prefix of the inputs
    assert len(t[t.weights == "pretrained"]) == len(images) * L * 2
    assert set(t[t.weights == "untrained"].input_id) == set(images.ids[:4])
    checked = borderline = 0
    for w, pre in (("pretrained", True), ("untrained", False)):
        ids = images.ids if pre else images.ids[:4]
        att = own_attention(loader.model(pre), _pixels(images.items(0, len(ids))))  # (L, B, H, n, n)
        avg = att.mean(2)
        n = avg.shape[-1]
        for b, iid in enumerate(ids):
            for variant, keep in (("content", np.arange(1, n)), ("with_special", np.arange(n))):
                for layer in range(L):
                    k, kf, bound = bf_numbers(renorm(avg[layer, b], keep))
                    row = t[(t.weights == w) & (t.input_id == iid) & (t.variant == variant) & (t.layer == layer)]
                    assert len(row) == 1
                    row = row.iloc[0]
                    assert row.n_tokens == len(keep)
                    np.testing.assert_allclose([row.kappa, row.kappa_factor, row.bound], [k, kf, bound], atol=1e-6)
                    if abs(bound - kf) > 1e-6:  # clear-cut cases: holds <=> the layer bound is attained
                        assert bool(row.holds) is False
                        checked += 1
                    elif abs(bound - kf) < 1e-9:
                        assert bool(row.holds) is True
                        checked += 1
                    else:
                        borderline += 1
    assert checked > 0 and borderline <= 2


def test_rollout_and_heads_match_independent_recomputation(tmp_path, images):
    loader = TinyLoader()
    run = measure_model("tiny/vit", images, store=ResultStore(tmp_path / "res", "nb"), loader=loader,
                        config=CFG.replace(weights=("pretrained",)))
    r = run.rollout
    assert list(r.columns) == list(ROLLOUT_COLUMNS) and len(r) == len(images) * 2
    att = own_attention(loader.model(True), _pixels(images.items()))
    avg = att.mean(2)
    n = avg.shape[-1]
    for b, iid in enumerate(images.ids):
        for variant, keep in (("content", np.arange(1, n)), ("with_special", np.arange(n))):
            mats = [renorm(avg[layer, b], keep) for layer in range(L)]
            R = np.eye(len(keep))
            for A in mats:  # layer 1 acts first: R = F_L ... F_1
                R = 0.5 * (np.eye(len(keep)) + A) @ R
            row = r[(r.input_id == iid) & (r.variant == variant)].iloc[0]
            np.testing.assert_allclose(row.kappa_rollout, bf_kappa(R), atol=1e-6)
            np.testing.assert_allclose(row.bound, np.prod([0.5 * (1 + bf_kappa(A)) for A in mats]), atol=1e-6)
            np.testing.assert_allclose(row.factor_product,
                                       np.prod([bf_kappa(0.5 * (np.eye(len(keep)) + A)) for A in mats]), atol=1e-6)
    # the theorem chain: kappa(R) <= prod kappa(F_l) <= prod bound_l, for every input
    assert (r.kappa_rollout <= r.factor_product + 1e-9).all() and (r.factor_product <= r.bound + 1e-9).all()
    assert (rollout_summary(r)["violations"] == 0).all()
    # heads: first head_inputs inputs, every layer and head, content tokens
    h = run.heads
    assert list(h.columns) == list(HEAD_COLUMNS)
    assert len(h) == CFG.head_inputs * L * H and set(h.input_id) == set(images.ids[: CFG.head_inputs])
    for _, row in h.sample(8, random_state=0).iterrows():
        b = images.ids.index(row.input_id)
        k, kf, bound = bf_numbers(renorm(att[int(row["layer"]), b, int(row["head"])], np.arange(1, n)))
        np.testing.assert_allclose([row.kappa, row.slack], [k, bound - kf], atol=1e-6)


def test_weights_unavailable_is_recorded_and_untrained_still_runs(tmp_path, images):
    store = ResultStore(tmp_path / "res", "nb")
    run = measure_model("tiny/vit", images, store=store, loader=TinyLoader(unavailable=True),
                        config=CFG.replace(n_untrained=3))
    assert run.status == "weights unavailable: tiny/model is not in the local cache (test)"
    assert set(run.table.weights) == {"untrained"} and run.table.input_id.nunique() == 3
    m = json.loads(store.manifest_path.read_text())["entries"]["tiny--vit"]
    assert m["status"] == run.status and m["runs"]["untrained"]["status"] == "ok"
    assert m["model"] == "tiny/vit" and m["display"] == "vit" and m["family"] == "vit" and m["device"].startswith("cpu")
    assert run.runs["pretrained"]["status"].startswith("weights unavailable: ") and run.runs["untrained"]["n_inputs"] == 3


def test_cache_reuse_corrupt_files_and_parameter_changes(tmp_path, images):
    store = ResultStore(tmp_path / "res", "nb")
    loader = TinyLoader()
    first = measure_model("tiny/vit", images, store=store, loader=loader, config=CFG)
    assert not first.cached and loader.calls == [True, False]
    main = store.path("tiny/vit")
    stamp = main.stat().st_mtime_ns
    again = measure_model("tiny/vit", images, store=store, loader=loader, config=CFG)
    assert again.cached and loader.calls == [True, False]  # nothing loaded, nothing recomputed
    assert main.stat().st_mtime_ns == stamp
    pd.testing.assert_frame_equal(again.table, first.table)
    pd.testing.assert_frame_equal(again.heads, first.heads)
    pd.testing.assert_frame_equal(again.rollout, first.rollout)
    # a corrupt main table -> recomputed, with identical numbers (same params + seed)
    main.write_bytes(main.read_bytes()[:100])
    redo = measure_model("tiny/vit", images, store=store, loader=loader, config=CFG)
    assert not redo.cached and len(loader.calls) == 4
    pd.testing.assert_frame_equal(redo.table, first.table)
    # a truncated secondary table -> recomputed too
    heads = store.path("tiny/vit", ".heads.parquet")
    heads.write_bytes(heads.read_bytes()[:-10])
    redo2 = measure_model("tiny/vit", images, store=store, loader=loader, config=CFG)
    assert not redo2.cached
    pd.testing.assert_frame_equal(redo2.heads, first.heads)
    assert measure_model("tiny/vit", images, store=store, loader=loader, config=CFG).cached
    # any parameter that changes the numbers changes the key
    n = len(loader.calls)
    assert not measure_model("tiny/vit", images.head(4), store=store, loader=loader, config=CFG).cached
    assert not measure_model("tiny/vit", images, store=store, loader=loader, config=CFG.replace(head_inputs=1)).cached
    assert not measure_model("tiny/vit", images, store=store, loader=loader, config=CFG.replace(seed=1)).cached
    assert len(loader.calls) == n + 6
    # the same file names holding another photo: other inputs, measured again
    from dobrushin.data.inputs import load_images

    folder = tmp_path / "imgs"
    measure_model("tiny/vit", images, store=store, loader=loader, config=CFG)  # the store's entry: CFG's again
    assert measure_model("tiny/vit", load_images(folder, len(images), seed=images.seed), store=store,
                         loader=loader, config=CFG).cached  # reloaded, unchanged: the same key
    Image.fromarray(np.full((40, 48, 3), 200, np.uint8)).save(folder / images.ids[0])
    swapped = load_images(folder, len(images), seed=images.seed)
    assert swapped.ids == images.ids
    assert not measure_model("tiny/vit", swapped, store=store, loader=loader, config=CFG).cached
    # the store reads back what the manifest lists
    assert len(store.tables("rollout")) > 0 and len(store.tables("heads")) > 0


def test_provenance_is_keyed_and_recorded(tmp_path, images):
    store = ResultStore(tmp_path / "res", "nb")
    loader = TinyLoader()
    prov = {"pretrained": {"source": "package", "package": "tiny", "version": "1", "sha256": "a" * 64},
            "untrained": {"source": "untrained", "seed": 0}}
    first = measure_model("tiny/vit", images, store=store, loader=loader, config=CFG, provenance=prov)
    entry = store.manifest()["entries"]["tiny--vit"]
    assert entry["provenance"] == prov and entry["params"]["provenance"] == prov
    assert entry["runs"]["pretrained"]["provenance"] == prov["pretrained"]
    assert measure_model("tiny/vit", images, store=store, loader=loader, config=CFG, provenance=prov).cached
    # equal parameters, weights from elsewhere (another package version): measured again, not reused
    moved = {**prov, "pretrained": {**prov["pretrained"], "version": "2"}}
    again = measure_model("tiny/vit", images, store=store, loader=loader, config=CFG, provenance=moved)
    assert not again.cached and store.manifest()["entries"]["tiny--vit"]["provenance"] == moved
    pd.testing.assert_frame_equal(again.table, first.table)  # same weights here, so the same numbers
    # a callable is asked per weights setting, with the seed of the untrained control
    asked = []
    measure_model("tiny/vit", images, store=store, loader=loader, config=CFG.replace(seed=4),
                  provenance=lambda mid, pretrained, seed: asked.append((mid, pretrained, seed)) or {"s": pretrained})
    assert asked == [("tiny/vit", True, 4), ("tiny/vit", False, 4)]


def test_unavailable_entry_is_rechecked(tmp_path, images):
    store = ResultStore(tmp_path / "res", "nb")
    off = TinyLoader(unavailable=True)
    measure_model("tiny/vit", images, store=store, loader=off, config=CFG)
    assert measure_model("tiny/vit", images, store=store, loader=off, config=CFG).cached
    assert off.calls == [True, False, True]  # one cheap re-check of the trained weights
    on = TinyLoader()  # the weights have become available: recompute with them
    run = measure_model("tiny/vit", images, store=store, loader=on, config=CFG)
    assert not run.cached and run.status == "ok" and set(run.table.weights) == {"pretrained", "untrained"}


def test_text_padding_does_not_change_numbers(tmp_path, sentences):
    loader = TinyLoader("text")
    one = measure_model("tiny/bert", sentences, store=ResultStore(tmp_path / "a", "nb"), loader=loader,
                        config=CFG.replace(batch_size=1))
    many = measure_model("tiny/bert", sentences, store=ResultStore(tmp_path / "b", "nb"), loader=loader,
                         config=CFG.replace(batch_size=5))
    key = ["weights", "input_id", "variant", "layer"]
    a, b = one.table.sort_values(key).reset_index(drop=True), many.table.sort_values(key).reset_index(drop=True)
    assert (a[key] == b[key]).all().all()
    np.testing.assert_allclose(a[["kappa", "kappa_factor", "bound"]], b[["kappa", "kappa_factor", "bound"]], atol=1e-6)
    # content tokens are the words; with_special adds [CLS] and [SEP] and never a pad token
    words = {iid: len(s.split()) for iid, s in zip(sentences.ids, sentences.items())}
    for _, row in b.iterrows():
        assert row.n_tokens == words[row.input_id] + (2 if row.variant == "with_special" else 0)
    # the equality test on each sentence agrees with the definition from the model's own attention
    att = own_attention(loader.model(True), _tokens([sentences[0]]))
    A = renorm(att[1, 0].mean(0), np.arange(1, words[sentences.ids[0]] + 1))
    r = b[(b.weights == "pretrained") & (b.input_id == sentences.ids[0]) & (b.variant == "content") & (b.layer == 1)]
    np.testing.assert_allclose(r.kappa.iloc[0], bf_kappa(A), atol=1e-6)


def test_bad_arguments(tmp_path, images, sentences):
    store = ResultStore(tmp_path / "res", "nb")
    with pytest.raises(ValueError, match="weights"):
        MeasureConfig(weights=("trained",))
    with pytest.raises(ValueError, match="batch_size"):
        CFG.replace(batch_size=0)
    with pytest.raises(ValueError, match="n_untrained"):
        MeasureConfig(n_untrained=0)
    with pytest.raises(ValueError, match="tol"):
        MeasureConfig(tol=-1.0)
    with pytest.raises(ValueError, match="config"):
        measure_model("tiny/vit", images, store=store, loader=TinyLoader(), config={"batch_size": 3})
    with pytest.raises(ValueError, match="text model but the inputs are images"):
        measure_model("tiny/bert", images, store=store, loader=TinyLoader("text"), config=CFG)
    with pytest.raises(ValueError, match="device"):
        measure_model("tiny/vit", images, store=store, loader=TinyLoader(), config=CFG.replace(device="nonsense"))


def test_fractions_and_plots(tmp_path, images):
    import matplotlib

    matplotlib.use("Agg")
    from scipy.stats import binomtest

    from dobrushin.report import plots

    run = measure_model("tiny/vit", images, store=ResultStore(tmp_path / "res", "nb"), loader=TinyLoader(), config=CFG)
    f = fractions(run.table)
    for _, row in f.iterrows():
        g = run.table[(run.table.weights == row.weights) & (run.table.variant == row.variant)]
        assert (row.k, row.n) == (int(g.holds.sum()), len(g))
        ci = binomtest(int(row.k), int(row.n)).proportion_ci(method="wilson")  # independent of dobrushin
        assert (row.fraction, row.ci_low, row.ci_high) == pytest.approx((row.k / row.n, ci.low, ci.high), abs=1e-12)
    lf = plots.layer_fractions(run.table)
    assert len(lf) == 2 * 2 * L and (lf.n == len(images)).all()
    figs = {
        "profile": plots.fraction_by_layer(run.table),
        "slack": plots.slack_by_layer(run.table),
        "rollout": plots.rollout_scatter(run.rollout),
    }
    for what, fig in figs.items():
        assert any(ax.get_visible() for ax in fig.axes)
        paths = plots.save_figure(fig, "nb", what, tmp_path / "res")
        assert [p.name for p in paths] == [f"nb-{what}.png", f"nb-{what}.svg"]
        assert all(p.stat().st_size > 1000 for p in paths)
    with pytest.raises(ValueError, match="not in the table"):
        plots.fraction_by_layer(run.table, models=["other/model"])
    with pytest.raises(ValueError, match="lacks columns"):
        plots.rollout_scatter(run.table)


@pytest.mark.skipif(not sys.platform.startswith("linux") or platform.libc_ver()[0] != "glibc", reason="glibc only")
def test_steady_heap_keeps_a_freed_block_of_a_few_megabytes_in_the_heap():
    """Fixing glibc's mmap threshold stops it moving the trim threshold, which then stays where it was: at
    128 KiB in a process that has freed no large block yet, where a 12 MB block freed at the top of the
    heap was given back to the system (and faulted in again, page by page, at its next allocation).
    steady_heap sets the trim threshold as well (twice the mmap threshold, glibc's own rule): in a fresh
    process the heap (mallinfo2's ``arena``) keeps the block after it is freed."""
    code = textwrap.dedent("""
        import ctypes
        class MallInfo2(ctypes.Structure):
            _fields_ = [(f, ctypes.c_size_t) for f in ("arena", "ordblks", "smblks", "hblks", "hblkhd",
                                                         "usmblks", "fsmblks", "uordblks", "fordblks", "keepcost")]
        libc = ctypes.CDLL(None)
        if not hasattr(libc, "mallinfo2"):
            print("skip")
            raise SystemExit
        libc.mallinfo2.restype = MallInfo2
        libc.malloc.restype, libc.free.argtypes = ctypes.c_void_p, [ctypes.c_void_p]
        from dobrushin.experiments.environment import MMAP_THRESHOLD, steady_heap
        assert steady_heap()
        size = 12 << 20
        assert size < MMAP_THRESHOLD  # from the heap, not a mapping of its own
        p = libc.malloc(size)
        held = libc.mallinfo2().arena
        libc.free(p)
        print(held, libc.mallinfo2().arena)
    """)
    env = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_")}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode == 0, out.stderr
    if out.stdout.split() == ["skip"]:
        pytest.skip("glibc without mallinfo2")
    held, after = map(int, out.stdout.split())
    assert after == held  # not trimmed


@pytest.mark.parametrize("var, value, tuned", [("MALLOC_MMAP_THRESHOLD_", "1048576", True),
                                               ("MALLOC_TRIM_THRESHOLD_", "0", True),
                                               ("GLIBC_TUNABLES", "glibc.malloc.trim_threshold=0", True),
                                               ("GLIBC_TUNABLES", "glibc.pthread.rseq=0", False)])
def test_steady_heap_leaves_thresholds_the_user_set_alone(var, value, tuned, monkeypatch):
    from dobrushin.experiments import environment

    for v in ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_", "GLIBC_TUNABLES"):
        monkeypatch.delenv(v, raising=False)
    assert not environment._user_tuned_malloc()
    monkeypatch.setenv(var, value)
    assert environment._user_tuned_malloc() is tuned
    if tuned:  # nothing is set (in a fresh state of the once-per-process flag)
        monkeypatch.setattr(environment, "_HEAP_SET", None)
        assert environment.steady_heap() is False


def test_versions_are_read_once_per_process_and_match_the_metadata(monkeypatch):
    """versions() and key_versions() read each package's metadata once per process: a second call gives the
    same versions without reading it again (a metadata reader that fails is not called), each call hands
    back a dict of its own, and the versions are those importlib.metadata reports."""
    import importlib.metadata as md

    from dobrushin.experiments.environment import KEY_PACKAGES, NUMBER_PACKAGES, key_versions, versions

    first, keys = versions(), key_versions()
    for pkg in NUMBER_PACKAGES:
        try:
            want = md.version(pkg)
        except md.PackageNotFoundError:
            want = "not installed"
        assert first[pkg] == want
    assert keys == {p: md.version(p).split("+")[0] for p in KEY_PACKAGES}

    def fail(name):
        raise AssertionError(f"metadata of {name} read again")

    monkeypatch.setattr(md, "version", fail)
    again = versions()
    assert again == first and key_versions() == keys
    again["transformers"] = "edited"  # a cached version: the next call's dict is its own
    assert versions()["transformers"] == first["transformers"]


def test_a_package_not_found_is_looked_up_again(monkeypatch):
    """A package missing at one call is recorded once it is installed (a version found is cached, an absence
    is not): the version reader is asked again, and its answer is what versions() reports."""
    import importlib.metadata as md

    from dobrushin.experiments.environment import versions

    name = "dobrushin-test-package-installed-later"
    real = md.version
    assert versions((name,))[name] == "not installed"
    monkeypatch.setattr(md, "version", lambda p: "9.9.9" if p == name else real(p))
    assert versions((name,))[name] == "9.9.9"
