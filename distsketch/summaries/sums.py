"""States merged by addition: the one merge of every sum-like summary.

Covariance-like states (ZᵀZ, Zᵀy, column sums, row counts, k-means sums and
counts, MEKA projections, ...) are nested dicts, lists and arrays whose merge
adds matching leaves.  :func:`sum_states` does that as a left fold
(``((s₀ + s₁) + s₂) + …``), so a merge's rounding depends only on the order of
its inputs; :class:`SumMerge` makes it a summary's ``merge``, and
:class:`SumSummary` is a whole summary from a chunk function.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from distsketch.ops.namespace import asarray, copy_array
from distsketch.summaries.base import Summary

__all__ = ["SumMerge", "SumSummary", "add_states", "sum_states"]


def add_states(a: Any, b: Any) -> Any:
    """``a + b`` leaf by leaf for nested dicts, lists and tuples of arrays/numbers.

    Dicts must have the same keys and sequences the same lengths; leaves
    broadcast as NumPy does (an identity state of zeros may be narrower).  A
    host NumPy leaf added to a leaf of another namespace (a CuPy state) moves to
    that leaf's device first.
    """
    if isinstance(a, dict):
        return {k: add_states(v, b[k]) for k, v in a.items()}
    if isinstance(a, (list, tuple)):
        return type(a)(add_states(u, v) for u, v in zip(a, b, strict=True))
    if isinstance(a, np.ndarray) != isinstance(b, np.ndarray) and _is_array(a) and _is_array(b):
        a, b = (asarray(a, like=b), b) if isinstance(a, np.ndarray) else (a, asarray(b, like=a))
    return a + b


def _is_array(x: Any) -> bool:
    # NumPy, CuPy, array-api-strict arrays; not NumPy scalars or SciPy sparse matrices
    return hasattr(x, "__array_namespace__") and not isinstance(x, np.generic)


def _copy(state: Any) -> Any:
    # a merged state must never alias an input, whose owner may keep using it
    if isinstance(state, dict):
        return {k: _copy(v) for k, v in state.items()}
    if isinstance(state, (list, tuple)):
        return type(state)(_copy(v) for v in state)
    if isinstance(state, np.ndarray):
        return state.copy()
    return copy_array(state) if _is_array(state) else state


def sum_states(states: list[Any]) -> Any:
    """Left-fold sum of a non-empty list of states (see :func:`add_states`).

    Notes
    -----
    Cost: one addition per state element per input state; memory: one state
    besides the inputs.  Exact for integers; for floats the result depends on
    the order of ``states`` only (no pairwise or blocked summation).
    """
    out = _copy(states[0])
    for s in states[1:]:
        out = add_states(out, s)
    return out


class SumMerge:
    """Mixin: ``merge`` adds states leaf by leaf (:func:`sum_states`)."""

    def merge(self, states: list[Any]) -> Any:
        return sum_states(states)


class SumSummary(SumMerge, Summary):
    """A summary whose state is ``chunk_fn(block, row_offset, *operands)``, merged by addition.

    Parameters
    ----------
    chunk_fn : callable
        Picklable ``(block, row_offset, *operands) -> state``; the state is a
        nested dict/list of arrays and numbers.

    Notes
    -----
    State size and chunk cost are those of ``chunk_fn``; merge is exact for
    integers and associative up to floating-point rounding order.
    """

    def __init__(self, chunk_fn: Callable[..., Any]):
        self.chunk_fn = chunk_fn

    def chunk(self, block: Any, row_offset: int, *operands: Any) -> Any:
        return self.chunk_fn(block, row_offset, *operands)
