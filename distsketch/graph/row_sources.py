"""How to re-read the rows of a store with other row blocks: :class:`RowSource`.

A reader (``distsketch.io.open_array``) attaches a source to the array it returns
(:func:`attach_row_source`); the planner finds it (:func:`row_source_of`) and
re-reads the store at the planned size instead of slicing large blocks.  The
source is attached to the graph layer that names the array, so arrays derived
from it still reach it, and it lives exactly as long as their graphs; a pickled
graph carries none (:meth:`RowSource.__reduce__`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import dask.array as da

__all__ = ["RowSource", "attach_row_source", "detach_row_source", "row_source_of"]

# the attribute of the graph layer named after an array that holds its source
_LAYER_ATTRIBUTE = "distsketch_row_source"


def _left_out() -> None:
    return None  # what a pickled RowSource becomes


@dataclass(frozen=True)
class RowSource:
    """How to read the same rows of one store again with other row blocks.

    Attributes
    ----------
    reopen : callable
        ``reopen(block_rows)`` returns the same data (same rows, columns and
        dtype) as a dask array with blocks of ``block_rows`` rows.
    unit : int
        The store's chunk (or shard) rows: one read decodes at least one of these.
    where : str
        The store, as named in the planner's messages (``path::component``).
    row_bytes : int
        Bytes of one row of the array the source was attached to; the chunk
        check sizes the store's rows in the store's dtype, not in that of an
        array derived from it (a float64 copy of a float32 store would count twice).
    """

    reopen: Callable[[int], da.Array]
    unit: int
    where: str
    row_bytes: int

    def __post_init__(self) -> None:
        # a chunk is at least one row (a zero from an edited store would divide by zero)
        object.__setattr__(self, "unit", max(1, int(self.unit)))
        object.__setattr__(self, "row_bytes", max(1, int(self.row_bytes)))

    def read(self, block_rows: int) -> da.Array:
        """The rows again, in blocks of ``block_rows`` rows."""
        return self.reopen(int(block_rows))

    def derived(self, derive: Callable[[da.Array], da.Array], row_bytes: int) -> RowSource:
        """The source of ``derive(array)`` (rows of ``row_bytes``): re-read this store, then
        derive again."""
        reopen = self.reopen
        return RowSource(lambda rows: derive(reopen(rows)), self.unit, self.where, row_bytes)

    def __reduce__(self) -> tuple[Callable[[], None], tuple[()]]:
        # The graph layer holding a source is pickled with the graph when a computation
        # goes to a distributed scheduler; the source (a derive step may hold the
        # targets) is for planning on the client, so it is left out of that copy.
        return (_left_out, ())

    def __deepcopy__(self, memo: dict[int, Any]) -> RowSource:
        # immutable: a copied graph shares its source
        return self


def attach_row_source(X: da.Array, source: RowSource) -> da.Array:
    """Attach ``source`` to ``X`` (and so to every array derived from ``X``); returns ``X``.

    The graph layer named ``X.name`` holds it; without such a layer (or one that
    takes no attributes) ``X`` gets none, and the planner slices its blocks instead.
    """
    layer = X.dask.layers.get(X.name) if hasattr(X.dask, "layers") else None
    if layer is not None:
        try:
            setattr(layer, _LAYER_ATTRIBUTE, source)
        except AttributeError:  # a layer class with __slots__: no source, blocks are sliced
            pass
    return X


def detach_row_source(X: da.Array) -> None:
    """Drop the source :func:`attach_row_source` gave ``X`` (one that refers back to ``X``
    would otherwise keep it alive until the garbage collector runs)."""
    layer = X.dask.layers.get(X.name) if hasattr(X.dask, "layers") else None
    if layer is not None and getattr(layer, _LAYER_ATTRIBUTE, None) is not None:
        setattr(layer, _LAYER_ATTRIBUTE, None)


def row_source_of(X: Any, *, derived: bool = True) -> RowSource | None:
    """The :class:`RowSource` of ``X`` (only dask arrays have one), or None.

    With ``derived`` also that of an array ``X`` was derived from (the first in
    ``X``'s graph layers); without it only the one that re-reads ``X`` itself.
    """
    if not isinstance(X, da.Array) or not hasattr(X.dask, "layers"):
        return None
    layers = X.dask.layers
    own = getattr(layers.get(X.name), _LAYER_ATTRIBUTE, None)
    if own is not None or not derived:
        return own
    return next((src for layer in layers.values()
                 if (src := getattr(layer, _LAYER_ATTRIBUTE, None)) is not None), None)
