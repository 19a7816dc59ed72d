"""The row sample of a standardising kernel ridge fit, read before its only pass.

The column means and scales, and the rows on which leave-one-out chooses the default
map's gamma (or the median heuristic a map's ``gamma="median"``), are needed *before*
the pass that reduces ``ZᵀZ``.  They come from one sample whose rows are chosen from the
number of rows alone (:func:`default_sample_index`), so it is the same whatever the
chunking, the scheduler or the device; reading it touches only the chunks that hold
those rows (:func:`~distsketch.graph.gather_rows`).

* **Size** (:func:`default_sample_size`): ``min(n, max(MIN_SAMPLE_ROWS,
  ⌈SAMPLE_FRACTION · n⌉))``, at most :data:`SAMPLE_BYTES` of float64 rows
  (and never under the 1000 rows of the leave-one-out).  An input of at most
  :data:`MIN_SAMPLE_ROWS` rows is sampled whole: its statistics are exact.
* **Shape**: :data:`SAMPLE_STRIPS` whole strips of consecutive rows, chosen
  by ``hash(0, strip number)``
  (:func:`~distsketch.estimators.kernel_params.strip_sample_index`): a store
  is read in chunks, so a uniform sample of thousands of single rows would
  touch every chunk of most stores; a strip touches one or two.  Strips of
  neighbouring rows are a less spread sample than single rows on a table
  sorted by some column, hence 32 of them, spread by the hash.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from distsketch.estimators.kernel_params import median_sampler, strip_sample_index
from distsketch.graph import gather_rows
from distsketch.summaries.moments import ColumnMoments, column_scale

__all__ = ["LOO_ROWS", "MIN_SAMPLE_ROWS", "SAMPLE_BYTES", "SAMPLE_FRACTION", "SAMPLE_STRIPS",
           "default_sample", "default_sample_index", "default_sample_size", "loo_sample",
           "sample_scale"]

#: rows of the smallest sample; an input of at most this many rows is sampled whole
MIN_SAMPLE_ROWS = 8192

#: share of the rows sampled from a larger input (up to :data:`SAMPLE_BYTES`)
SAMPLE_FRACTION = 0.02

#: most bytes of the float64 sample rows held on the client (256 MiB)
SAMPLE_BYTES = 256 * 2**20

#: number of strips of consecutive rows the sample is made of
SAMPLE_STRIPS = 32

#: rows of the leave-one-out sample (those of the median heuristic's sampler)
LOO_ROWS = median_sampler().n_samples


def default_sample_size(n_rows: int, n_features: int) -> int:
    """Rows of the default fit's sample (see the module docstring)."""
    n = int(n_rows)
    cap = max(LOO_ROWS, SAMPLE_BYTES // (8 * max(1, int(n_features))))
    share = max(MIN_SAMPLE_ROWS, int(np.ceil(SAMPLE_FRACTION * n)))
    return min(n, max(LOO_ROWS, min(cap, share)))


def default_sample_index(n_rows: int, n_features: int) -> np.ndarray:
    """Sorted row indices of the default fit's sample, from the input's shape alone."""
    k = default_sample_size(n_rows, n_features)
    strip = max(1, -(-k // SAMPLE_STRIPS))
    return strip_sample_index(int(n_rows), k, 0, strip)


def default_sample(X: Any) -> tuple[np.ndarray, np.ndarray]:
    """``(index, rows)`` of the default fit's sample of X: host int64 indices, float64 rows."""
    index = default_sample_index(int(X.shape[0]), int(X.shape[1]))
    return index, gather_rows(X, index, name="ridge-sample")


def sample_scale(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Column ``(mean, scale)`` of sample rows: population standard deviations, 1 where constant."""
    mean, scale = column_scale(ColumnMoments().chunk(np.asarray(rows, dtype=np.float64), 0))
    return np.asarray(mean, dtype=np.float64), np.asarray(scale, dtype=np.float64)


def loo_sample(index: np.ndarray, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The sample's rows for leave-one-out: its :data:`LOO_ROWS` of smallest priority.

    Priorities are those of :func:`~distsketch.estimators.kernel_params.median_sampler`
    (``hash(0, "metrics.sample", row)``), so where the sample is every row
    these are the rows a sampling pass would keep.  Returns ``(index, rows)``
    sorted by index.
    """
    sampler = median_sampler()
    return sampler.finalize(sampler.state_of(index, rows))
