"""The rollout map and per-layer slack of dobrushin.experiments.rollout_map against plain numpy."""
import numpy as np
import pytest

from dobrushin.experiments.rollout_map import cls_rollout_map, layer_slack, to_display


def _stochastic(rng, L, n):
    A = rng.random((L, n, n)) ** 3
    return A / A.sum(-1, keepdims=True)


def _kappa(M):  # Dobrushin coefficient, by definition: max over row pairs of half the L1 distance
    n = M.shape[0]
    return max(0.5 * np.abs(M[i] - M[j]).sum() for i in range(n) for j in range(n))


def test_cls_map_is_the_cls_row_of_the_product_of_half_lazy_factors():
    rng = np.random.default_rng(3)
    roles = ["cls"] + ["content"] * 9
    A = _stochastic(rng, 4, 10)
    R = np.eye(10)
    for layer in range(4):  # layer 1 acts first: R = F_4 F_3 F_2 F_1
        R = 0.5 * (np.eye(10) + A[layer]) @ R
    got = cls_rollout_map(A, roles)
    assert got.shape == (3, 3)
    np.testing.assert_allclose(got.ravel(), R[0, 1:], rtol=0, atol=1e-12)
    assert 0 < got.sum() < 1  # the CLS column's share is left out


def test_cls_map_finds_cls_anywhere_and_rejects_bad_grids():
    rng = np.random.default_rng(4)
    A = _stochastic(rng, 2, 5)
    roles = ["content", "content", "cls", "content", "content"]
    R = 0.5 * (np.eye(5) + A[1]) @ (0.5 * (np.eye(5) + A[0]))
    np.testing.assert_allclose(cls_rollout_map(A, roles).ravel(), R[2, [0, 1, 3, 4]], atol=1e-12)
    with pytest.raises(ValueError, match="square patch grid"):
        cls_rollout_map(_stochastic(rng, 2, 4), ["cls", "content", "content", "content"])
    with pytest.raises(ValueError, match="no CLS"):
        cls_rollout_map(_stochastic(rng, 2, 4), ["content"] * 4)


def test_layer_slack_matches_the_definition_on_restricted_renormalised_matrices():
    rng = np.random.default_rng(5)
    roles = ["cls"] + ["content"] * 6
    A = _stochastic(rng, 3, 7)
    got = layer_slack(A, roles, "content")
    want = []
    for layer in range(3):
        B = A[layer][1:, 1:]
        B = B / B.sum(1, keepdims=True)
        want.append(0.5 * (1 + _kappa(B)) - _kappa(0.5 * (np.eye(6) + B)))
    np.testing.assert_allclose(got, want, atol=1e-12)
    assert (got >= -1e-12).all()


def test_layer_slack_is_zero_in_the_equality_case():
    # a diagonally dominant matrix: every pair is mutually self-dominant, so equality holds
    B = np.array([[6, 1, 1], [1, 6, 1], [1, 1, 6]]) / 8
    A = np.zeros((1, 4, 4))
    A[0, 0] = 0.25
    A[0, 1:, 1:] = B * 0.9
    A[0, 1:, 0] = 0.1
    assert abs(layer_slack(A, ["cls", "content", "content", "content"])[0]) < 1e-12


def test_to_display_inverts_the_normalisation():
    rng = np.random.default_rng(6)
    img = rng.random((2, 5, 4, 3))
    mean, std = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)
    x = ((img - np.array(mean)) / np.array(std)).transpose(0, 3, 1, 2)
    np.testing.assert_allclose(to_display(x, mean, std), img, atol=1e-12)
