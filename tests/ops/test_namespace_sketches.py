"""Every public kernel of the sketch modules of ``distsketch.ops`` on array-api-strict blocks.

array-api-strict refuses any implicit conversion to NumPy, so a kernel that
passes here takes its namespace from its input end to end (its host operands
W, b, hashes and signs are moved to the block's device explicitly).  Each
case runs once on NumPy and once on array-api-strict and compares the two to
float tolerance; the strict result must be a strict array.

A new public function must be added to ``CASES`` (a kernel: runs on a block)
or to ``HOST`` (a host-side generator of operators, coefficients or scalars,
with the reason): :func:`test_every_public_function_is_covered` fails
otherwise.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import array_api_strict as xps
import numpy as np
import pytest

from distsketch.errors import InputError
from distsketch.ops import (
    countsketch,
    expansion,
    hadamard,
    kernel_product,
    kernels,
    poly_sketch,
    projection,
    random,
    rff,
    rounding,
    sparsify,
    taylor,
    tensor_sketch,
)
from distsketch.ops.namespace import namespace, to_host

MODULES = [rff, countsketch, tensor_sketch, poly_sketch, hadamard, taylor, random, projection,
           rounding, sparsify, kernels, kernel_product, expansion]

_rng = np.random.default_rng(0)
X = _rng.standard_normal((37, 10))
X32 = X.astype(np.float32)
C24 = _rng.standard_normal((37, 24))
U = _rng.standard_normal((37, 8))
V = _rng.standard_normal((37, 8))
COEF = _rng.standard_normal((29, 3)) * np.array([1.0, 0.1, 0.0])  # one all-zero output
K = np.clip(_rng.standard_normal((20, 24)) * 0.3, -1.0, 1.0)
B1, B2 = _rng.standard_normal((13, 10)), _rng.standard_normal((21, 10))
V1, V2 = _rng.standard_normal((13, 2)), _rng.standard_normal((21, 2))

Wrap = Callable[[np.ndarray], Any]
# case id -> (function's "module.name", run(wrap) -> result, rtol/atol)
_Case = tuple[str, Callable[[Wrap], Any], float]
_F64, _F32 = 1e-12, 2e-5


def _cases() -> list[tuple[str, _Case]]:
    W, b = rff.rff_operator(3, "rbf", 0.3, 10, 16)
    Wp, bp = rff.rff_operator(3, "laplacian", 0.3, 10, 16, form="paired")
    R_dense = projection.projection_matrix(2, 10, 6)
    R_sparse = projection.projection_matrix(2, 10, 6, density="sparse")
    signs, index = hadamard.srht_operator(4, 10, 6)
    rbf = kernels.kernel_function("rbf", gamma=0.2)
    params = {"gamma": 0.3, "coef0": 0.5, "degree": 3}
    gi = np.arange(5, 25, dtype=np.int64)[:, None]
    gj = np.arange(40, 64, dtype=np.int64)[None, :]
    big = X.copy()
    big[7, 3] = 1e300
    X_nan = X.copy()
    X_nan[11, 2] = np.nan
    out: list[tuple[str, _Case]] = [
        ("rff_map", ("rff.rff_map", lambda w: rff.rff_map(w(X), W, b, row_offset=5), _F64)),
        ("rff_map-f32", ("rff.rff_map", lambda w: rff.rff_map(w(X32), W, b), _F32)),
        ("rff_map-paired", ("rff.rff_map", lambda w: rff.rff_map(w(X), Wp, bp, row_offset=2), _F64)),
        ("countsketch", ("countsketch.countsketch",
                         lambda w: countsketch.countsketch(w(X), 3, "cs", 8, col_offset=4), _F64)),
        ("countsketch-f32", ("countsketch.countsketch",
                             lambda w: countsketch.countsketch(w(X32), 3, "cs", 8), _F32)),
        ("countsketch_transposed", ("countsketch.countsketch_transposed",
                                    lambda w: countsketch.countsketch_transposed(w(X.T.copy()), 3, "cs", 8),
                                    _F64)),
        ("tensor_sketch_linear", ("tensor_sketch.tensor_sketch_linear",
                                  lambda w: tensor_sketch.tensor_sketch_linear(w(X), 1, "ts", 3, 8), _F64)),
        ("tensor_sketch_combine", ("tensor_sketch.tensor_sketch_combine",
                                   lambda w: tensor_sketch.tensor_sketch_combine(w(C24), 3, 8,
                                                                                 block_rows=16), _F64)),
        ("tensor_sketch_dense", ("tensor_sketch.tensor_sketch_dense",
                                 lambda w: tensor_sketch.tensor_sketch_dense(
                                     w(X), 1, "ts", 3, 8, scale=0.5, bias=np.full(24, 0.1)), _F64)),
        ("tensor_sketch", ("tensor_sketch.tensor_sketch",
                           lambda w: tensor_sketch.tensor_sketch(w(X), 1, "ts", 2, 16), _F64)),
        ("tensor_srht_linear", ("poly_sketch.tensor_srht_linear",
                                lambda w: poly_sketch.tensor_srht_linear(w(X), 1, "p", 2, 8, 16), _F64)),
        ("tensor_srht_combine", ("poly_sketch.tensor_srht_combine",
                                 lambda w: poly_sketch.tensor_srht_combine(w(C24), 3, 8), _F64)),
    ]
    for base in poly_sketch.BASES:
        out += [
            (f"degree2_sketch-{base}", ("poly_sketch.degree2_sketch",
                                        lambda w, base=base: poly_sketch.degree2_sketch(
                                            w(U), w(V), 1, "d", 8, base=base), _F64)),
            (f"leaf_sketch-{base}", ("poly_sketch.leaf_sketch",
                                     lambda w, base=base: poly_sketch.leaf_sketch(
                                         w(X), 1, "p", 8, 16, base=base), _F64)),
            (f"poly_sketch_combine-{base}", ("poly_sketch.poly_sketch_combine",
                                             lambda w, base=base: poly_sketch.poly_sketch_combine(
                                                 w(U), 3, 1, "p", 8, base=base), _F64)),
            (f"poly_sketch-{base}", ("poly_sketch.poly_sketch",
                                     lambda w, base=base: poly_sketch.poly_sketch(
                                         w(X), 1, "p", 5, 8, base=base), _F64)),
        ]
    out += [
        ("fwht", ("hadamard.fwht", lambda w: hadamard.fwht(w(C24[:, :16].copy()), normalize=True), _F64)),
        ("fwht-factored", ("hadamard.fwht",
                           lambda w: hadamard.fwht(w(_rng_block(6, 1024)), row_offset=3), _F64)),
        ("srht", ("hadamard.srht", lambda w: hadamard.srht(w(X), 1, "s", 8, 16, row_offset=1), _F64)),
        ("srht-columns", ("hadamard.srht",
                          lambda w: hadamard.srht(w(X[:, :3]), 1, "s", 8, 16, col_offset=2), _F64)),
        ("srht_apply", ("hadamard.srht_apply", lambda w: hadamard.srht_apply(w(X), signs, index), _F64)),
        ("gaussian_term_weights", ("taylor.gaussian_term_weights",
                                   lambda w: taylor.gaussian_term_weights(
                                       w(np.concatenate(([0.0], np.sum(X * X, axis=1)))), 0.2, 12),
                                   1e-10)),
        ("project-dense", ("projection.project", lambda w: projection.project(w(X), R_dense, 3), _F64)),
        ("project-sparse-f32", ("projection.project", lambda w: projection.project(w(X32), R_sparse), _F32)),
        ("round_coefficients", ("rounding.round_coefficients",
                                lambda w: rounding.round_coefficients(w(COEF), [0.3, 0.05, 1.0], 7, 2),
                                _F64)),
        ("round_coefficients-1d", ("rounding.round_coefficients",
                                   lambda w: rounding.round_coefficients(w(COEF[:, 0]), 0.3, 7), _F64)),
        ("expected_nonzeros", ("rounding.expected_nonzeros",
                               lambda w: rounding.expected_nonzeros(w(COEF), 0.3), _F64)),
        ("keep_probabilities", ("rounding.keep_probabilities",
                                lambda w: rounding.keep_probabilities(w(COEF), 0.3), _F64)),
        ("hoeffding_bound", ("rounding.hoeffding_bound",
                             lambda w: rounding.hoeffding_bound(w(COEF), 0.3, 1.0, 0.05), _F64)),
        ("shared_keep_probabilities", ("rounding.shared_keep_probabilities",
                                       lambda w: rounding.shared_keep_probabilities(w(COEF), 0.3), _F64)),
        ("round_shared", ("rounding.round_shared",
                          lambda w: rounding.round_shared(w(COEF), [0.3, 0.05, 1.0], 7, 4), _F64)),
        ("threshold_for_total_budget", ("rounding.threshold_for_total_budget",
                                        lambda w: rounding.threshold_for_total_budget(w(COEF), 6.0), _F64)),
        ("shared_rounded_counts", ("rounding.shared_rounded_counts",
                                   lambda w: rounding.shared_rounded_counts(w(COEF), 0.3), _F64)),
        ("rff_block", ("rff.rff_block", lambda w: rff.rff_block(w(X), 5, W, b), _F64)),
        ("rff_embed", ("rff.rff_embed", lambda w: rff.rff_embed(w(X), 3, W, b, U[:16, :4],
                                                                 map_rows=10), _F64)),
        ("rff_embed-paired-f32", ("rff.rff_embed", lambda w: rff.rff_embed(w(X32), 0, Wp, bp,
                                                                            U[:16, :4]), _F32)),
        ("projection_block", ("projection.projection_block",
                              lambda w: projection.projection_block(w(X), 3, R_dense.T.copy()), _F64)),
        ("affine_rows", ("projection.affine_rows",
                         lambda w: projection.affine_rows(w(X), 2, R_dense, np.arange(6.0)), _F64)),
        ("diagonal_block", ("sparsify.diagonal_block",
                            lambda w: sparsify.diagonal_block(w(X), 0, "poly", params), _F64)),
        ("expansion_rows", ("expansion.expansion_rows",
                            lambda w: expansion.expansion_rows(
                                w(X), 0, B2, V2, np.array([0.5, -1.0]), kernel="rbf",
                                params={"gamma": 0.2}, rows=8), _F64)),
        ("centred_expansion_rows", ("expansion.centred_expansion_rows",
                                    lambda w: expansion.centred_expansion_rows(
                                        w(X), 0, B2, V2, np.array([0.5, -1.0]), kernel="rbf",
                                        params={"gamma": 0.2}, rows=8), _F64)),
        ("kernel_tile", ("sparsify.kernel_tile",
                         lambda w: sparsify.kernel_tile(rbf, w(X[:20]), 5, w(B2), 40, cell=16), _F64)),
        ("simplify_entries", ("sparsify.simplify_entries",
                              lambda w: sparsify.simplify_entries(w(K), gi, gj, 9, 0.5), _F64)),
        ("simplify_entries-quantize", ("sparsify.simplify_entries",
                                       lambda w: sparsify.simplify_entries(w(K), gi, gj, 9, 0.5, True, 1.0),
                                       _F64)),
        ("simplify_tile", ("sparsify.simplify_tile",
                           lambda w: sparsify.simplify_tile(w(K), 30, 20, 9, 0.5, True, 1.0), _F64)),
        ("kernel_function", ("kernels.kernel_function",
                             lambda w: kernels.kernel_function("cauchy", gamma=0.4)(w(X), w(B1)), _F64)),
        ("first_oversized_row", ("kernels.first_oversized_row",
                                 lambda w: kernels.first_oversized_row(w(big)), _F64)),
        ("first_oversized_row-none", ("kernels.first_oversized_row",
                                      lambda w: kernels.first_oversized_row(w(X)), _F64)),
        ("oversized_flag", ("kernels.oversized_flag",
                            lambda w: bool(kernels.oversized_flag(w(big))), _F64)),
        ("oversized_flag-none", ("kernels.oversized_flag",
                                 lambda w: bool(kernels.oversized_flag(w(X))), _F64)),
        ("bad_input_flag", ("kernels.bad_input_flag",
                            lambda w: bool(kernels.bad_input_flag(w(big))), _F64)),
        ("bad_input_flag-nan", ("kernels.bad_input_flag",
                                lambda w: bool(kernels.bad_input_flag(w(X_nan))), _F64)),
        ("bad_input_flag-none", ("kernels.bad_input_flag",
                                 lambda w: bool(kernels.bad_input_flag(w(X))), _F64)),
        ("check_row_magnitude", ("kernels.check_row_magnitude",
                                 lambda w: kernels.check_row_magnitude(w(X), 0), _F64)),
    ]
    params = {"gamma": 0.3, "coef0": 0.5, "degree": 3}
    for name in sorted(kernels.KERNELS):
        p = {k: params[k] for k in kernels.KERNELS[name][1]}
        out += [
            (f"pairwise_kernel-{name}", ("kernels.pairwise_kernel",
                                         lambda w, name=name, p=p: kernels.pairwise_kernel(
                                             w(X), w(B1), name, **p), _F64)),
            (f"kernel_diagonal-{name}", ("kernels.kernel_diagonal",
                                         lambda w, name=name, p=p: kernels.kernel_diagonal(
                                             w(np.vstack((X, np.zeros((1, 10))))), name, **p), _F64)),
        ]
    out += [
        ("kernel_diagonal-callable", ("kernels.kernel_diagonal",
                                      lambda w: kernels.kernel_diagonal(
                                          w(X), kernels.kernel_function("laplacian", gamma=0.2)), _F64)),
    ]
    for name in ("rbf", "laplacian"):
        out.append((f"kernel_times-{name}", ("kernel_product.kernel_times",
                                             lambda w, name=name: kernel_product.kernel_times(
                                                 w(X), [w(B1), w(B2)], [w(V1), w(V2)], name,
                                                 {"gamma": 0.3}, tile_rows=8, tile_cols=16), _F64)))
    out += [  # row maps over host landmarks / centres, which move to the block's device
        ("kernel_columns", ("kernels.kernel_columns", lambda w: kernels.kernel_columns(
            w(X), 3, B1, kernel="laplacian", params={"gamma": 0.3}), _F64)),
        ("kernel_times_rows", ("kernel_product.kernel_times_rows",
                               lambda w: kernel_product.kernel_times_rows(
                                   w(X), 3, B1, V1, kernel="rbf", params={"gamma": 0.3}), _F64)),
    ]
    return out


def _rng_block(n: int, d: int) -> np.ndarray:
    return np.random.default_rng(d).standard_normal((n, d))


CASES = _cases()

#: Public functions that run on the host by design: they take no data block and
#: generate operators, coefficients or scalars (pure functions of seed and index),
#: which the kernels above move to a block's device.
HOST = {
    "rff.rff_operator": "host operator W, b (seed-keyed)",
    "rff.rff_fold_scaling": "host operator W', b' from the host column statistics",
    "countsketch.countsketch_hashes": "host operator (hashes of column indices)",
    "countsketch.countsketch_matrix": "host SciPy sparse operator",
    "hadamard.hadamard_entries": "host operator entries of integer indices",
    "hadamard.next_pow2": "scalar",
    "hadamard.srht_coordinates": "host operator (sampled coordinates)",
    "hadamard.srht_signs": "host operator (signs)",
    "hadamard.srht_operator": "host operator held by a model",
    "random.hash_bucket": "host hash of indices",
    "random.hash_sign": "host hash of indices",
    "random.hash_uint64": "host hash of indices",
    "random.hash_uniform": "host hash of indices",
    "random.philox": "host generator",
    "random.random_rows": "host random operator rows",
    "random.resolve_seed": "scalar",
    "taylor.arccos0_coefficients": "host series coefficients",
    "taylor.arccos1_coefficients": "host series coefficients",
    "taylor.ntk_coefficients": "host series coefficients",
    "taylor.dot_product_coefficients": "host series coefficients",
    "taylor.gaussian_coefficients": "host series coefficients",
    "taylor.gaussian_degree": "scalar",
    "taylor.poly_sketch_log_moment": "host variance model of sketch sizes",
    "taylor.predicted_sketch_error": "host variance model of sketch sizes",
    "taylor.sample_tail_degrees": "host sampled degrees",
    "taylor.split_components": "host integer split of sketch sizes",
    "taylor.split_components_by_variance": "host integer split of sketch sizes",
    "projection.projection_matrix": "host operator R",
    "rff.rff_map_footprint": "memory declaration (bytes)",
    "rff.rff_operands_footprint": "memory declaration (bytes)",
    "rff.rff_embed_footprint": "memory declaration (bytes)",
    "projection.projection_map_footprint": "memory declaration (bytes)",
    "projection.affine_map_footprint": "memory declaration (bytes)",
    "tensor_sketch.sketch_linear_footprint": "memory declaration (bytes)",
    "tensor_sketch.sketch_combine_footprint": "memory declaration (bytes)",
    "tensor_sketch.sketch_map_footprint": "memory declaration (bytes)",
    "expansion.expansion_footprint": "memory declaration (bytes)",
    "projection.jl_min_dim": "scalar",
    "rounding.threshold_for_budget": "host finalisation (sort and scalar scan per column)",
    "sparsify.kernel_bound": "scalar",
    "sparsify.entry_variance_bound": "scalar",
    "sparsify.furedi_komlos_bound": "scalar",
    "sparsify.orthogonal_iteration": "host driver over a matmat callback",
    "kernels.resolve_kernel_params": "kernel name and parameters",
    "kernels.max_row_sqnorm": "scalar",
    "kernel_product.kernel_times_memory": "scalar (bytes)",
    "kernel_product.kernel_times_rows_footprint": "memory declaration (bytes)",
    "kernels.kernel_columns_footprint": "memory declaration (bytes)",
    "kernel_product.tile_buffer_bytes": "scalar (bytes)",
}


def _strict(a: np.ndarray) -> Any:
    return xps.asarray(a)


def _compare(got: Any, want: Any, tol: float) -> None:
    if isinstance(want, np.ndarray):
        assert not isinstance(got, np.ndarray), "a NumPy array came back for array-api-strict input"
        assert namespace(got) is xps, f"result of namespace {namespace(got)}, not the input's"
        host = to_host(got)
        assert host.shape == want.shape and host.dtype == want.dtype, (host.shape, host.dtype)
        np.testing.assert_allclose(host, want, rtol=tol, atol=tol)
    elif isinstance(want, tuple):
        assert isinstance(got, tuple) and len(got) == len(want)
        for g, w in zip(got, want, strict=True):
            _compare(g, w, tol)
    elif isinstance(want, float):
        assert got == pytest.approx(want, rel=tol)
    else:
        assert got == want


@pytest.mark.parametrize("case", [c for _, c in CASES], ids=[i for i, _ in CASES])
def test_kernel_runs_on_the_input_namespace(case: _Case) -> None:
    _, run, tol = case
    want = run(np.asarray)
    got = run(_strict)
    if isinstance(want, np.ndarray):
        assert want.size > 0
    _compare(got, want, tol)


def test_cases_exercise_a_result() -> None:
    # the oversized-row case must find the row on both namespaces (not two Nones)
    found = kernels.first_oversized_row(_strict(np.vstack((X, np.full((1, 10), 1e300)))))
    assert found is not None and found[0] == X.shape[0]


def test_oversized_row_small_rows_beside_a_huge_one() -> None:
    # scaled by a magnitude near float64's max, a normal row's squared norm underflows to 0:
    # its log must stay -inf (not be floored to a value that flags it as too large)
    block = np.vstack((X[:3], np.zeros((1, 10)), np.full((1, 10), 1e307)))
    want = kernels.first_oversized_row(block)
    got = kernels.first_oversized_row(_strict(block))
    assert want is not None and want[0] == 4
    assert got == want
    with pytest.raises(InputError) as err:
        kernels.check_row_magnitude(_strict(block), 50)
    assert "row 54 is too large" in str(err.value)


def test_check_row_magnitude_same_error() -> None:
    bad = X.copy()
    bad[11] = 1e300
    with pytest.raises(InputError) as on_numpy:
        kernels.check_row_magnitude(bad, 100)
    with pytest.raises(InputError) as on_strict:
        kernels.check_row_magnitude(_strict(bad), 100)
    assert "row 111" in str(on_numpy.value)
    assert str(on_strict.value) == str(on_numpy.value)


def test_rff_map_writes_into_out() -> None:
    W, b = rff.rff_operator(3, "rbf", 0.3, 10, 16)
    buf = xps.zeros((X.shape[0], 16), dtype=xps.float64)
    got = rff.rff_map(_strict(X), W, b, out=buf)
    assert got is buf
    np.testing.assert_allclose(to_host(buf), rff.rff_map(X, W, b), rtol=_F64, atol=_F64)


def test_mixed_namespaces_are_refused() -> None:
    with pytest.raises(InputError, match="different array libraries"):
        kernels.pairwise_kernel(_strict(X), B1, "rbf", gamma=0.3)


def test_every_public_function_is_covered() -> None:
    covered = {name for _, (name, _, _) in CASES}
    public = set()
    for mod in MODULES:
        short = mod.__name__.rsplit(".", 1)[-1]
        for name in mod.__all__:
            if inspect.isfunction(getattr(mod, name)):
                public.add(f"{short}.{name}")
    missing = public - covered - set(HOST)
    assert not missing, f"public functions without an array-api-strict case or a HOST reason: {missing}"
    assert not (covered & set(HOST)), covered & set(HOST)
    # no stale entries: every case and host entry names a public function
    assert covered | set(HOST) <= public, (covered | set(HOST)) - public
