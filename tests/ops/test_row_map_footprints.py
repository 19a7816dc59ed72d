"""The memory the row maps of ops declare holds what one call allocates.

Each declaration (``*_footprint``) is checked against a measurement: the peak
of Python-tracked allocations (NumPy reports its buffers to ``tracemalloc``)
during one call on a NumPy block, after a warm-up call.  The declaration also
counts the input block, which the measurement does not, so it is an upper
bound; the factor 2 leaves room for the allocator's own rounding and for
small temporaries a declaration rounds away (a few values a row), while a
declaration that forgot a block-sized array (b × m kernel values, the output)
fails.
"""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest

from distsketch.ops import kernel_product, kernels, meka, nystrom
from distsketch.ops.nystrom import inv_sqrt_map

FACTOR = 2.0
RNG = np.random.default_rng(3)
B, D, M = 4000, 20, 60
X = RNG.normal(size=(B, D))
L = RNG.normal(size=(M, D))
PARAMS = {"gamma": 0.1}
MAP, _ = inv_sqrt_map(kernels.pairwise_kernel(L, None, "rbf", **PARAMS))
R = MAP.shape[1]

# MEKA: 5 clusters of 10 landmarks, ranks up to 4
C = 5
CENTRES = X[:C]
COUNTS = np.full(C, 10)
RANKS = np.array([4, 4, 3, 4, 2])
OFFSETS = np.concatenate(([0], np.cumsum(RANKS)[:-1]))
MEKA_LANDMARKS = RNG.normal(size=(C, 10, D))
MEKA_MAPS = RNG.normal(size=(C, 10, 4))
MEKA_KW = {"kernel": "rbf", "params": PARAMS, "width": 4}


def peak_bytes(call) -> int:
    """Peak bytes allocated during ``call()`` beyond what was held before it."""
    call()  # warm-up: one-time caches are not the call's working memory
    tracemalloc.start()
    try:
        held = tracemalloc.get_traced_memory()[0]
        call()
        return tracemalloc.get_traced_memory()[1] - held
    finally:
        tracemalloc.stop()


CASES = {
    "nystrom_map": (
        lambda: nystrom.nystrom_map(X, 0, L, MAP, kernel="rbf", params=PARAMS),
        nystrom.nystrom_map_footprint(D, M, R)),
    "centred_nystrom_map": (
        lambda: nystrom.centred_nystrom_map(X, 0, L, MAP[:, :5], np.ones(5), kernel="rbf",
                                            params=PARAMS),
        nystrom.centred_nystrom_map_footprint(D, M, 5)),
    "kernel_columns": (
        lambda: kernels.kernel_columns(X, 0, L, kernel="rbf", params=PARAMS),
        kernels.kernel_columns_footprint(D, M)),
    "kernel_times_rows": (
        lambda: kernel_product.kernel_times_rows(X, 0, L, RNG.normal(size=(M, 2)), kernel="rbf",
                                                 params=PARAMS),
        kernel_product.kernel_times_rows_footprint(D, M, 2, "rbf")),
    "kernel_times_rows-laplacian": (
        lambda: kernel_product.kernel_times_rows(X, 0, L, RNG.normal(size=(M, 2)),
                                                 kernel="laplacian", params=PARAMS),
        kernel_product.kernel_times_rows_footprint(D, M, 2, "laplacian")),
    "basis_block": (
        lambda: meka.basis_block(X, 0, CENTRES, MEKA_LANDMARKS, MEKA_MAPS, COUNTS, RANKS,
                                 **MEKA_KW),
        meka.basis_block_footprint(D, C, 10, 4)),
    "scattered_basis_block": (
        lambda: meka.scattered_basis_block(X, 0, CENTRES, MEKA_LANDMARKS, MEKA_MAPS, COUNTS, RANKS,
                                           OFFSETS, **MEKA_KW),
        meka.scattered_basis_footprint(D, C, 10, 4, int(RANKS.sum()))),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_declared_task_memory_bounds_one_call(name):
    call, footprint = CASES[name]
    declared = B * footprint.per_row + footprint.fixed
    measured = peak_bytes(call)
    assert measured <= FACTOR * declared, (
        f"{name}: one call on {B} rows allocates {measured} bytes, its declaration "
        f"{footprint} gives {declared:.0f}")


def test_a_declaration_missing_the_output_would_fail():
    # the bound is tight enough to notice: nystrom_map's output alone is b x r float64,
    # so a declaration of the input row only falls below half the measurement
    call, footprint = CASES["nystrom_map"]
    measured = peak_bytes(call)
    assert measured > FACTOR * B * 8 * D
    assert B * 8 * R < measured <= FACTOR * (B * footprint.per_row + footprint.fixed)
