"""The mergeable-summary protocol.

A summary turns a row block into a small state and merges states::

    state = summary.chunk(block, row_offset, *operands)
    state = summary.merge([state_a, state_b, ...])     # associative
    result = summary.finalize(state)

States are bounded (their size does not grow with n), picklable and
serialisable, so they can be tree-reduced by
:func:`distsketch.graph.tree_reduce`, stored in a model, and merged with the
state of later rows (``partial_fit``).
"""

from __future__ import annotations

import inspect
from abc import ABC, abstractmethod
from typing import Any

from distsketch.footprint import Footprint

__all__ = ["Summary", "takes_out"]


def takes_out(fn: Any) -> bool:
    """Whether the row map ``fn(block, row_offset, *operands)`` also takes ``out=``.

    Summaries that map a block slice by slice pass ``out=`` (a buffer made
    once per block) to such a map, so a worker does not map fresh pages for
    every slice's features.

    Parameters
    ----------
    fn : callable
        The row map.  Its ``accepts_out`` attribute decides where it has one (a
        wrapper says whether the map it wraps takes ``out=``); otherwise its
        signature must name a parameter ``out``.
    """
    flag = getattr(fn, "accepts_out", None)
    if flag is not None:
        return bool(flag)
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False
    out = params.get("out")
    return out is not None and out.kind in (inspect.Parameter.POSITIONAL_OR_KEYWORD,
                                            inspect.Parameter.KEYWORD_ONLY)


class Summary(ABC):
    """Base class of mergeable summaries.

    Subclasses are small, picklable parameter holders; all data lives in the
    states they return.
    """

    @abstractmethod
    def chunk(self, block: Any, row_offset: int, *operands: Any) -> Any:
        """Summarise one row block whose first row has global index ``row_offset``."""

    @abstractmethod
    def merge(self, states: list[Any]) -> Any:
        """Merge a non-empty list of states into one (associative)."""

    def finalize(self, state: Any) -> Any:
        """Turn a merged state into the result (default: the state itself)."""
        return state

    def empty(self) -> Any:
        """The identity state (merging it changes nothing), if the summary has one."""
        raise NotImplementedError

    def footprint(self, n_features: int, itemsize: int) -> Footprint:
        """Memory of one chunk task and of one state, for input rows of ``n_features`` values.

        The planner sizes blocks and merge fan-ins from it
        (:func:`~distsketch.graph.reduce_blocks`).  The default declares
        nothing (a multiple of the input row, a negligible state); a summary
        whose chunk allocates more than its input, or whose state is large,
        states both here, next to the code that allocates them.
        """
        return Footprint()

    def __dask_tokenize__(self) -> Any:
        return (type(self).__qualname__, sorted(vars(self).items(), key=lambda kv: kv[0]))
