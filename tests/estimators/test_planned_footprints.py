"""The Nyström, MEKA and solver estimators plan each stage from its op's or summary's declaration.

Every applied plan is recorded (:func:`distsketch.graph.planner.record_plans`);
for each stage the projected task bytes are the declared ``per_row * rows +
fixed`` of what the stage runs, and a reduction's merge bytes are ``fan_in +
1`` declared states, so a change to a declaration reaches the planner and no
stage plans from figures of its own.  The declarations themselves are
measured in ``tests/ops/test_row_map_footprints.py`` and
``tests/summaries/test_summary_footprints.py``.
"""

from __future__ import annotations

import dask.array as da
import numpy as np
import pytest

from distsketch import MEKA, MEKAKernelRidge, NystromFeatures, NystromKernelPCA, NystromKernelRidge
from distsketch.estimators.kernel_params import median_gamma
from distsketch.estimators.nystrom.landmark_choice import fit_kmeans
from distsketch.estimators.solvers.solver import KernelSolver
from distsketch.footprint import Footprint
from distsketch.graph.planner import record_plans
from distsketch.ops.falkon import falkon_pass_footprint
from distsketch.ops.kernel_product import kernel_times_rows_footprint
from distsketch.ops.kernels import kernel_columns_footprint
from distsketch.ops.meka import basis_block_footprint, scattered_basis_footprint
from distsketch.ops.nystrom import (
    centred_nystrom_map_footprint,
    nystrom_gram_footprint,
    nystrom_map,
    nystrom_map_footprint,
)
from distsketch.summaries.covariance import Covariance
from distsketch.summaries.cross_product import CrossProduct
from distsketch.summaries.kmeans import KMeansStats
from distsketch.summaries.landmarks import ClusterLandmarks, UniformLandmarks
from distsketch.summaries.meka import Projection

RNG = np.random.default_rng(11)
XN = RNG.normal(size=(3000, 7))
Y = np.sin(XN[:, 0])
X = da.from_array(XN, chunks=(700, 7))  # several blocks: reductions merge
D = XN.shape[1]


def plans_of(run) -> dict:
    with record_plans() as plans:
        run()
    return {p.name: p for p in plans}


def check(plan, footprint: Footprint) -> None:
    assert plan.task_bytes == int(plan.block_rows * footprint.per_row + footprint.fixed), plan
    if footprint.state is not None:
        assert plan.merge_bytes == int((plan.fan_in + 1) * footprint.state), plan


def test_nystrom_features_plan_their_sample_and_map():
    est = NystromFeatures(n_landmarks=40, gamma=0.2, random_state=0)
    plans = plans_of(lambda: est.fit(X).transform(X))
    check(plans["landmarks"], UniformLandmarks(40, 0).footprint(D, 8))
    check(plans["nystromfeatures"],
          nystrom_map_footprint(D, est.normalization_.shape[0], est.n_output_features_))


def test_median_gamma_and_kmeans_plan_their_summaries():
    check(plans_of(lambda: median_gamma(X))["median-gamma-sample"],
          UniformLandmarks(1000, 0).footprint(D, 8))
    check(plans_of(lambda: fit_kmeans(X, 6, 0, sample_size=500, full_iter=1))["kmeans"],
          KMeansStats(6).footprint(D, 8))


def test_nystrom_kernel_pca_plans_its_gram_pass_and_projection():
    est = NystromKernelPCA(n_components=4, n_landmarks=30, random_state=0)
    plans = plans_of(lambda: est.fit(X).transform(X))
    c, r = est.normalization_.shape
    check(plans["nystrom-kpca"],
          Covariance(nystrom_map, n_columns=r).footprint(D, 8) + nystrom_gram_footprint(D, c, r))
    check(plans["nystrom-kpca-transform"], centred_nystrom_map_footprint(D, c, 4))


def test_meka_plans_its_samples_basis_and_projection():
    est = MEKA(n_clusters=3, rank=5, kmeans_sample=500, random_state=0)
    m, p = 2 * 5, 3 * 5  # per cluster: 2k landmarks and (1 + rho) k link rows (rho = 2)
    plans = plans_of(lambda: est.fit(X))
    check(plans["meka-samples"], ClusterLandmarks(3, [("a", m), ("b", p)], 0).footprint(D, 8))
    width = est.maps_.shape[2]
    check(plans_of(lambda: est.transform(X))["meka-transform"],
          scattered_basis_footprint(D, 3, m, width, int(est.ranks_.sum())))
    # fitted on dask rows, matvec recomputes the basis blockwise
    plans = plans_of(lambda: est.matvec(np.ones(XN.shape[0])))
    check(plans["meka-basis"], basis_block_footprint(D, 3, m, width))
    project = Projection(width, est.offsets_, est.ranks_)
    check(plans["meka-project"], project.footprint(width + 2, 8))  # [coordinates | v]


def test_nystrom_kernel_ridge_plans_its_passes_and_prediction():
    est = NystromKernelRidge(n_centers=50, gamma=0.5, alpha=1e-3, max_iter=2, random_state=0)
    plans = plans_of(lambda: est.fit(X, Y).predict(X))
    M = est.centers_.shape[0]
    check(plans["falkon-rhs"], falkon_pass_footprint(est.memory_plan_, M, 1))
    check(plans["falkon-pass"], falkon_pass_footprint(est.memory_plan_, M, 1))
    check(plans["falkon-predict"], kernel_times_rows_footprint(D, M, 1, est.kernel_name_))


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_kernel_solver_plans_its_nystrom_columns():
    est = KernelSolver(preconditioner="nystrom", preconditioner_size=30, max_iter=1, tol=1e-2,
                       block_rows=500, random_state=0)
    plans = plans_of(lambda: est.fit(XN[:1000], Y[:1000]))
    check(plans["solver-knm"], kernel_columns_footprint(D, 30))
    check(plans["solver-landmarks"], UniformLandmarks(30, 0).footprint(D, 8))


def test_meka_kernel_ridge_holds_its_merges_to_the_cross_product_state():
    est = MEKAKernelRidge(meka=MEKA(n_clusters=3, rank=4, kmeans_sample=500), random_state=0)
    plans = plans_of(lambda: est.fit(X, Y))
    k = int(est.meka_.ranks_.sum())
    gram = plans["meka-krr-gram"]  # Wᵀ [W | y] over blocks of [W | W | y]
    assert gram.merge_bytes == int((gram.fan_in + 1) * CrossProduct(k + 1).footprint(2 * k + 1, 8).state)
    assert gram.merge_bytes == (gram.fan_in + 1) * 8 * k * (k + 1)
