"""The one set of scalar validators (dobrushin.math.validation): every layer checks counts, sizes, seeds
and choices with them, so a rule has one implementation and one wording."""
import numpy as np
import pytest

from dobrushin.math.validation import check_choices, check_integer, check_positive


@pytest.mark.parametrize("value, want", [(3, 3), (np.int64(3), 3), (np.uint8(0), 0)])
def test_integers_come_back_as_python_ints(value, want):
    out = check_integer("k", value, 0)
    assert out == want and type(out) is int


@pytest.mark.parametrize("value", [True, 2.0, "2", None, [2]])
def test_anything_else_is_not_an_integer(value):
    with pytest.raises(ValueError, match=r"^k must be an integer, got "):
        check_integer("k", value)


def test_bounds_and_none():
    with pytest.raises(ValueError, match=r"^n must be an integer >= 2, got 1$"):
        check_integer("n", 1, 2)
    assert check_integer("n", 2, 2) == 2 and check_integer("n", -5) == -5
    assert check_integer("n_untrained", None, 1, optional=True) is None
    with pytest.raises(ValueError, match=r"^n_untrained must be an integer >= 1 or None, got 0$"):
        check_integer("n_untrained", 0, 1, optional=True)


def test_positive_numbers():
    assert check_positive("alpha", "0.5") == 0.5 and check_positive("alpha", np.float32(2)) == 2.0
    for bad in (0, -1, float("inf"), float("nan"), "x", None, True):
        with pytest.raises(ValueError, match=r"^alpha must be a finite positive number, got "):
            check_positive("alpha", bad)


def test_choices():
    allowed = ("pretrained", "untrained")
    assert check_choices("weights", "untrained", allowed) == ("untrained",)
    assert check_choices("weights", ["pretrained", "untrained"], allowed) == allowed
    for bad in ((), ["trained"], 3):
        with pytest.raises(ValueError, match=r"^weights must be a non-empty subset of \('pretrained', 'untrained'\)"):
            check_choices("weights", bad, allowed)


def test_every_layer_uses_them():
    """The layers that took counts, seeds and choices call the shared validators (messages as here)."""
    from dobrushin.data.inputs import select
    from dobrushin.experiments.pipeline import MeasureConfig
    from dobrushin.models import load_model
    from dobrushin.random import ensembles

    with pytest.raises(ValueError, match=r"^batch_size must be an integer >= 1, got 0$"):
        MeasureConfig(batch_size=0)
    with pytest.raises(ValueError, match=r"^weights must be a non-empty subset"):
        MeasureConfig(weights=("trained",))
    with pytest.raises(ValueError, match=r"^the number of inputs must be an integer >= 1 or None, got 0$"):
        select(["a", "b"], 0, 0)
    with pytest.raises(ValueError, match=r"^seed must be an integer >= 0, got -1$"):
        select(["a", "b"], 1, -1)
    with pytest.raises(ValueError, match=r"^n must be an integer >= 1, got 0$"):
        ensembles.block_size(0)
    with pytest.raises(ValueError, match=r"^image_size must be an integer >= 1, got 0$"):
        load_model("a/b", image_size=0)
