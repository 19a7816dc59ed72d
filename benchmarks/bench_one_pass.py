"""The passes of issue 38 on CPU: the default ridge fit's reads, and FD's two states.

One command::

    python benchmarks/bench_one_pass.py [--rows 100000] [--fd-rows 200000] [--falkon-rows 200000]

* **Default fit from a store** — ``SketchedKernelRidge(random_state=0)`` fitted
  from a ``rows × 100`` float32 Zarr store (chunks of 6 250 and 1 000 rows) on
  one worker thread: fit seconds, the chunk reads of the fit counted at the
  store (each chunk once in the ridge pass, plus the chunks of the row sample
  read first), and the alpha chosen.
* **Frequent Directions state** — ``StreamingKernelPCA(method="fd")`` on
  ``fd_rows × 20`` float32 rows in 25 000-row dask blocks, m = 512, ℓ = 64,
  with ``state="sketch"`` (the streaming sketch, an eigendecomposition per
  merge) and ``state="covariance"`` (ZᵀZ summed exactly, shrunk once): fit
  seconds and the spectral error ``‖ZᵀZ − BᵀB‖₂ / ‖Z‖_F²`` of each, beside
  ``λ_ℓ(ZᵀZ) / ‖Z‖_F²``, the covariance state's error by construction.
* **Falkon's rows held** — ``NystromKernelRidge(n_centers=500, gamma=0.05,
  alpha=1e-6)`` fitted from a ``falkon_rows × 20`` float32 store (10 000-row
  chunks) with the dask config ``distsketch.cache-rows`` ``"off"`` (every CG
  pass reads the store) and ``"auto"`` (read once, held in memory): fit
  seconds, CG passes and the chunk reads, and whether the two fits' ``coef_``
  are bitwise equal.

Prints one line per measurement; numbers belong in ``benchmarks/RESULTS.md``
with the machine they ran on.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

import dask
import numpy as np
from zarr.storage import LocalStore

import distsketch as ds
from distsketch.graph import as_dask
from distsketch.io import open_array, write_array


class _CountedReads:
    """Chunk reads of local Zarr stores, counted where zarr fetches a key."""

    def __init__(self) -> None:
        self.keys: Counter = Counter()
        self._real = LocalStore.get

    def __enter__(self) -> _CountedReads:
        real, keys = self._real, self.keys

        async def counted(store: Any, key: str, *args: Any, **kwargs: Any) -> Any:
            keys[key] += 1
            return await real(store, key, *args, **kwargs)

        LocalStore.get = counted  # type: ignore[method-assign]
        return self

    def __exit__(self, *exc: object) -> None:
        LocalStore.get = self._real  # type: ignore[method-assign]

    def chunks(self) -> Counter:
        return Counter(v for k, v in self.keys.items() if "/c/" in k)


def default_fit_from_store(rows: int, root: Path) -> None:
    rng = np.random.default_rng(0)
    X = (rng.normal(size=(rows, 100)) * rng.uniform(0.5, 3, 100)
         + rng.normal(size=100)).astype(np.float32)
    y = np.sin(X[:, 0]) + 0.1 * X[:, 1]
    for chunk in (6250, 1000):
        path = root / f"x{chunk}.zarr"
        write_array(X, str(path), chunk_rows=chunk)
        Xs = open_array(str(path))
        with dask.config.set(scheduler="threads", num_workers=1), _CountedReads() as reads:
            t = time.perf_counter()
            model = ds.SketchedKernelRidge(random_state=0).fit(Xs, y)
            sec = time.perf_counter() - t
        times = dict(sorted(reads.chunks().items()))  # {reads of a chunk: how many chunks}
        print(f"default fit, {rows} x 100 float32 store in chunks of {chunk} rows "
              f"({-(-rows // chunk)} chunks), one thread: {sec:.2f} s "
              f"({rows / sec / 1e3:.1f} k rows/s); chunks read once/twice/...: {times}; "
              f"alpha {model.alpha_:.3g}, gamma {model.gamma_:.3g}", flush=True)


def fd_states(rows: int) -> None:
    n, d, m, ell = rows, 20, 512, 64
    X = np.random.default_rng(0).normal(size=(n, d)).astype(np.float32)
    Xd = as_dask(X, 25_000)
    fitted = {}
    for state in ("sketch", "covariance"):
        est = ds.StreamingKernelPCA(n_components=10, n_random_features=m, sketch_size=ell,
                                    gamma=0.05, random_state=0, state=state)
        t = time.perf_counter()
        est.fit(Xd)
        fitted[state] = (time.perf_counter() - t, est)
    Z = np.asarray(fitted["sketch"][1].features_.transform(X), dtype=np.float64)
    C = Z.T @ Z
    total = float(np.trace(C))
    lam = np.linalg.eigvalsh(C)[::-1]
    for state, (sec, est) in fitted.items():
        B = est.sketch_
        err = np.linalg.norm(C - B.T @ B, 2) / total
        print(f"FD state={state:10s} n={n} m={m} l={ell}: fit {sec:.2f} s "
              f"({n / sec / 1e6:.2f} M rows/s), ||ZtZ - BtB||_2 / ||Z||_F^2 = {err:.3e}",
              flush=True)
    print(f"lambda_l(ZtZ) / ||Z||_F^2 = {lam[ell - 1] / total:.3e}")


def falkon_cache(rows: int, root: Path) -> None:
    rng = np.random.default_rng(1)
    X = rng.normal(size=(rows, 20)).astype(np.float32)
    y = np.sin(X[:, 0]) + 0.5 * X[:, 1] * X[:, 2] + 0.1 * rng.normal(size=rows)
    path = root / "falkon.zarr"
    write_array(X, str(path), chunk_rows=10_000)
    coefs = {}
    for setting in ("off", "auto"):
        with dask.config.set({"distsketch.cache-rows": setting}), _CountedReads() as reads:
            t = time.perf_counter()
            model = ds.NystromKernelRidge(n_centers=500, gamma=0.05, alpha=1e-6, tol=1e-6,
                                          random_state=0).fit(open_array(str(path)), y)
            sec = time.perf_counter() - t
        coefs[setting] = model.coef_
        times = dict(sorted(reads.chunks().items()))
        print(f"Falkon M=500, {rows} x 20 float32 store, cache-rows={setting}: {sec:.2f} s, "
              f"{model.n_iter_} CG passes; chunks read once/twice/...: {times}", flush=True)
    print(f"Falkon coef_ bitwise equal with and without held rows: "
          f"{np.array_equal(coefs['off'], coefs['auto'])}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=100_000, help="rows of the ridge store")
    parser.add_argument("--fd-rows", type=int, default=200_000, help="rows of the FD fits")
    parser.add_argument("--falkon-rows", type=int, default=200_000,
                        help="rows of the Falkon store")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        default_fit_from_store(args.rows, Path(tmp))
        falkon_cache(args.falkon_rows, Path(tmp))
    fd_states(args.fd_rows)


if __name__ == "__main__":
    main()
