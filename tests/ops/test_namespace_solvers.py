"""Per-block kernels of fd, linalg, meka, nystrom, cg and sketch_solve on array-api-strict arrays.

Every public function runs on ``array_api_strict`` arrays placed on a
non-CPU device of that library, where any hidden conversion to NumPy raises
and any allocation on the wrong device fails when it meets the input.  Its
results are compared with the NumPy path and must be in the input's
namespace and on its device (or on the host where the function says so).

Tolerances: both paths run in float64 on the same machine; the strict path
reaches LAPACK through different calls (an SVD instead of a Gram
eigendecomposition in Frequent Directions, general instead of triangular
solves), so results agree to a few hundred ulps of the data's scale:
``rtol = 1e-10`` for factorisations, ``1e-12`` for products.
"""

from __future__ import annotations

import importlib

import array_api_compat
import array_api_strict as xps
import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal

from distsketch.ops import cg, fd, linalg, meka, nystrom, sketch_solve
from distsketch.testing import from_strict_device as back
from distsketch.testing import to_strict_device as xs

RTOL_FACTOR = 1e-10
RTOL_PRODUCT = 1e-12


def rbf(A, B):
    """An RBF kernel written against the array API (runs on NumPy and strict arrays)."""
    xp = array_api_compat.array_namespace(A, B)
    d2 = xp.sum(A * A, axis=1)[:, None] + xp.sum(B * B, axis=1)[None, :] - 2.0 * (A @ B.T)
    return xp.exp(-0.5 * d2)


def spd(m, seed=0):
    g = np.random.default_rng(seed).standard_normal((m, m + 3))
    return g @ g.T + 0.1 * np.eye(m)


RNG = np.random.default_rng(42)
A50 = RNG.standard_normal((50, 6))


# --- fd -------------------------------------------------------------------------------------

def test_fd_shrink():
    M = RNG.standard_normal((12, 7))
    for rows, ell in ((M, 4), (M[:3], 4)):
        B, d = fd.fd_shrink(rows, ell)
        Bx, dx = fd.fd_shrink(xs(rows), ell)
        Bx = back(Bx)
        assert Bx.shape == B.shape
        # the sketch's rows are defined up to sign: compare BᵀB and the shrinkage
        assert_allclose(Bx.T @ Bx, B.T @ B, rtol=0, atol=RTOL_FACTOR * np.sum(rows**2))
        assert dx == pytest.approx(d, rel=RTOL_FACTOR, abs=1e-300)


def test_fd_covariance_shrink():
    C = A50.T @ A50
    for ell in (4, 6, 9):
        B, d = fd.fd_covariance_shrink(C, ell)
        Bx, dx = fd.fd_covariance_shrink(xs(C), ell)
        assert array_api_compat.is_array_api_strict_namespace(array_api_compat.array_namespace(Bx))
        tol = RTOL_FACTOR * np.trace(C)
        assert_allclose(back(Bx).T @ back(Bx), B.T @ B, rtol=0, atol=tol)
        assert dx == pytest.approx(d, rel=0, abs=tol)
    # the formulation depends on the shapes only, so a block gets it on every device
    assert fd.fd_block_formulation(65536, 1024, 64) == "covariance"
    assert fd.fd_block_formulation(2048, 1024, 64) == "buffer"
    assert fd.fd_covariance_bytes(1024) == 12 * 1024**2


def test_fd_sketch_and_merge():
    B, d = fd.fd_sketch(A50, 4)
    Bx, dx = fd.fd_sketch(xs(A50), 4)
    scale = RTOL_FACTOR * np.sum(A50**2)
    assert_allclose(back(Bx).T @ back(Bx), B.T @ B, rtol=0, atol=scale)
    assert dx == pytest.approx(d, rel=RTOL_FACTOR)
    (s1, d1), (s2, d2) = fd.fd_sketch(A50[:20], 4), fd.fd_sketch(A50[20:], 4)
    M, dm = fd.fd_merge([s1, s2], 4, [d1, d2])
    Mx, dmx = fd.fd_merge([xs(s1), xs(s2)], 4, [d1, d2])
    assert_allclose(back(Mx).T @ back(Mx), M.T @ M, rtol=0, atol=scale)
    assert dmx == pytest.approx(dm, rel=RTOL_FACTOR)
    # a host identity sketch merges with device sketches on their device; a sketch is
    # defined up to the signs of its rows (an SVD's), so its Gram matrix is compared
    Ex, _ = fd.fd_merge([np.zeros((4, 6)), xs(s1)], 4, [0.0, d1])
    assert_allclose(back(Ex).T @ back(Ex), s1.T @ s1, rtol=0, atol=scale)


def test_fd_sketch_components():
    B, _ = fd.fd_sketch(A50, 5)
    V, s = fd.fd_sketch_components(B)
    Vx, sx = fd.fd_sketch_components(xs(B))
    assert_allclose(back(Vx), V, rtol=RTOL_FACTOR, atol=RTOL_FACTOR)
    assert_allclose(back(sx), s, rtol=RTOL_FACTOR)


# --- linalg ---------------------------------------------------------------------------------

def test_fix_signs():
    V = RNG.standard_normal((6, 4))
    V[:, 2] = 0.0
    for axis in (0, 1):
        assert_array_equal(back(linalg.fix_signs(xs(V), axis=axis)), linalg.fix_signs(V, axis=axis))


def test_row_stable_matmul():
    X, W = RNG.standard_normal((600, 5)), RNG.standard_normal((5, 3))
    for offset in (0, 300):
        assert_allclose(back(linalg.row_stable_matmul(xs(X), xs(W), offset)),
                        linalg.row_stable_matmul(X, W, offset), rtol=RTOL_PRODUCT)
    # a host operand moves to the block's device
    assert_allclose(back(linalg.row_stable_matmul(xs(X[:10]), W, 7)),
                    linalg.row_stable_matmul(X[:10], W, 7), rtol=RTOL_PRODUCT)


# --- meka -----------------------------------------------------------------------------------

C3 = RNG.standard_normal((3, 4)) * 2
X40 = RNG.standard_normal((40, 4)) * 2
LANDMARKS = RNG.standard_normal((3, 5, 4))
MAPS = RNG.standard_normal((3, 5, 3))
COUNTS = np.array([5, 4, 5])
RANKS = np.array([3, 2, 0])
OFFSETS = np.array([0, 3, 5])


def test_nearest_centre():
    labels, dist = meka.nearest_centre(X40, C3, 13)
    lx, dx = meka.nearest_centre(xs(X40), C3, 13)
    assert_array_equal(back(lx), labels)
    assert_allclose(back(dx), dist, rtol=RTOL_PRODUCT, atol=1e-12)


def test_basis_block_scatter_project_expand():
    kw = {"kernel": rbf, "params": {}, "width": 3}
    coords = meka.basis_block(X40, 5, C3, LANDMARKS, MAPS, COUNTS, RANKS, **kw)
    cx = meka.basis_block(xs(X40), 5, C3, LANDMARKS, MAPS, COUNTS, RANKS, **kw)
    assert_allclose(back(cx), coords, rtol=RTOL_PRODUCT, atol=1e-12)
    assert set(np.unique(coords[:, 3])) == {0.0, 1.0, 2.0}  # every cluster, a zero rank too
    W = meka.scatter_basis(coords, OFFSETS, RANKS)
    assert_array_equal(back(meka.scatter_basis(xs(coords), OFFSETS, RANKS)), W)
    V, U = RNG.standard_normal((40, 2)), RNG.standard_normal((5, 2))
    assert_allclose(back(meka.project_block(xs(coords), V, OFFSETS, RANKS)),
                    meka.project_block(coords, V, OFFSETS, RANKS), rtol=RTOL_PRODUCT)
    assert_allclose(back(meka.expand_block(xs(coords), xs(U), OFFSETS, RANKS)),
                    meka.expand_block(coords, U, OFFSETS, RANKS), rtol=RTOL_PRODUCT)


def test_meka_row_maps():
    kw = {"kernel": rbf, "params": {}, "width": 3}
    coords = meka.basis_block(X40, 5, C3, LANDMARKS, MAPS, COUNTS, RANKS, **kw)
    W = meka.scattered_basis_block(X40, 5, C3, LANDMARKS, MAPS, COUNTS, RANKS, OFFSETS, **kw)
    assert_array_equal(W, meka.scatter_basis(coords, OFFSETS, RANKS))
    Wx = meka.scattered_basis_block(xs(X40), 5, C3, LANDMARKS, MAPS, COUNTS, RANKS, OFFSETS, **kw)
    assert_allclose(back(Wx), W, rtol=RTOL_PRODUCT, atol=1e-12)
    labels = meka.nearest_centre(X40, C3, 5)[0]
    assert_array_equal(meka.nearest_centre_column(X40, 5, C3), labels[:, None])
    assert_array_equal(back(meka.nearest_centre_column(xs(X40), 5, C3)), labels[:, None])
    U = RNG.standard_normal((5, 2))
    c32 = coords.astype(np.float32)  # a basis read from a store: its product is float64
    assert_array_equal(meka.expand_basis_rows(c32, 0, U, OFFSETS, RANKS),
                       meka.expand_block(c32.astype(np.float64), U, OFFSETS, RANKS))
    assert_allclose(back(meka.expand_basis_rows(xs(coords), 0, U, OFFSETS, RANKS)),
                    meka.expand_block(coords, U, OFFSETS, RANKS), rtol=RTOL_PRODUCT)
    B = RNG.standard_normal((W.shape[1], 2))
    W32 = W.astype(np.float32)
    assert_array_equal(meka.rows_times(W32, 0, B), W32.astype(np.float64) @ B)
    assert_allclose(back(meka.rows_times(xs(W), 0, B)), W @ B, rtol=RTOL_PRODUCT, atol=1e-12)
    # the declarations hold at least a float64 input row and the output row; the scattered
    # map holds the basis task and its Σ k_s-wide rows
    d, c, m, width = X40.shape[1], C3.shape[0], LANDMARKS.shape[1], MAPS.shape[2]
    basis = meka.basis_block_footprint(d, c, m, width).per_row
    assert basis >= 8 * (d + width + 1)
    assert meka.scattered_basis_footprint(d, c, m, width, W.shape[1]).per_row >= \
        basis + 8 * W.shape[1]


def test_choose_ranks_and_psd_core_run_on_the_host():
    ev = [np.array([5.0, 2.0, 0.5]), np.array([4.0, 3.0]), np.array([1.0])]
    for rule in (None, "spectrum"):
        got = meka.choose_ranks([xs(v) for v in ev], 2, rule)
        assert isinstance(got, np.ndarray)
        assert_array_equal(got, meka.choose_ranks(ev, 2, rule))
    G, L = spd(5), RNG.standard_normal((5, 5))
    B, e = meka.psd_core(G, L)
    Bx, ex = meka.psd_core(xs(G), xs(L))
    assert isinstance(Bx, np.ndarray)  # the small k × k factorisation is on the host on purpose
    assert_array_equal(Bx, B)
    assert_array_equal(ex, e)


# --- nystrom --------------------------------------------------------------------------------

W8 = spd(8, seed=3)


def test_inv_sqrt_maps():
    for f in (lambda W: nystrom.inv_sqrt_map(W, 5),
              lambda W: nystrom.randomized_inv_sqrt_map(W, 4, seed=7)):
        M, vals = f(W8)
        Mx, vx = f(xs(W8))
        assert_allclose(back(Mx), M, rtol=RTOL_FACTOR, atol=RTOL_FACTOR)
        assert_allclose(back(vx), vals, rtol=RTOL_FACTOR)
    assert_allclose(back(nystrom.ensemble_map(xs(W8), 3, rank=2)),
                    nystrom.ensemble_map(W8, 3, rank=2), rtol=RTOL_FACTOR, atol=RTOL_FACTOR)


def test_row_stable_apply_and_nystrom_map():
    X = RNG.standard_normal((300, 4))
    Wm = RNG.standard_normal((4, 3))
    got = nystrom.row_stable_apply(lambda T: T @ xs(Wm), xs(X), 3, 100)
    assert_allclose(back(got), nystrom.row_stable_apply(lambda T: T @ Wm, X, 3, 100),
                    rtol=RTOL_PRODUCT)
    L, M = RNG.standard_normal((6, 4)), RNG.standard_normal((6, 3))
    ref = nystrom.nystrom_map(X, 100, L, M, kernel=rbf)
    assert_allclose(back(nystrom.nystrom_map(xs(X), 100, L, M, kernel=rbf)), ref,
                    rtol=RTOL_PRODUCT, atol=1e-12)
    X32 = X.astype(np.float32)
    got32 = nystrom.nystrom_map(xs(X32), 0, L, M, kernel=rbf)
    assert got32.dtype == xps.float32
    K = RNG.standard_normal((30, 6))
    assert_allclose(back(nystrom.nystrom_map(xs(K), 0, None, M, kernel="precomputed")),
                    nystrom.nystrom_map(K, 0, None, M, kernel="precomputed"), rtol=RTOL_PRODUCT)


def test_centred_nystrom_map_and_footprints():
    X = RNG.standard_normal((300, 4))
    L, M = RNG.standard_normal((6, 4)), RNG.standard_normal((6, 3))
    shift = RNG.standard_normal(3)
    ref = nystrom.nystrom_map(X, 100, L, M, kernel=rbf) - shift
    assert_array_equal(nystrom.centred_nystrom_map(X, 100, L, M, shift, kernel=rbf, params={}), ref)
    got = nystrom.centred_nystrom_map(xs(X), 100, L, M, shift, kernel=rbf, params={})
    assert_allclose(back(got), ref, rtol=RTOL_PRODUCT, atol=1e-12)
    X32 = X.astype(np.float32)
    assert nystrom.centred_nystrom_map(xs(X32), 0, L, M, shift, kernel=rbf, params={}).dtype == \
        xps.float32
    # declarations: a float64 row, its m kernel values and its r outputs at least; in a Gram
    # pass also the r x r product of the features and the m x r map
    d, m, r = X.shape[1], L.shape[0], M.shape[1]
    assert nystrom.nystrom_map_footprint(d, m, r).per_row >= 8 * (d + m + r)
    assert nystrom.centred_nystrom_map_footprint(d, m, r).per_row >= 8 * (d + m + r)
    gram = nystrom.nystrom_gram_footprint(d, m, r)
    Z = nystrom.nystrom_map(X, 0, L, M, kernel=rbf, dtype=np.float64)
    assert gram.per_row >= 8 * (d + m + r)
    assert gram.fixed >= (Z.T @ Z).nbytes + M.nbytes


def test_pinv_and_link_matrices():
    Ws, Wt = RNG.standard_normal((9, 3)), RNG.standard_normal((7, 2))
    G = RNG.standard_normal((9, 7))
    assert_allclose(back(nystrom.truncated_pinv(xs(Ws), 1e-8)), nystrom.truncated_pinv(Ws, 1e-8),
                    rtol=RTOL_FACTOR, atol=RTOL_FACTOR)
    assert_allclose(back(nystrom.link_matrix(xs(Ws), xs(G), xs(Wt), tol=1e-8)),
                    nystrom.link_matrix(Ws, G, Wt, tol=1e-8), rtol=RTOL_FACTOR, atol=RTOL_FACTOR)
    assert_allclose(back(nystrom.link_matrix_closed_form(xs(Ws), xs(G), xs(Wt))),
                    nystrom.link_matrix_closed_form(Ws, G, Wt), rtol=RTOL_FACTOR,
                    atol=RTOL_FACTOR)


# --- cg -------------------------------------------------------------------------------------

def test_pcg():
    A = spd(20, seed=5)
    b = RNG.standard_normal((20, 2))
    Ax, dinv = xs(A), 1.0 / np.diag(A)
    ref = cg.pcg(lambda V: A @ V, b, precond=lambda R: R * dinv[:, None], tol=1e-10)
    got = cg.pcg(lambda V: Ax @ V, xs(b), precond=lambda R: R * xs(dinv)[:, None], tol=1e-10)
    assert got.n_iter == ref.n_iter and got.converged and ref.converged
    assert_allclose(back(got.x), ref.x, rtol=RTOL_FACTOR)
    assert_allclose(got.residuals, ref.residuals, rtol=1e-6, atol=1e-14)
    # a vector right-hand side with a starting point, and the documented scalar bound
    got1 = cg.pcg(lambda V: Ax @ V, xs(b[:, 0]), x0=xs(np.ones(20)), tol=1e-10)
    assert_allclose(back(got1.x), np.linalg.solve(A, b[:, 0]), rtol=1e-8)
    assert cg.cg_iteration_bound(100.0, 1e-6) == cg.cg_iteration_bound(100, 1e-6) > 0
    assert isinstance(got, cg.CGResult)


# --- sketch_solve ---------------------------------------------------------------------------

Z30 = RNG.standard_normal((30, 5))
Y30 = RNG.standard_normal((30, 2))
STATE = {"n": 30, "sum": Z30.sum(axis=0), "ztz": Z30.T @ Z30, "zty": Z30.T @ Y30,
         "ysum": Y30.sum(axis=0), "yty": Y30.T @ Y30}


def _xs_state(state):
    return {k: (xs(v) if isinstance(v, np.ndarray) else v) for k, v in state.items()}


def test_normal_equations_ridge_path_and_sse():
    for intercept in (False, True):
        ref = sketch_solve.centered_normal_equations(STATE, intercept)
        got = sketch_solve.centered_normal_equations(_xs_state(STATE), intercept)
        for g, r in zip(got, ref, strict=True):
            assert_allclose(back(g), r, rtol=RTOL_PRODUCT, atol=1e-12)
    A, b = STATE["ztz"], STATE["zty"]
    alphas = [0.1, 1.0, 10.0]
    path = sketch_solve.ridge_path(A, b, alphas)
    assert_allclose(back(sketch_solve.ridge_path(xs(A), xs(b), alphas)), path, rtol=RTOL_FACTOR)
    ev, V = np.linalg.eigh(A)
    assert_allclose(back(sketch_solve.solve_path_from_eigh(xs(ev), xs(V), xs(b), alphas)),
                    sketch_solve.solve_path_from_eigh(ev, V, b, alphas), rtol=RTOL_PRODUCT)
    c = RNG.standard_normal((3, 2))
    assert_allclose(back(sketch_solve.summary_sse(_xs_state(STATE), xs(path), xs(c))),
                    sketch_solve.summary_sse(STATE, path, c), rtol=RTOL_FACTOR)


def test_woodbury_and_nystrom_factor():
    R = sketch_solve.woodbury_factor(STATE["ztz"], 0.5)
    Rx = sketch_solve.woodbury_factor(xs(STATE["ztz"]), 0.5)
    assert_allclose(back(Rx), R, rtol=RTOL_FACTOR, atol=RTOL_FACTOR)
    V = RNG.standard_normal((30, 2))
    assert_allclose(back(sketch_solve.woodbury_apply(xs(Z30), Rx, 0.5, xs(V))),
                    sketch_solve.woodbury_apply(Z30, R, 0.5, V), rtol=RTOL_FACTOR)
    K = spd(6)
    assert_allclose(back(sketch_solve.nystrom_factor(xs(K))), sketch_solve.nystrom_factor(K),
                    rtol=RTOL_FACTOR, atol=RTOL_FACTOR)


def test_statistical_dimensions():
    ev = np.array([3.0, 1.0, 0.1, -1e-12])
    assert sketch_solve.statistical_dimension(xs(ev), 0.5) == pytest.approx(
        sketch_solve.statistical_dimension(ev, 0.5), rel=RTOL_PRODUCT)
    for f, arg in ((sketch_solve.estimate_statistical_dimension, Z30),
                   (sketch_solve.estimate_statistical_dimension, Z30[:3]),
                   (sketch_solve.kernel_statistical_dimension, spd(6))):
        assert f(xs(arg), 1000, 0.5) == pytest.approx(f(arg, 1000, 0.5), rel=RTOL_FACTOR)


def test_fd_state_is_chosen_on_the_host_from_the_width_and_the_namespace():
    # a host decision from scalars: "auto" takes the m × m state only for device rows of a
    # width whose state fits the declared bound
    assert fd.fd_state("auto", 64, on_device=True) == "covariance"
    assert fd.fd_state("auto", 64, on_device=False) == "sketch"
    assert fd.fd_state("auto", fd.COVARIANCE_MAX_COLUMNS + 1, on_device=True) == "sketch"
    assert {fd.fd_state(s, 10**6, on_device=False) for s in ("sketch", "covariance")} == \
        {"sketch", "covariance"}
    assert fd.fd_covariance_state_bytes(300) == np.zeros((300, 300)).nbytes
    assert set(fd.FD_STATES) == {"auto", "sketch", "covariance"}


# --- every public name of these modules is covered here --------------------------------------

COVERED = {
    "fd": {"fd_block_formulation": test_fd_covariance_shrink,
           "fd_covariance_bytes": test_fd_covariance_shrink,
           "fd_covariance_shrink": test_fd_covariance_shrink, "fd_shrink": test_fd_shrink,
           "fd_sketch": test_fd_sketch_and_merge,
           "fd_merge": test_fd_sketch_and_merge, "fd_sketch_components": test_fd_sketch_components,
           "FD_STATES": None,
           "fd_state": test_fd_state_is_chosen_on_the_host_from_the_width_and_the_namespace,
           "fd_covariance_state_bytes":
               test_fd_state_is_chosen_on_the_host_from_the_width_and_the_namespace},
    "linalg": {"fix_signs": test_fix_signs, "row_stable_matmul": test_row_stable_matmul,
               "ROW_TILE": None},  # a constant
    "meka": {"nearest_centre": test_nearest_centre,
             "basis_block": test_basis_block_scatter_project_expand,
             "scatter_basis": test_basis_block_scatter_project_expand,
             "project_block": test_basis_block_scatter_project_expand,
             "expand_block": test_basis_block_scatter_project_expand,
             "choose_ranks": test_choose_ranks_and_psd_core_run_on_the_host,
             "psd_core": test_choose_ranks_and_psd_core_run_on_the_host,
             "basis_block_footprint": test_meka_row_maps,
             "expand_basis_rows": test_meka_row_maps,
             "nearest_centre_column": test_meka_row_maps,
             "rows_times": test_meka_row_maps,
             "scattered_basis_block": test_meka_row_maps,
             "scattered_basis_footprint": test_meka_row_maps},
    "nystrom": {"inv_sqrt_map": test_inv_sqrt_maps, "randomized_inv_sqrt_map": test_inv_sqrt_maps,
                "ensemble_map": test_inv_sqrt_maps,
                "row_stable_apply": test_row_stable_apply_and_nystrom_map,
                "nystrom_map": test_row_stable_apply_and_nystrom_map,
                "truncated_pinv": test_pinv_and_link_matrices,
                "link_matrix": test_pinv_and_link_matrices,
                "link_matrix_closed_form": test_pinv_and_link_matrices,
                "centred_nystrom_map": test_centred_nystrom_map_and_footprints,
                "centred_nystrom_map_footprint": test_centred_nystrom_map_and_footprints,
                "nystrom_gram_footprint": test_centred_nystrom_map_and_footprints,
                "nystrom_map_footprint": test_centred_nystrom_map_and_footprints,
                "DEFAULT_RCOND": None},  # a constant
    "cg": {"pcg": test_pcg, "cg_iteration_bound": test_pcg, "CGResult": test_pcg},
    "sketch_solve": {"centered_normal_equations": test_normal_equations_ridge_path_and_sse,
                     "ridge_path": test_normal_equations_ridge_path_and_sse,
                     "solve_path_from_eigh": test_normal_equations_ridge_path_and_sse,
                     "summary_sse": test_normal_equations_ridge_path_and_sse,
                     "woodbury_factor": test_woodbury_and_nystrom_factor,
                     "woodbury_apply": test_woodbury_and_nystrom_factor,
                     "statistical_dimension": test_statistical_dimensions,
                     "estimate_statistical_dimension": test_statistical_dimensions,
                     "kernel_statistical_dimension": test_statistical_dimensions},
}


@pytest.mark.parametrize("module", sorted(COVERED))
def test_every_public_name_is_covered(module):
    public = set(importlib.import_module(f"distsketch.ops.{module}").__all__)
    missing = sorted(public - set(COVERED[module]))
    assert not missing, f"distsketch.ops.{module} names without a strict-namespace test: {missing}"
    constants = {name for name, test in COVERED[module].items() if test is None}
    mod = importlib.import_module(f"distsketch.ops.{module}")
    assert all(not callable(getattr(mod, name)) for name in constants)
