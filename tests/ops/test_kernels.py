import numpy as np
import pytest
from sklearn.metrics.pairwise import laplacian_kernel, polynomial_kernel, rbf_kernel

from distsketch.errors import ConfigError
from distsketch.ops.kernels import kernel_diagonal, pairwise_kernel, resolve_kernel_params

rng = np.random.default_rng(0)
X = rng.normal(size=(40, 5))
Y = rng.normal(size=(30, 5))


def test_against_scikit_learn():
    np.testing.assert_allclose(pairwise_kernel(X, Y, "rbf", gamma=0.3), rbf_kernel(X, Y, gamma=0.3),
                               rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(pairwise_kernel(X, Y, "laplacian", gamma=0.2),
                               laplacian_kernel(X, Y, gamma=0.2), rtol=1e-12)
    np.testing.assert_allclose(pairwise_kernel(X, Y, "polynomial", gamma=0.5, coef0=1.0, degree=3),
                               polynomial_kernel(X, Y, degree=3, gamma=0.5, coef0=1.0), rtol=1e-12)
    C = pairwise_kernel(X, Y, "cauchy", gamma=0.4)
    D = ((X[:, None, :] - Y[None, :, :]) ** 2).sum(-1)
    np.testing.assert_allclose(C, 1.0 / (1.0 + 0.4 * D), rtol=1e-12)


@pytest.mark.parametrize("name", ["arccos0", "arccos1"])
def test_arccos_kernels_match_their_integral_definition(name):
    # Cho & Saul: k_n(x, y) = 2 E_w[Θ(w·x) Θ(w·y) (w·x)^n (w·y)^n], w ~ N(0, I)
    x, y = X[:3], Y[:3]
    W = np.random.default_rng(1).normal(size=(400_000, 5))
    a, b = x @ W.T, y @ W.T
    n = 0 if name == "arccos0" else 1
    f = lambda t: (t > 0) * (t**n if n else 1.0)  # noqa: E731
    samples = 2 * f(a)[:, None, :] * f(b)[None, :, :]
    mc = samples.mean(-1)
    se = samples.std(-1) / np.sqrt(W.shape[0])
    exact = pairwise_kernel(x, y, name)
    assert np.all(np.abs(mc - exact) < 5 * se + 1e-12)


def test_ntk_is_t_k0_plus_k1():
    t = np.clip(X @ Y.T / np.outer(np.linalg.norm(X, axis=1), np.linalg.norm(Y, axis=1)), -1, 1)
    n = np.outer(np.linalg.norm(X, axis=1), np.linalg.norm(Y, axis=1))
    expected = t * pairwise_kernel(X, Y, "arccos0") * n + pairwise_kernel(X, Y, "arccos1")
    np.testing.assert_allclose(pairwise_kernel(X, Y, "ntk"), expected, rtol=1e-12)


@pytest.mark.parametrize("name,params", [
    ("rbf", {"gamma": 0.5}), ("laplacian", {"gamma": 0.5}), ("cauchy", {"gamma": 0.5}),
    ("polynomial", {"gamma": 0.5, "coef0": 2.0, "degree": 2}), ("linear", {}),
    ("arccos0", {}), ("arccos1", {}), ("ntk", {}),
])
def test_diagonal_matches_full_matrix(name, params):
    # arccos near 1 amplifies rounding of cos(θ) = 1 - O(eps) to O(sqrt(eps)) in the full matrix
    np.testing.assert_allclose(kernel_diagonal(X, name, **params),
                               np.diag(pairwise_kernel(X, X, name, **params)), rtol=1e-7, atol=1e-10)


def test_parameter_errors():
    with pytest.raises(ConfigError, match="unknown kernel"):
        resolve_kernel_params("rbff", 3)
    with pytest.raises(ConfigError, match="gamma must be > 0"):
        resolve_kernel_params("rbf", 3, gamma=-1.0)
    assert resolve_kernel_params("gaussian", 4)[1] == {"gamma": 0.25}


def test_kernel_name_sets():
    from distsketch.ops.kernels import (
        BOUNDED_KERNELS,
        KERNEL_ALIASES,
        KERNEL_NAMES,
        KERNELS,
        PROJECTABLE_KERNELS,
        SHIFT_INVARIANT_NAMES,
    )

    every = {"rbf", "laplacian", "cauchy", "polynomial", "linear", "arccos0", "arccos1", "ntk"}
    assert set(KERNELS) == every
    assert KERNEL_NAMES == every | {"gaussian", "poly"}
    assert SHIFT_INVARIANT_NAMES == {"rbf", "gaussian", "laplacian", "cauchy"}
    assert BOUNDED_KERNELS == {"rbf", "gaussian", "laplacian", "cauchy", "arccos0"}
    assert PROJECTABLE_KERNELS == KERNEL_NAMES - {"laplacian"}
    # every accepted name resolves to a kernel
    assert {KERNEL_ALIASES.get(k, k) for k in KERNEL_NAMES} == every


def test_estimators_accept_the_shared_kernel_names():
    from distsketch.estimators.features.rff import RandomFourierFeatures
    from distsketch.estimators.nystrom.features import NystromFeatures, NystromKernelPCA
    from distsketch.estimators.nystrom.meka import MEKA
    from distsketch.ops.kernels import KERNEL_NAMES, SHIFT_INVARIANT_NAMES

    for cls in (MEKA, NystromKernelPCA):
        assert cls._parameter_constraints["kernel"][0].values == KERNEL_NAMES
    assert NystromFeatures._parameter_constraints["kernel"][0].values == KERNEL_NAMES | {"precomputed"}
    assert RandomFourierFeatures._parameter_constraints["kernel"][0].values == SHIFT_INVARIANT_NAMES
