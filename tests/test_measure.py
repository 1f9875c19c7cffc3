"""dobrushin.experiments.measure: variants, restriction and inputs with too few tokens."""
from __future__ import annotations

import numpy as np
import pytest

import dobrushin as db
from dobrushin.capture.roles import keep_indices
from dobrushin.experiments.measure import measure


def _stochastic(rng, B, L, n):
    A = rng.random((B, L, n, n))
    return A / A.sum(-1, keepdims=True)


def test_measure_matches_a_direct_computation_per_variant():
    rng = np.random.default_rng(0)
    A = _stochastic(rng, 2, 3, 5)
    roles = [["cls", "content", "content", "content", "sep"], ["cls", "content", "content", "pad", "pad"]]
    df = measure(A, roles, model="m", input_ids=["a", "b"], weights="untrained")
    for b, iid in enumerate(["a", "b"]):
        for variant in ("content", "with_special"):
            keep = keep_indices(roles[b], variant)
            for layer in range(3):
                sub = A[b, layer][np.ix_(keep, keep)]
                sub = sub / sub.sum(-1, keepdims=True)
                row = df[(df.input_id == iid) & (df.variant == variant) & (df.layer == layer)].iloc[0]
                assert row.n_tokens == len(keep)
                assert row.kappa == pytest.approx(db.kappa(sub), abs=1e-12)
                assert row.holds == db.equality_holds(sub)
                assert row.trace == pytest.approx(np.trace(sub), rel=1e-6)  # n × mean A_ii, kept in float32


def test_inputs_with_fewer_than_two_kept_tokens_are_left_out():
    rng = np.random.default_rng(1)
    A = _stochastic(rng, 2, 2, 4)
    roles = [["cls", "content", "sep", "pad"], ["cls", "content", "content", "sep"]]
    df = measure(A, roles, model="m", input_ids=["one-word", "two-words"], weights="untrained")
    content = df[df.variant == "content"]
    assert set(content.input_id) == {"two-words"}  # one content token: no pair, nothing to test
    assert set(df[df.variant == "with_special"].input_id) == {"one-word", "two-words"}
    with pytest.raises(ValueError, match="two or more tokens"):
        measure(A[:1], roles[:1], model="m", input_ids=["x"], weights="untrained", variants=("content",))


@pytest.mark.parametrize("as_array", [False, True])
def test_keep_indices_names_an_unknown_role_as_a_plain_string(as_array):
    # (numpy 2 prints an element of a string array as np.str_('foo'); numpy 1.x printed 'foo' either way)
    roles = ["cls", "content", "foo", "content"]
    with pytest.raises(ValueError) as e:
        keep_indices(np.asarray(roles) if as_array else roles, "content")
    assert "unknown token role(s) ['foo']" in str(e.value)
    assert "np.str_" not in str(e.value)
    np.testing.assert_array_equal(keep_indices(np.asarray(["cls", "content", "pad", "content"]), "content"), [1, 3])
    with pytest.raises(ValueError, match="unknown variant 'all'"):
        keep_indices(["content", "content"], "all")


def test_a_stored_table_reads_back_the_same_values(tmp_path):
    """The store writes a table without the columns that follow from others (bound, slack) and reads the
    same values back, bit for bit."""
    import pandas as pd
    import pyarrow.parquet as pq

    from dobrushin.store.results import conform, write_stored

    rng = np.random.default_rng(2)
    df = measure(_stochastic(rng, 3, 4, 7), [["content"] * 7] * 3, model="m", input_ids=["a", "b", "c"],
                 weights="pretrained")
    write_stored(tmp_path / "t.parquet", df)
    assert not {"bound", "slack"} & set(pq.read_schema(tmp_path / "t.parquet").names)
    back = conform(pd.read_parquet(tmp_path / "t.parquet"))
    pd.testing.assert_frame_equal(back, df, check_exact=True)
    # a column that does not follow from the others is kept as it is
    odd = df.assign(slack=df["slack"] + 1e-3)
    write_stored(tmp_path / "odd.parquet", odd)
    assert "slack" in pq.read_schema(tmp_path / "odd.parquet").names
    pd.testing.assert_frame_equal(conform(pd.read_parquet(tmp_path / "odd.parquet")), odd, check_exact=True)
