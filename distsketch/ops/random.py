"""Counter-based randomness: every random quantity is a pure function of
``(seed, purpose, global index)``.

Two mechanisms cover all operators in the package:

* :func:`hash_uint64` / :func:`hash_uniform` — a stateless integer hash
  (SplitMix64 finaliser) of the global coordinate, keyed by the seed and a
  purpose string.  Used for CountSketch buckets and signs, per-row landmark
  priorities, Gram-entry sampling decisions, SRHT signs: anything indexed by
  one integer per draw.
* :func:`random_rows` — rows of a dense random matrix (Gaussian weights of a
  random-features map, say), one Philox stream per fixed tile of rows.

Notes
-----
Keys are derived with BLAKE2b from the seed and purpose, so different purposes
never share a stream.  The results depend only on NumPy's Philox and the hash
arithmetic, not on chunking, scheduler or worker count.
"""

from __future__ import annotations

import hashlib
from typing import Literal, cast

import numpy as np

from distsketch.errors import ConfigError

__all__ = [
    "TILE_ROWS",
    "hash_bucket",
    "hash_sign",
    "hash_uint64",
    "hash_uniform",
    "philox",
    "random_rows",
    "resolve_seed",
]

TILE_ROWS = 256


def resolve_seed(random_state: int | np.random.Generator | np.random.RandomState | None) -> int:
    """Turn a scikit-learn style ``random_state`` into a 63-bit integer seed.

    Parameters
    ----------
    random_state : int, Generator, RandomState or None
        ``None`` draws fresh entropy once; the result is stored on the fitted
        estimator so that the operator can be rebuilt on any worker.

    Returns
    -------
    int
        A non-negative seed below 2**63.

    Notes
    -----
    A ``Generator`` or ``RandomState`` is drawn from once, here; the estimator
    keeps the integer (``seed_``) and a saved model stores it in place of the
    generator object, so the loaded model refits to the same operator.
    """
    if random_state is None:
        return int(cast(int, np.random.SeedSequence().entropy) % (2**63))
    if isinstance(random_state, np.random.Generator):
        return int(random_state.integers(0, 2**63 - 1))
    if isinstance(random_state, np.random.RandomState):
        return int(random_state.randint(0, 2**31 - 1))
    if isinstance(random_state, (int, np.integer)) and not isinstance(random_state, bool):
        if random_state < 0:
            raise ConfigError(
                f"random_state={random_state} is negative; pass a non-negative integer seed."
            )
        return int(random_state) % (2**63)
    raise ConfigError(
        f"random_state must be None, an int, or a numpy Generator/RandomState; got "
        f"{type(random_state).__name__}."
    )


def _key(seed: int, purpose: str) -> tuple[int, int]:
    digest = hashlib.blake2b(f"{int(seed)}|{purpose}".encode(), digest_size=16).digest()
    return int.from_bytes(digest[:8], "little"), int.from_bytes(digest[8:], "little")


def philox(seed: int, purpose: str, stream: int = 0) -> np.random.Generator:
    """A NumPy generator for one independent stream of ``(seed, purpose)``.

    Parameters
    ----------
    seed : int
        The estimator's integer seed.
    purpose : str
        A name for what the numbers are for (``"rff.W"``, ``"kmeans.init"``);
        distinct purposes give independent streams.
    stream : int, default 0
        Stream number (a tile index); placed in the high word of the counter.
    """
    k0, k1 = _key(seed, purpose)
    bitgen = np.random.Philox(key=np.array([k0, k1], dtype=np.uint64),
                              counter=np.array([0, 0, 0, int(stream)], dtype=np.uint64))
    return np.random.Generator(bitgen)


def _splitmix(z: np.ndarray) -> np.ndarray:
    # SplitMix64 finaliser: a bijection on uint64 with full avalanche.
    z = z + np.uint64(0x9E3779B97F4A7C15)
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


def hash_uint64(seed: int, purpose: str, index: np.ndarray | int, *more: np.ndarray | int) -> np.ndarray:
    """Stateless 64-bit hash of one or more integer coordinates.

    Parameters
    ----------
    seed, purpose
        Key of the hash family.
    index, *more : array_like of int
        Global coordinates (broadcast together), e.g. a row number, or the
        pair ``(i, j)`` of a Gram entry.

    Returns
    -------
    ndarray of uint64
        Same broadcast shape as the coordinates.
    """
    k0, k1 = _key(seed, purpose)
    with np.errstate(over="ignore"):
        h = _splitmix(np.asarray(index).astype(np.uint64) ^ np.uint64(k0))
        for extra in more:
            h = _splitmix(h ^ (np.asarray(extra).astype(np.uint64) + np.uint64(k1)))
        return _splitmix(h ^ np.uint64(k1))


def hash_uniform(seed: int, purpose: str, index: np.ndarray | int, *more: np.ndarray | int) -> np.ndarray:
    """Uniform floats in [0, 1) from :func:`hash_uint64` (53 random bits)."""
    h = hash_uint64(seed, purpose, index, *more)
    return (h >> np.uint64(11)).astype(np.float64) * (1.0 / 9007199254740992.0)


def hash_bucket(seed: int, purpose: str, index: np.ndarray | int, n_buckets: int) -> np.ndarray:
    """Bucket numbers in ``[0, n_buckets)`` as int64 (for CountSketch's h)."""
    h = hash_uint64(seed, purpose, index)
    return (h % np.uint64(n_buckets)).astype(np.int64)


def hash_sign(seed: int, purpose: str, index: np.ndarray | int, dtype=np.float64) -> np.ndarray:
    """Random signs ±1 (for CountSketch's s, SRHT's D)."""
    h = hash_uint64(seed, purpose, index)
    return (1.0 - 2.0 * (h >> np.uint64(63)).astype(np.float64)).astype(dtype)


def random_rows(
    seed: int,
    purpose: str,
    start: int,
    stop: int,
    n_cols: int,
    *,
    kind: Literal["normal", "uniform", "rademacher", "cauchy"] = "normal",
    dtype=np.float64,
) -> np.ndarray:
    """Rows ``start:stop`` of a random matrix with ``n_cols`` columns.

    The matrix is conceptually infinite in rows; tile ``t`` (rows
    ``t*TILE_ROWS`` .. ``(t+1)*TILE_ROWS``) comes from Philox stream ``t``, so
    any slice is reproducible without generating the rows before it.

    Parameters
    ----------
    seed, purpose
        Key of the stream family.
    start, stop : int
        Global row range, ``0 <= start <= stop``.
    n_cols : int
        Number of columns.
    kind : {"normal", "uniform", "rademacher", "cauchy"}
        Distribution of the entries (standard parameters; "uniform" is [0, 1)).
    dtype : numpy dtype
        Output dtype; draws are made in float64 and cast.

    Returns
    -------
    ndarray of shape (stop - start, n_cols)
    """
    if start < 0 or stop < start:
        raise ConfigError(f"random_rows needs 0 <= start <= stop; got start={start}, stop={stop}.")
    out = np.empty((stop - start, n_cols), dtype=dtype)
    t0, t1 = start // TILE_ROWS, (stop - 1) // TILE_ROWS if stop > start else -1
    for t in range(t0, t1 + 1):
        g = philox(seed, purpose, t)
        shape = (TILE_ROWS, n_cols)
        if kind == "normal":
            tile: np.ndarray = g.standard_normal(shape)
        elif kind == "uniform":
            tile = g.random(shape)
        elif kind == "rademacher":
            tile = 1.0 - 2.0 * g.integers(0, 2, size=shape)
        elif kind == "cauchy":
            tile = g.standard_cauchy(shape)
        else:
            raise ConfigError(f"unknown random kind {kind!r}")
        lo = max(start, t * TILE_ROWS)
        hi = min(stop, (t + 1) * TILE_ROWS)
        out[lo - start: hi - start] = tile[lo - t * TILE_ROWS: hi - t * TILE_ROWS]
    return out
