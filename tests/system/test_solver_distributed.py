"""System test: the exact kernel solver on a real distributed LocalCluster reading X from Zarr."""

import numpy as np
import pytest
import scipy.linalg as sla

from distsketch import MEKA, KernelSolver, MEKAKernelRidge, write_array
from distsketch.ops.kernels import pairwise_kernel

distributed = pytest.importorskip("distributed")


@pytest.mark.timeout(120)
def test_kernel_solver_on_local_cluster_from_zarr(tmp_path):
    rng = np.random.default_rng(0)
    n = 400
    X = rng.normal(size=(n, 4)).astype(np.float64)
    y = np.sin(X[:, 0]) + 0.1 * rng.normal(size=n)
    path = write_array(X, tmp_path / "X.zarr", chunk_rows=100)
    lam = 0.1
    ref = sla.solve(pairwise_kernel(X, X, "rbf", gamma=0.3) + lam * np.eye(n), y, assume_a="pos")
    Xt = rng.normal(size=(40, 4))
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=":0") as cluster, \
            distributed.Client(cluster) as client:
        s = KernelSolver(gamma=0.3, alpha=lam, preconditioner="nystrom", preconditioner_size=100,
                         tol=1e-9, block_rows=200, random_state=0).fit(str(path), y)
        pred = s.predict(Xt)
        # the factored MEKA solve (two tree-reduced passes) on the same cluster and store
        mk = MEKAKernelRidge(meka=MEKA(n_clusters=3, rank=10, gamma=0.5, random_state=0),
                             alpha=0.05).fit(str(path), y)
        mk_pred = np.asarray(mk.predict(Xt))
        # the tile tasks ran on the cluster (the scheduler saw them)
        tasks = client.run_on_scheduler(lambda dask_scheduler: sum(
            1 for key in dask_scheduler.task_prefixes if "kernel-matvec" in str(key)))
    assert tasks > 0
    assert s.X_path_ == str(path) and s.X_fit_ is None
    assert s.converged_
    np.testing.assert_allclose(s.dual_coef_, ref, rtol=1e-7, atol=1e-8 * np.abs(ref).max())
    Kt = pairwise_kernel(Xt, X, "rbf", gamma=0.3)
    np.testing.assert_allclose(pred, Kt @ ref, rtol=1e-7, atol=1e-9)
    # the same MEKA model fitted in memory on the local threads: one answer
    local = MEKAKernelRidge(meka=MEKA(n_clusters=3, rank=10, gamma=0.5, random_state=0),
                            alpha=0.05).fit(X, y)
    np.testing.assert_allclose(mk.dual_coef_, local.dual_coef_, rtol=1e-9,
                               atol=1e-10 * np.abs(local.dual_coef_).max())
    np.testing.assert_allclose(mk_pred, local.predict(Xt), rtol=1e-9, atol=1e-10)
