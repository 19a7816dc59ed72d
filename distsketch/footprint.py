"""What one task of a stage holds in memory, declared by the op or summary it runs.

The planner (:mod:`distsketch.graph`) sizes row blocks and merge fan-ins from a
:class:`Footprint`; the ops (:mod:`distsketch.ops`) and summaries
(:mod:`distsketch.summaries`) declare theirs next to the code that allocates
the memory, so an estimator names *what* runs and never does byte arithmetic.
A device engine sizes its blocks from the same declarations.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Footprint"]


@dataclass(frozen=True)
class Footprint:
    """Memory of one task of a stage, in bytes.

    Parameters
    ----------
    per_row : float or None, default None
        Working memory per input row (the row, its outputs, temporaries).
        ``None``: unknown, the planner assumes a multiple of the input row.
    fixed : float, default 0
        Memory of a task independent of its rows (operands, workspaces).
    state : float or None, default None
        Size of one reduction state; merge tasks hold ``fan_in + 1`` of them.
        ``None`` for maps and for reductions of negligible state.

    Examples
    --------
    >>> Footprint(per_row=800.0, fixed=1e6) + Footprint(per_row=80.0)
    Footprint(per_row=880.0, fixed=1000000.0, state=None)
    """

    per_row: float | None = None
    fixed: float = 0.0
    state: float | None = None

    def __post_init__(self) -> None:
        # one representation: floats (declarations compute with ints)
        object.__setattr__(self, "per_row", None if self.per_row is None else float(self.per_row))
        object.__setattr__(self, "fixed", float(self.fixed))
        object.__setattr__(self, "state", None if self.state is None else float(self.state))

    def __add__(self, other: Footprint) -> Footprint:
        """Two pieces of work held by one task at once (a map and the state it feeds)."""
        if not isinstance(other, Footprint):
            return NotImplemented
        per_row = (None if self.per_row is None and other.per_row is None
                   else (self.per_row or 0.0) + (other.per_row or 0.0))
        state = (None if self.state is None and other.state is None
                 else (self.state or 0.0) + (other.state or 0.0))
        return Footprint(per_row, self.fixed + other.fixed, state)

    def plus(self, *, per_row: float = 0.0, fixed: float = 0.0) -> Footprint:
        """This footprint with ``per_row`` and ``fixed`` bytes more (``per_row`` kept unknown)."""
        return Footprint(None if self.per_row is None else self.per_row + per_row,
                         self.fixed + fixed, self.state)
