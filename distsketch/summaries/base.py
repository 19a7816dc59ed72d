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

from abc import ABC, abstractmethod
from typing import Any

__all__ = ["Summary"]


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

    def __dask_tokenize__(self) -> Any:
        return (type(self).__qualname__, sorted(vars(self).items(), key=lambda kv: kv[0]))
