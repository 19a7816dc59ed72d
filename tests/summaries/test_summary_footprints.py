"""The memory declarations of the summaries (``Summary.footprint``), against what they hold.

One ``chunk`` call on a NumPy block is measured with ``tracemalloc`` and must
stay within the declared ``per_row · rows + fixed`` (a summary whose chunk
maps the rows itself also holds the map's operator, declared by its op); the
declared ``state`` must be the size of the state ``chunk`` returns (or, for
Frequent Directions, the sketch and its share of a merge's buffer).  The
estimators holding these summaries must plan from the declarations.
"""

from __future__ import annotations

import tracemalloc
from collections.abc import Callable
from typing import Any

import dask.array as da
import numpy as np
import pytest

from distsketch.estimators.decomposition.frequent_directions import FrequentDirections
from distsketch.estimators.decomposition.kspace import KernelPCR, KSpaceKernelPCA
from distsketch.estimators.decomposition.streaming_kpca import StreamingKernelPCA
from distsketch.estimators.features.dot_product import GaussianSketch
from distsketch.estimators.features.polynomial import TensorSketch
from distsketch.estimators.sampling.sparsified import SparsifiedGram
from distsketch.footprint import Footprint
from distsketch.graph import record_plans
from distsketch.ops.fd import fd_covariance_bytes
from distsketch.ops.rff import rff_operands_footprint, rff_operator
from distsketch.summaries.covariance import Covariance
from distsketch.summaries.dot_product import GaussianStats
from distsketch.summaries.frequent_directions import FrequentDirectionsSummary
from distsketch.summaries.kspace import SketchGram
from distsketch.summaries.rff_covariance import MAP_ROWS, BlockedCovariance, RFFRows
from distsketch.summaries.sparsified import StripSummary

#: A chunk may allocate up to this much more than it declares (float64 worst-case
#: estimates; GaussianStats' special-function temporaries sit at about 1.3x).
UNDER = 1.5
#: ... and declare at most this much more than its input block and peak together.
OVER = 10.0

N, D, M = 4000, 20, 256
_rng = np.random.default_rng(1)
X = _rng.normal(size=(N, D))
W, B = rff_operator(0, "rbf", 0.1, D, M)


def _peak(call: Callable[[], Any]) -> tuple[int, Any]:
    call()
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        out = call()
        return tracemalloc.get_traced_memory()[1], out
    finally:
        tracemalloc.stop()


def _nbytes(state: Any) -> int:
    if isinstance(state, dict):
        return sum(_nbytes(v) for v in state.values())
    return int(getattr(state, "nbytes", 0))


def _sketch_gram() -> tuple[SketchGram, tuple]:
    s = TensorSketch(n_components=32, degree=2, random_state=0).fit(X[:10])
    t = TensorSketch(n_components=12, degree=2, random_state=1).fit(X[:10])
    return SketchGram(s._map_block, t._map_block, n_s=32, n_t=12, degree=2), ()


CASES: list[tuple[str, Callable[[], tuple[Any, tuple]], Footprint]] = [
    ("fd-rff", lambda: (FrequentDirectionsSummary(16, transform=RFFRows(), n_columns=M,
                                                  map_rows=MAP_ROWS), (W, B)),
     rff_operands_footprint(D, M)),
    ("fd-identity", lambda: (FrequentDirectionsSummary(16), ()), Footprint()),
    ("blocked-covariance", lambda: (BlockedCovariance(transform=RFFRows(), n_columns=M), (W, B)),
     rff_operands_footprint(D, M)),
    ("sketch-gram", _sketch_gram, Footprint()),
    ("gaussian-stats", lambda: (GaussianStats(0.1, 10), (np.zeros(D),)), Footprint()),
    ("strip", lambda: (StripSummary("rbf", {"gamma": 0.1}, 0, 0.3, False, None, 0, N,
                                    strip_rows=256), (X[:256],)), Footprint()),
]


@pytest.mark.parametrize("name, make, operands_fp", CASES, ids=[c[0] for c in CASES])
def test_chunk_stays_within_its_declaration(name: str, make: Callable[[], tuple[Any, tuple]],
                                            operands_fp: Footprint) -> None:
    summary, operands = make()
    fp = summary.footprint(D, 8) + operands_fp
    peak, state = _peak(lambda: summary.chunk(X, 0, *operands))
    declared = fp.per_row * N + fp.fixed
    assert peak <= UNDER * declared, (peak, declared)
    assert declared <= OVER * (peak + X.nbytes), (peak, declared)
    if fp.state is not None:
        # the state as returned (float64 leaves; the row count is a Python int)
        assert _nbytes(state) <= fp.state <= 2 * _nbytes(state) + 64, (_nbytes(state), fp.state)


def test_covariance_state_is_declared_exactly() -> None:
    t = 3
    cov = Covariance(n_targets=t)
    state = cov.chunk(np.hstack([X, _rng.normal(size=(N, t))]), 0)
    fp = cov.footprint(D + t, 8)
    assert fp.per_row is None and fp.fixed == 0.0
    assert fp.state == _nbytes(state)
    # a transform of unknown width declares nothing
    assert Covariance(transform=RFFRows()).footprint(D, 8) == Footprint()
    assert Covariance(transform=RFFRows(), n_columns=M).footprint(D, 8).state == 8 * (M * M + M)


def test_undeclared_widths_declare_nothing() -> None:
    assert FrequentDirectionsSummary(8, transform=RFFRows()).footprint(D, 8) == Footprint()
    assert BlockedCovariance(transform=RFFRows()).footprint(D, 8) == Footprint()
    assert SketchGram(None, None).footprint(D, 8) == Footprint()
    assert StripSummary("rbf", {}, 0, 0.5, False, None, 0, 10).footprint(D, 8) == Footprint()


def test_fd_declaration_follows_feature_precision() -> None:
    # float32 input: the mapped features are float32; other dtypes map to float64
    s = FrequentDirectionsSummary(16, transform=RFFRows(), n_columns=M, map_rows=MAP_ROWS)
    f32, f64, i16 = s.footprint(D, 4), s.footprint(D, 8), s.footprint(D, 2)
    assert f64.fixed - f32.fixed == s.map_rows * M * 4
    assert i16.fixed == f64.fixed and i16.per_row == D * 2
    ident = FrequentDirectionsSummary(16).footprint(D, 4)
    assert ident.fixed == (s.map_rows * D * (4 + 8) + 4 * 16 * D * 8 + 8 * 32 ** 2
                           + fd_covariance_bytes(D))
    assert ident.state == 8 * 2 * 16 * D


def _plan(plans: list, name: str) -> Any:
    (plan,) = [p for p in plans if p.name == name]
    return plan


def _expect(plan: Any, fp: Footprint) -> None:
    if fp.per_row is not None:  # else the planner's own input-row default
        assert plan.task_bytes == int(plan.block_rows * fp.per_row + fp.fixed), (plan, fp)
    if fp.state is not None:
        assert plan.merge_bytes == int((plan.fan_in + 1) * fp.state), (plan, fp)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_reductions_plan_from_their_declarations(dtype: Any) -> None:
    A = X.astype(dtype)
    Ad = da.from_array(A, chunks=(700, D))
    itemsize = np.dtype(dtype).itemsize

    with record_plans() as plans:
        FrequentDirections(sketch_size=10).fit(Ad)
    _expect(_plan(plans, "frequent-directions"), FrequentDirectionsSummary(10).footprint(D, itemsize))

    for method in ("fd", "rnca"):
        est = StreamingKernelPCA(n_components=3, sketch_size=16, n_random_features=60,
                                 method=method, random_state=0)
        with record_plans() as plans:
            est.fit(Ad)
        _expect(_plan(plans, f"skpca-{method}"),
                est._summary().footprint(D, itemsize) + rff_operands_footprint(D, 60))

    g = GaussianSketch(n_components=32, gamma=0.01, random_state=0)
    with record_plans() as plans:
        g.fit(Ad)
    # the radius pass runs before the degree is known: at the estimator's own cap
    _expect(_plan(plans, "gaussian-radius"), GaussianStats(0.01, g._max_degree).footprint(D, itemsize))


def test_kspace_and_sparsified_plan_from_their_declarations() -> None:
    Ad = da.from_array(X[:1200], chunks=(300, D))
    kp = KSpaceKernelPCA(n_components=3, random_state=0)
    with record_plans() as plans:
        kp.fit(Ad)
    m, r = kp.sketch_S_.n_output_features_, kp.sketch_T_.n_output_features_
    _expect(_plan(plans, "kspace-gram"),
            SketchGram(None, None, n_s=m, n_t=r, degree=kp.degree).footprint(D, 8))

    y = _rng.normal(size=(1200, 2))
    pcr = KernelPCR(n_components=3, random_state=0)
    with record_plans() as plans:
        pcr.fit(Ad, y)
    _expect(_plan(plans, "kernelpcr-normal"), Covariance(n_targets=2).footprint(3 + 2, 8))

    with record_plans() as plans:
        SparsifiedGram(p=0.5, kernel="rbf", tile_rows=400, random_state=0).fit(Ad)
    strips = [p for p in plans if p.name == "sparsified-gram-strip"]
    assert len(strips) == 3
    fp = StripSummary("rbf", {}, 0, 0.5, False, None, 0, 1200, strip_rows=400).footprint(D, 8)
    for plan in strips:
        _expect(plan, fp)
