"""The memory declarations of the row maps in ``distsketch.ops``, against what the maps allocate.

Each ``*_footprint`` function states the memory of one task of its map
(float64 worst case, the input block included).  Here one call of the map on
a NumPy block is measured with ``tracemalloc`` (every NumPy allocation, not
the input, which exists before the call) and must stay within the
declaration; the declaration must not be wildly above what the task holds
(its input plus the peak), or the planner would cut needlessly small blocks.
The estimators must plan their blocks from these declarations: the
``task_bytes`` of the plan they apply is ``block_rows · per_row + fixed``.
"""

from __future__ import annotations

import tracemalloc
from collections.abc import Callable
from typing import Any

import dask.array as da
import numpy as np
import pytest

from distsketch.estimators.decomposition.kspace import KSpaceKernelPCA
from distsketch.estimators.decomposition.streaming_kpca import StreamingKernelPCA
from distsketch.estimators.features.dot_product import GaussianSketch
from distsketch.estimators.features.polynomial import PolySketch, TensorSketch
from distsketch.estimators.features.projection import DatabaseFriendlyProjection
from distsketch.estimators.features.rff import RandomFourierFeatures
from distsketch.estimators.sampling.rounding import RoundedExpansion
from distsketch.estimators.sampling.sparsified_kpca import SparsifiedKernelPCA
from distsketch.footprint import Footprint
from distsketch.graph import record_plans
from distsketch.ops import expansion, projection, rff, tensor_sketch

#: A map may allocate up to this much more than it declares: the declarations are
#: estimates (float64 worst case) and BLAS or FFT temporaries vary by library.
UNDER = 1.5
#: ... and declare at most this much more than its input block and peak together.
OVER = 10.0

N, D = 4000, 20
_rng = np.random.default_rng(0)
X = _rng.normal(size=(N, D))


def _peak(call: Callable[[], Any]) -> int:
    call()  # warm-up: cached operators and plans are not the task's memory
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        call()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def _declared(fp: Footprint, rows: int) -> float:
    return (fp.per_row or 0.0) * rows + fp.fixed


def _check(call: Callable[[], Any], fp: Footprint, rows: int, input_bytes: int) -> None:
    peak = _peak(call)
    declared = _declared(fp, rows)
    assert fp.per_row is not None and fp.per_row > 0
    assert peak <= UNDER * declared, (peak, declared)
    assert declared <= OVER * (peak + input_bytes), (peak, declared)


def _cases() -> list[tuple[str, Callable[[], Any], Footprint]]:
    m = 256
    W, b = rff.rff_operator(0, "rbf", 0.1, D, m)
    Wp, bp = rff.rff_operator(0, "rbf", 0.1, D, m, form="paired")
    C = projection.projection_matrix(0, D, 64).T.copy()
    P, shift = _rng.normal(size=(D, 16)), np.zeros(16)
    V = _rng.normal(size=(m, 8))
    S, coef = _rng.normal(size=(300, D)), _rng.normal(size=(300, 3))
    kw = {"kernel": "rbf", "params": {"gamma": 0.1}}
    return [
        ("rff_block", lambda: rff.rff_block(X, 0, W, b), rff.rff_map_footprint(D, m)),
        ("rff_block-paired", lambda: rff.rff_block(X, 0, Wp, bp), rff.rff_map_footprint(D, m)),
        ("projection_block", lambda: projection.projection_block(X, 0, C),
         projection.projection_map_footprint(D, 64)),
        ("affine_rows", lambda: projection.affine_rows(X, 0, P, shift),
         projection.affine_map_footprint(D, 16)),
        ("rff_embed", lambda: rff.rff_embed(X, 0, W, b, V), rff.rff_embed_footprint(D, m, 8, 8)),
        ("expansion_rows", lambda: expansion.expansion_rows(X, 0, S, coef, np.zeros(3), **kw),
         expansion.expansion_footprint(D, 3, 300)),
        ("centred_expansion_rows",
         lambda: expansion.centred_expansion_rows(X, 0, S, coef, np.zeros(3), **kw),
         expansion.expansion_footprint(D, 3, 300)),
    ]


@pytest.mark.parametrize("name, call, fp", _cases(), ids=[c[0] for c in _cases()])
def test_map_stays_within_its_declaration(name: str, call: Callable[[], Any], fp: Footprint) -> None:
    _check(call, fp, N, X.nbytes)


@pytest.mark.parametrize("make", [
    lambda: TensorSketch(n_components=128, degree=3, random_state=0),
    lambda: PolySketch(n_components=128, degree=3, random_state=0),
    lambda: GaussianSketch(n_components=128, gamma=0.01, random_state=0),
], ids=["TensorSketch", "PolySketch", "GaussianSketch"])
def test_sketch_map_stays_within_its_declaration(make: Callable[[], Any]) -> None:
    est = make().fit(X)
    fp = est._map_footprint()
    assert fp == tensor_sketch.sketch_map_footprint(
        D, getattr(est, "_padded_dim", 0), est._n_linear(), est.n_output_features_)
    _check(lambda: est._map_block(X, 0), fp, N, X.nbytes)


def test_sketch_declarations_compose() -> None:
    # the whole-row map is the combine stage's rows plus the FFT spectra, nothing else
    whole = tensor_sketch.sketch_map_footprint(30, 32, 200, 100)
    combine = tensor_sketch.sketch_combine_footprint(30, 32, 200, 100)
    assert whole.per_row == combine.per_row == 8.0 * (30 + 32 + 2 * 200 + 100)
    assert whole.fixed == 48.0 * tensor_sketch.FFT_ROWS * 100 and combine.fixed == 0.0
    assert tensor_sketch.sketch_linear_footprint(7, 200).per_row == 8.0 * (7 + 2 * 200)


def _task_bytes(fp: Footprint, rows: int) -> int:
    return int(rows * fp.per_row + fp.fixed)


def _plan(plans: list, name: str) -> Any:
    (plan,) = [p for p in plans if p.name == name]
    return plan


def test_feature_maps_plan_from_their_declarations() -> None:
    Xd = da.from_array(X, chunks=(700, D))
    cases = [
        (RandomFourierFeatures(n_components=64, random_state=0), "randomfourierfeatures",
         rff.rff_map_footprint(D, 64)),
        (DatabaseFriendlyProjection(n_components=12, random_state=0),
         "databasefriendlyprojection", projection.projection_map_footprint(D, 12)),
    ]
    for est, name, fp in cases:
        est.fit(X)
        with record_plans() as plans:
            est.transform(Xd)
        plan = _plan(plans, name)
        assert plan.task_bytes == _task_bytes(fp, plan.block_rows), (name, plan)
    ts = TensorSketch(n_components=64, degree=2, random_state=0).fit(X)
    with record_plans() as plans:
        ts.transform(Xd)
    plan = _plan(plans, "tensorsketch")
    assert plan.task_bytes == _task_bytes(
        tensor_sketch.sketch_map_footprint(D, 0, 2 * 64, 64), plan.block_rows)


def test_embeddings_plan_from_their_declarations() -> None:
    Xd = da.from_array(X, chunks=(700, D))
    sk = StreamingKernelPCA(n_components=3, n_random_features=50, random_state=0).fit(X[:500])
    with record_plans() as plans:
        sk.transform(Xd)
    plan = _plan(plans, "skpca-transform")
    assert plan.task_bytes == _task_bytes(rff.rff_embed_footprint(D, 50, 3, 8), plan.block_rows)

    kp = KSpaceKernelPCA(n_components=3, random_state=0).fit(X[:500])
    with record_plans() as plans:
        kp.transform(Xd)
    plan = _plan(plans, "kspace-project")
    assert plan.task_bytes == _task_bytes(
        projection.affine_map_footprint(kp.sketch_S_.n_output_features_, 3), plan.block_rows)


def test_expansions_plan_from_their_declarations() -> None:
    Xd = da.from_array(X, chunks=(700, D))
    support, coef = X[:200], _rng.normal(size=(200, 2))
    re = RoundedExpansion(budget=40, random_state=0).fit(support, coef)
    with record_plans() as plans:
        re.predict(Xd)
    plan = _plan(plans, "rounded-expansion")
    assert plan.task_bytes == _task_bytes(
        expansion.expansion_footprint(D, 2, re.n_evaluations_), plan.block_rows)

    sp = SparsifiedKernelPCA(n_components=3, p=0.5, random_state=0).fit(X[:300])
    with record_plans() as plans:
        sp.transform(Xd)
    plan = _plan(plans, "sparsified-kpca-transform")
    assert plan.task_bytes == _task_bytes(expansion.expansion_footprint(D, 3, 300), plan.block_rows)
