"""Falkon's factors, preconditioner, blockwise products and CG step against dense NumPy."""

import numpy as np
import pytest

from distsketch.errors import ConfigError
from distsketch.ops import falkon as F
from distsketch.ops.kernels import pairwise_kernel

RNG = np.random.default_rng(0)
X = RNG.normal(size=(230, 3))
C = X[:40]
GAMMA = 0.4


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_factors_are_falkons_choleskys(dtype):
    K = pairwise_kernel(C, C, "rbf", gamma=GAMMA)
    lam, M = 1e-3, C.shape[0]
    T, A = F.falkon_factors(F.kernel_matrix(C, "rbf", {"gamma": GAMMA}, dtype), lam, dtype)
    assert T.dtype == A.dtype == np.dtype(dtype)
    assert np.allclose(T, np.triu(T)) and np.allclose(A, np.triu(A))
    eps = F.FACTOR_JITTER[np.dtype(dtype)] * M
    # backward error of a Cholesky: a few units of the dtype's rounding times ‖K‖ ≤ M
    tol = 50 * M * np.finfo(dtype).eps
    T64, A64 = T.astype(np.float64), A.astype(np.float64)
    np.testing.assert_allclose(T64.T @ T64, K + eps * np.eye(M), atol=tol)
    np.testing.assert_allclose(A64.T @ A64, T64 @ T64.T / M + lam * np.eye(M), atol=tol)


def test_the_preconditioner_is_the_inverse_of_falkons_P():
    lam, n = 1e-2, 1000
    M = C.shape[0]
    T, A = F.falkon_factors(F.kernel_matrix(C, "rbf", {"gamma": GAMMA}), lam)
    P = n * T.T @ (A.T @ A) @ T
    K = T.T @ T  # K_MM with its jitter
    np.testing.assert_allclose(P, n / M * K @ K + lam * n * K, rtol=1e-9, atol=1e-9 * n)
    R = RNG.normal(size=(M, 2))
    np.testing.assert_allclose(P @ F.falkon_apply(T, A, R, n), R, rtol=1e-6, atol=1e-6)


def test_a_failed_cholesky_raises_and_the_jitter_is_raised_until_it_works():
    twins = np.vstack([C[:5], C[:5] + 1e-9])  # near-duplicate centres: K_MM singular
    K = F.kernel_matrix(twins, "rbf", {"gamma": GAMMA}, np.float32)
    with pytest.raises(F.CholeskyFailed, match="not positive definite"):
        F.falkon_factors(K, 1e-3, np.float32, jitter=0.0)
    T, A, jitter = F.falkon_preconditioner(twins, "rbf", {"gamma": GAMMA}, 1e-3, np.float32)
    assert jitter >= F.FACTOR_JITTER[np.dtype(np.float32)] and np.isfinite(T).all() and np.isfinite(A).all()
    with pytest.raises(ConfigError, match="dtype must be float32 or float64"):
        F.falkon_factors(K, 1e-3, np.float16)


def test_kernel_matrix_is_the_kernel_in_the_asked_dtype():
    K = F.kernel_matrix(C, "laplacian", {"gamma": GAMMA}, np.float32, tile_rows=7)
    assert K.dtype == np.float32 and K.flags.f_contiguous
    np.testing.assert_allclose(K, pairwise_kernel(C, C, "laplacian", gamma=GAMMA), rtol=1e-6)


@pytest.mark.parametrize("kernel,params", [("rbf", {"gamma": GAMMA}),
                                           ("laplacian", {"gamma": GAMMA})])
@pytest.mark.parametrize("tile_rows", [1, 17, 1000])
def test_gram_times_is_the_dense_product(kernel, params, tile_rows):
    Knm = pairwise_kernel(X, C, kernel, **params)
    V, Y = RNG.normal(size=(C.shape[0], 3)), RNG.normal(size=(X.shape[0], 2))
    hv, b = F.gram_times(X, C, V, Y, kernel, params, tile_rows)
    np.testing.assert_allclose(hv, Knm.T @ (Knm @ V), rtol=1e-12, atol=1e-10)
    np.testing.assert_allclose(b, Knm.T @ Y, rtol=1e-12, atol=1e-11)
    assert F.gram_times(X, C, None, Y, kernel, params, tile_rows)[0] is None


def test_cg_steps_solve_the_system_and_resume_from_any_state():
    Knm = pairwise_kernel(X, C, "rbf", gamma=GAMMA)
    lam, n = 1e-3, X.shape[0]
    K = pairwise_kernel(C, C, "rbf", gamma=GAMMA)
    H = Knm.T @ Knm + lam * n * K
    b = Knm.T @ RNG.normal(size=(n, 2))
    T, A = F.falkon_factors(K.copy(), lam)

    def prec(R):
        return F.falkon_apply(T, A, R, n)

    cg = F.FalkonCG.start(b, prec, 1e-12)
    while not cg.done and cg.n_iter < 200:
        cg.step(H @ cg.p, prec, 1e-12, "test")
        if cg.n_iter == 3:  # a copy of the state goes on as the original does
            twin = F.FalkonCG(cg.x.copy(), cg.r.copy(), cg.p.copy(), cg.rz.copy(), cg.scale.copy(),
                            cg.active.copy(), cg.n_iter, list(cg.residuals))
    assert cg.done and cg.n_iter < 60  # the preconditioner makes it fast
    exact = np.linalg.solve(H, b)
    # ‖x − x*‖/‖x*‖ ≤ κ(H) ‖r‖/‖b‖ (recurrence residual; plus its drift from rounding)
    bound = np.linalg.cond(H) * (1e-12 + 1e-13)
    assert np.linalg.norm(cg.x - exact) / np.linalg.norm(exact) <= bound
    while not twin.done:
        twin.step(H @ twin.p, prec, 1e-12, "test")
    np.testing.assert_allclose(twin.x, cg.x, rtol=1e-13, atol=0)
    assert twin.n_iter == cg.n_iter


def test_a_negative_curvature_is_refused():
    b = np.ones((4, 1))
    cg = F.FalkonCG.start(b, lambda R: R, 1e-8)
    with pytest.raises(ConfigError, match="not positive definite"):
        cg.step(-cg.p, lambda R: R, 1e-8, "test")


def test_memory_and_flop_formulas():
    M, d, t = 30000, 28, 2
    plan = F.falkon_memory(M, d, t, 4)
    assert plan["factors"] == 2 * M * M * 4
    assert plan["tile_rows"] == F.tile_rows_for(M) == 32 * 2**20 // (8 * M)
    assert plan["driver"] == plan["factors"] + 8 * M * (d + 6 * t) + 8 * plan["tile_rows"] * M
    T, A = F.falkon_factors(F.kernel_matrix(C, "rbf", {"gamma": GAMMA}), 1e-3)
    assert T.nbytes + A.nbytes == F.falkon_memory(C.shape[0], 3, 1, 8)["factors"]
    f = F.falkon_pass_flops(10**7, M, d, t)
    assert f == {"gemm": 2 * 10**7 * M * (d + 2), "exp": 10**7 * M, "apply": 4 * 10**7 * M * t}


def test_one_block_stays_within_its_planned_memory():
    import tracemalloc

    M, d, b = 300, 8, 5000
    block = RNG.normal(size=(b, d)).astype(np.float32)  # as a float32 store gives it
    centers, V = RNG.normal(size=(M, d)), RNG.normal(size=(M, 2))
    plan = F.falkon_memory(M, d, 2, 8)
    tracemalloc.start()
    F.gram_times(np.asarray(block, dtype=np.float64), centers, V, None, "rbf", {"gamma": 0.1},
                 plan["tile_rows"])
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    # the block itself was allocated before: the plan counts it as well
    assert peak + block.nbytes <= plan["task_fixed"] + b * plan["task_per_row"]
    assert peak > 8 * plan["tile_rows"] * M  # the sub-tile is really made (not a vacuous bound)
