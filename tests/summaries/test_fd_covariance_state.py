"""FrequentDirectionsSummary with ``state="covariance"``: the exact ZᵀZ summed over
blocks and merges, shrunk once in ``finalize``.

References are exact: ZᵀZ of all rows in one product (numpy), its eigenvalues, and
the FD bound ‖ZᵀZ − BᵀB‖₂ ≤ min_k ‖Z − Z_k‖_F²/(ℓ − k) computed from them.

Tolerances from theory (u = 2⁻⁵³, rows float64):

* a sum of n products in any order is within γₙ·(|Z|ᵀ|Z|) of the exact one entrywise
  (γₙ = n·u/(1 − n·u)), so two chunkings' covariances C, C' differ by at most
  2·γₙ·‖|Z|ᵀ|Z|‖_F in Frobenius norm;
* BᵀB = (C − λ_ℓ I)₊ (the PSD part), and the PSD projection is 1-Lipschitz in the
  Frobenius norm, so ‖BᵀB − B'ᵀB'‖_F ≤ ‖C − C'‖_F + √m·|λ_ℓ − λ'_ℓ| ≤
  (1 + √m)·‖C − C'‖_F; each eigendecomposition adds a backward error of
  O(m·u·‖C‖₂) (slack: 100·m·u·‖C‖₂).
"""

from __future__ import annotations

import itertools

import dask
import dask.array as da
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import distsketch.summaries.frequent_directions as fd_module
from distsketch.errors import ConfigError
from distsketch.graph import tree_reduce
from distsketch.ops.fd import fd_covariance_shrink, fd_covariance_state_bytes
from distsketch.ops.rff import rff_map, rff_operator
from distsketch.summaries.frequent_directions import FrequentDirectionsSummary, sketch_of
from distsketch.testing import MergeableSummaryTests
from distsketch.testing import from_strict_device as on_host
from distsketch.testing import to_strict_device as on_device

U = 2.0**-53
ELL = 5


def _rff(block, offset, W, b):
    return rff_map(block, W, b, offset)


def _gamma(n: int) -> float:
    return n * U / (1 - n * U)


def _tolerances(Z: np.ndarray) -> tuple[float, float]:
    """(covariance, sketch) Frobenius tolerances of two chunkings of rows Z (module notes)."""
    n, m = Z.shape
    absZ = np.abs(Z)
    cov = 2 * _gamma(n) * float(np.linalg.norm(absZ.T @ absZ))
    norm2 = float(np.linalg.norm(Z, 2) ** 2)
    return cov, (1 + np.sqrt(m)) * cov + 2 * 100 * m * U * norm2


def _reduce(summary, X, cuts, split_every, *operands):
    """chunk at ``cuts``, merge ``split_every`` consecutive states at a time, up a tree."""
    bounds = [0, *sorted(set(cuts)), X.shape[0]]
    states = [summary.chunk(X[a:b], a, *operands) for a, b in itertools.pairwise(bounds)
              if b > a]
    while len(states) > 1:
        states = [summary.merge(states[i: i + split_every])
                  for i in range(0, len(states), split_every)]
    return states[0]


def _data(seed: int, n: int = 300, m: int = 9) -> np.ndarray:
    # a decaying spectrum: the FD bound and the ℓ-th eigenvalue are both far from zero
    return np.random.default_rng(seed).normal(size=(n, m)) * 0.85 ** np.arange(m)[None, :]


class TestFDCovarianceState(MergeableSummaryTests):
    """Merge is a sum: associative and chunking-independent up to float addition."""

    def make_summary(self):
        return FrequentDirectionsSummary(ELL, n_columns=8, state="covariance")

    def make_data(self, rng):
        return rng.normal(size=(140, 8))


class TestFDCovarianceStateRFF(MergeableSummaryTests):
    W, b = rff_operator(11, "rbf", 0.5, 3, 24)

    def make_summary(self):
        # map_rows below the block sizes: every block is mapped in several slices
        return FrequentDirectionsSummary(ELL, transform=_rff, n_columns=24, map_rows=ELL,
                                         state="covariance")

    def operands(self):
        return (self.W, self.b)

    def make_data(self, rng):
        return rng.normal(size=(130, 3))


@settings(max_examples=25, deadline=None)
@given(cuts=st.lists(st.integers(0, 300), max_size=9), split_every=st.integers(2, 4),
       seed=st.integers(0, 3), map_rows=st.sampled_from([5, 40, 4096]))
def test_any_chunking_gives_the_single_block_result(cuts, split_every, seed, map_rows):
    X = _data(seed)
    s = FrequentDirectionsSummary(ELL, map_rows=map_rows, state="covariance")
    state = _reduce(s, X, cuts, split_every)
    C = X.T @ X
    tol_cov, tol_sketch = _tolerances(X)
    assert state["n"] == X.shape[0]
    assert np.linalg.norm(state["ztz"] - C) <= tol_cov
    got, ref = s.finalize(state), sketch_of({"ztz": C, "n": X.shape[0]}, ELL)
    B, Bref = got["sketch"], ref["sketch"]
    assert B.shape == (ELL, X.shape[1])
    assert np.linalg.norm(B.T @ B - Bref.T @ Bref) <= tol_sketch
    assert abs(got["shrinkage"] - ref["shrinkage"]) <= tol_sketch
    assert got["sq_frobenius"] == pytest.approx(float(np.sum(X * X)), rel=X.shape[0] * 4 * U)


def test_the_sketch_is_the_shrunk_exact_covariance():
    X = _data(1)
    fin = FrequentDirectionsSummary(ELL, state="covariance")
    got = fin.finalize(_reduce(fin, X, [40, 100, 230], 2))
    lam, V = np.linalg.eigh(X.T @ X)
    lam, V = lam[::-1], V[:, ::-1]
    # B = diag(√(λᵢ − λ_ℓ)) Vᵀ for i < ℓ: BᵀB = Σ (λᵢ − λ_ℓ) vᵢvᵢᵀ, and Δ = λ_ℓ
    expected = (V[:, :ELL] * (lam[:ELL] - lam[ELL - 1])) @ V[:, :ELL].T
    tol = _tolerances(X)[1]
    assert np.linalg.norm(got["sketch"].T @ got["sketch"] - expected) <= tol
    assert got["shrinkage"] == pytest.approx(lam[ELL - 1], abs=tol)


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("ell", [2, 4, 7])
def test_error_is_within_the_fd_bound_and_the_streaming_sketch_error(seed, ell):
    X = _data(seed, n=240, m=10)
    if seed % 2:
        X = X.astype(np.float32).astype(np.float64)  # float32 values, float64 arithmetic
    cuts = [30, 60, 90, 150, 200]
    C = X.T @ X
    scale = float(np.linalg.norm(C, 2))
    slack = 100 * X.shape[1] * U * scale + _tolerances(X)[0]
    cov = FrequentDirectionsSummary(ell, state="covariance")
    got = cov.finalize(_reduce(cov, X, cuts, 2))
    B = got["sketch"]
    D = C - B.T @ B
    err = float(np.linalg.norm(D, 2))
    lam = np.linalg.eigvalsh(C)[::-1]
    s2 = np.linalg.svd(X, compute_uv=False) ** 2
    bound = min(s2[k:].sum() / (ell - k) for k in range(ell))
    assert np.linalg.eigvalsh(D).min() >= -slack       # 0 ⪯ ZᵀZ − BᵀB
    assert err == pytest.approx(lam[ell - 1], abs=slack)  # the ℓ-th eigenvalue
    assert err <= bound + slack
    assert got["shrinkage"] == pytest.approx(err, abs=slack)
    # the streaming sketch of the same blocks (map_rows = ℓ: the buffer formulation)
    sk = FrequentDirectionsSummary(ell, map_rows=ell)
    streamed = _reduce(sk, X, cuts, 2)
    Bs = streamed["sketch"]
    assert err <= float(np.linalg.norm(C - Bs.T @ Bs, 2)) + slack


def test_chunk_and_merge_run_no_eigendecomposition(monkeypatch):
    calls = {"shrink": 0}
    real = fd_module.fd_covariance_shrink

    def counting(C, ell):
        calls["shrink"] += 1
        return real(C, ell)

    def refuse(*args, **kwargs):
        raise AssertionError("a per-block FD shrink ran")

    monkeypatch.setattr(fd_module, "fd_covariance_shrink", counting)
    monkeypatch.setattr(fd_module, "fd_sketch", refuse)
    monkeypatch.setattr(fd_module, "fd_merge", refuse)
    X = _data(2, n=5000, m=12)  # large blocks: the sketch state shrinks each one's covariance
    s = FrequentDirectionsSummary(ELL, state="covariance")
    state = _reduce(s, X, [1000, 2000, 3000, 4000], 2)
    assert calls["shrink"] == 0
    s.finalize(state)
    assert calls["shrink"] == 1
    with pytest.raises(AssertionError, match="per-block FD shrink"):
        _reduce(FrequentDirectionsSummary(ELL), X, [1000, 2000], 2)  # the sketch state does


def test_dask_tree_reduce_equals_the_numpy_sum_for_float32_rff_features():
    rng = np.random.default_rng(3)
    X = rng.normal(size=(700, 4)).astype(np.float32)
    W, b = rff_operator(3, "rbf", 0.3, 4, 32)  # seed, kernel, gamma, d, m
    s = FrequentDirectionsSummary(ELL, transform=_rff, n_columns=32, map_rows=64,
                                  state="covariance")
    with dask.config.set(scheduler="sync"):
        got = tree_reduce(s, da.from_array(X, chunks=(150, 4)), W, b, split_every=2).compute()
    Z = np.asarray(rff_map(X, W, b, 0), dtype=np.float64)
    # float32 products per slice of ≤ 64 rows, summed in float64: γ₆₄ in float32 per slice
    absZ = np.abs(Z)
    tol = 64 * 2.0**-24 * float(np.linalg.norm(absZ.T @ absZ)) * 1.01
    assert got["ztz"].dtype == np.float64
    assert np.linalg.norm(got["ztz"] - Z.T @ Z) <= tol
    assert got["n"] == 700


def test_strict_arrays_give_the_numpy_result_on_their_device():
    X = _data(0, n=120, m=7)
    s = FrequentDirectionsSummary(ELL, n_columns=7, map_rows=16, state="covariance")
    ref = s.merge([s.empty(), s.chunk(X[:50], 0), s.chunk(X[50:], 50)])
    states = [s.chunk(on_device(X[:50]), 0), s.chunk(on_device(X[50:]), 50)]
    got = s.merge([s.empty(), *states])  # a host identity meets device states
    on_host(states[0]["ztz"])  # raises unless the state stays on the strict device
    np.testing.assert_allclose(on_host(got["ztz"]), ref["ztz"], rtol=1e-12, atol=0)
    fin, fin_ref = s.finalize(got), s.finalize(ref)
    B, Bref = on_host(fin["sketch"]), fin_ref["sketch"]
    tol = _tolerances(X)[1]
    assert np.linalg.norm(B.T @ B - Bref.T @ Bref) <= tol
    assert fin["shrinkage"] == pytest.approx(fin_ref["shrinkage"], abs=tol)
    assert fin["sq_frobenius"] == pytest.approx(fin_ref["sq_frobenius"], rel=1e-12)


def test_a_covariance_state_merged_with_a_sketch_state_gives_a_valid_sketch():
    X = _data(3, n=200, m=9)
    cov = FrequentDirectionsSummary(ELL, state="covariance")
    sk = FrequentDirectionsSummary(ELL, map_rows=ELL)
    for summary in (cov, sk):
        merged = summary.merge([cov.chunk(X[:120], 0), sk.chunk(X[120:], 120)])
        assert set(merged) == {"sketch", "n", "sq_frobenius", "shrinkage"}
        B, C = merged["sketch"], X.T @ X
        s2 = np.linalg.svd(X, compute_uv=False) ** 2
        bound = min(s2[k:].sum() / (ELL - k) for k in range(ELL))
        slack = 1e-12 * float(s2.sum())
        assert np.linalg.norm(C - B.T @ B, 2) <= min(bound, merged["shrinkage"]) + slack
        assert merged["n"] == 200


def test_empty_footprint_and_bad_state():
    s = FrequentDirectionsSummary(3, n_columns=6, state="covariance")
    assert s.empty()["ztz"].shape == (6, 6) and s.empty()["n"] == 0
    fp = s.footprint(6, 8)
    assert fp.state == fd_covariance_state_bytes(6) == 8 * 36
    # the m × m sum and product, and map_rows mapped rows: no ℓ-dependent buffers
    assert fp.fixed == s.map_rows * 6 * 8 + 36 * 16
    with pytest.raises(ConfigError, match="state must be 'sketch' or 'covariance'"):
        FrequentDirectionsSummary(3, state="exact")
    # the sketch of a width below ℓ holds the covariance exactly (zero rows pad it)
    X = _data(4, n=30, m=2)
    fin = FrequentDirectionsSummary(3, state="covariance").finalize({"ztz": X.T @ X, "n": 30})
    np.testing.assert_allclose(fin["sketch"].T @ fin["sketch"], X.T @ X, rtol=1e-12)
    assert fin["shrinkage"] == 0.0
    np.testing.assert_array_equal(
        fin["sketch"], fd_covariance_shrink(X.T @ X, 3)[0])
