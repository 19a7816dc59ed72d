"""Finiteness and range: inputs that fit the computation, outputs that are numbers.

One check per place where a silent NaN or a silently changed value could
arise: input rows (:func:`check_finite_rows`), targets, stored rows, narrowing
casts (:func:`cast_checked`), integers a floating dtype would round
(:func:`check_exact_integers`) and stage outputs (:func:`check_finite_block`);
every message naming a row finds it with :func:`first_nonfinite_row`.

Blocks of another namespace (CuPy) are not read on the host per block: each
check leaves a 0-d flag on the device, read once per pass
(:func:`deferred_checks`, or the states of a :class:`FlaggedSummary`); only a
set flag re-runs the synchronous check, so the messages are the same.

Over 500 lines because the synchronous checks and their deferred device form share
one set of messages and re-checks.
"""

from __future__ import annotations

import contextlib
import functools
import sys
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
from dask.base import tokenize

from distsketch.errors import InputError
from distsketch.ops.kernels import bad_input_flag, check_row_magnitude
from distsketch.ops.namespace import densify, is_numpy, namespace, to_host

__all__ = [
    "DeferredChecks",
    "FiniteRows",
    "FlaggedState",
    "FlaggedSummary",
    "cast_checked",
    "check_exact_integers",
    "check_finite_block",
    "check_finite_output",
    "check_finite_result",
    "check_finite_rows",
    "check_finite_stored",
    "check_finite_targets",
    "deferred_checks",
    "first_inexact_integer",
    "first_nonfinite_row",
    "first_out_of_range",
    "is_array_api",
    "is_checked",
    "is_dask",
    "mark_checked",
    "narrows",
    "output_flag",
]

def is_dask(X: Any) -> bool:
    """True for dask arrays (without importing ``dask.array``: validation builds no graph)."""
    module = sys.modules.get("dask.array")
    return module is not None and isinstance(X, module.Array)


_FIX = "Scale the input (e.g. sklearn.preprocessing.StandardScaler) or lower gamma/degree."


def first_nonfinite_row(values: Any) -> int | None:
    """Index of the first row of ``values`` holding NaN or Inf; None when all are finite.

    The one first-bad-row check: every message naming a bad row (input
    blocks, targets, stage outputs, ingested and written rows) takes its row
    from here.

    Parameters
    ----------
    values : ndarray or scipy.sparse matrix
        A row is everything at one first index (each value of a 0-d or 1-d
        array is a row).  Integer and boolean values are always finite.

    Returns
    -------
    int or None

    Notes
    -----
    One ``isfinite`` pass over the values (the stored values of a sparse
    matrix) and no copy when they are all finite; the row is located only
    when one is not.  An array of another namespace (CuPy) is checked on its
    device: one scalar comes to the host when all is finite, else only the
    per-row flags.
    """
    if hasattr(values, "tocsr"):
        if not np.issubdtype(values.data.dtype, np.inexact) or np.isfinite(values.data).all():
            return None
        csr = values.tocsr()
        rows = np.repeat(np.arange(csr.shape[0]), np.diff(csr.indptr))[~np.isfinite(csr.data)]
        return int(rows.min())
    xp = np if isinstance(values, np.ndarray) or not is_array_api(values) else namespace(values)
    if xp is np:
        values = np.asarray(values)
    if not xp.isdtype(values.dtype, ("real floating", "complex floating")):
        return None
    ok = xp.isfinite(values)
    if bool(xp.all(ok)):
        return None
    if values.ndim == 0:
        return 0
    per_row = xp.all(xp.reshape(ok, (ok.shape[0], -1)), axis=1)
    return int(np.flatnonzero(~np.asarray(to_host(per_row)))[0])


def is_array_api(values: Any) -> bool:
    """True for an array of a non-NumPy array-API library (CuPy, ``array-api-strict``)."""
    if isinstance(values, np.ndarray) or is_dask(values) or hasattr(values, "tocsr"):
        return False
    import array_api_compat

    return bool(array_api_compat.is_array_api_obj(values)) and not is_numpy(namespace(values))


def check_finite_rows(block: Any, row_start: int = 0, where: str = "input") -> None:
    """Refuse an input block holding NaN or Inf, or rows too large for its dtype.

    The per-block input check of every graph pass and of in-memory input
    (:func:`distsketch.validation.check_input`).

    Parameters
    ----------
    block : ndarray or scipy.sparse matrix
        Input rows ``row_start ..``.
    row_start : int
        Global index of the block's first row.
    where : str
        What the rows are, for the message (``"X"``, ``"input"``).

    Raises
    ------
    InputError
        ``X contains NaN or Inf: first bad row is 37 (block starting at row 30)...``,
        or the first row whose squared norm overflows the dtype.
    """
    row = first_nonfinite_row(block)
    if row is not None:
        raise InputError(
            f"{where} contains NaN or Inf: first bad row is {row_start + row} "
            f"(block starting at row {row_start}). Clean or impute the data first "
            "(e.g. drop those rows before ingesting)."
        )
    check_row_magnitude(block, row_start, where)


def check_finite_targets(y: Any, where: str) -> None:
    """Refuse targets holding NaN or Inf, naming the first such row.

    Raises
    ------
    InputError
        ``{where} contains NaN or Inf (first at row 1); clean the targets.``
    """
    row = first_nonfinite_row(y)
    if row is not None:
        raise InputError(f"{where} contains NaN or Inf (first at row {row}); clean the targets.")


def check_finite_stored(block: Any, row_start: int, where: Any, line_of: Any = None, *,
                        action: str = "ingesting") -> None:
    """Refuse rows ``row_start ..`` about to be stored (ingested or appended) that hold NaN or Inf.

    The message names ``where`` (source or destination), the global row, its
    text line (``line_of(i)`` for the block's row ``i``, text sources) and the
    ``action`` (``"ingesting"`` or ``"appending"``).
    """
    row = first_nonfinite_row(block)
    if row is None:
        return
    at = f"row {row_start + row}" + (f" (line {line_of(row)})" if line_of is not None else "")
    raise InputError(f"{where}: NaN or Inf at {at}. Clean or impute the data before {action}, "
                     "or pass allow_nan=True (CLI: --allow-nan) to store it as is.")


def check_finite_block(block: Any, *, stage: str, row_start: int = 0, defer: bool = True) -> Any:
    """Return ``block`` if it is all finite, else raise naming the stage and first bad row.

    Parameters
    ----------
    block : ndarray or scipy.sparse matrix of shape (k, ...)
        What ``stage`` produced for rows ``row_start .. row_start + k - 1``.
    stage : str
        The computation, e.g. ``"RandomFourierFeatures transform"``.
    row_start : int
        Global index of the block's first row.
    defer : bool, default True
        Inside :func:`deferred_checks`, leave a device flag instead of
        checking now (False: check now, as the deferred re-check does).

    Raises
    ------
    InputError
        ``stage 'RFF transform' produced NaN at row 12345: ...``.

    Notes
    -----
    One pass over the block (``isfinite``); no copy when it is finite.  The
    row named is the first bad row of its block; when blocks run in
    parallel, of the block that failed first.  Inside :func:`deferred_checks`
    a block of another namespace is only flagged on its device, and checked
    (raising this same error) when the flags are read.
    """
    checks = _active_checks() if defer else None
    if checks is not None and checks.output(block, stage, row_start):
        return block
    row = first_nonfinite_row(block)
    if row is None:
        return block
    bad = densify(block[row]) if hasattr(block, "tocsr") else \
        np.atleast_1d(np.asarray(to_host(block)))[row]
    kind = "NaN" if np.isnan(bad).any() else "Inf"
    raise InputError(f"stage {stage!r} produced {kind} at row {row_start + row}: the input row "
                     f"or the parameters overflow the computation. {_FIX}")


def check_finite_result(*values: Any, stage: str) -> None:
    """Raise naming ``stage`` when any of the driver-side ``values`` holds NaN or Inf.

    For results computed once in ``fit`` (eigendecompositions, solves,
    normalisations), where a row number means nothing.
    """
    for value in values:
        if value is None:
            continue
        arr = np.asarray(to_host(value))
        if np.issubdtype(arr.dtype, np.inexact) and not np.all(np.isfinite(arr)):
            kind = "NaN" if np.isnan(arr).any() else "Inf"
            raise InputError(f"stage {stage!r} produced {kind} (shape {arr.shape}): the data or "
                             f"the parameters overflow the computation. {_FIX}")


def check_finite_output(out: Any, *, stage: str) -> Any:
    """:func:`check_finite_block` on a whole output: NumPy now, dask lazily per block.

    For outputs not produced by a per-block function that :class:`FiniteRows`
    could wrap (e.g. a tiled kernel product); rows are numbered globally.
    """
    if is_dask(out):
        return out.map_blocks(_check_located, stage, dtype=out.dtype, meta=out._meta)  # type: ignore[arg-type]
    return check_finite_block(out, stage=stage)


def _check_located(block: Any, stage: str, block_info: dict | None = None) -> Any:
    start = int(block_info[0]["array-location"][0][0]) if block_info else 0
    return check_finite_block(block, stage=stage, row_start=start)


class FiniteRows:
    """``func(block, offset, *operands)`` whose result is checked by :func:`check_finite_block`.

    A picklable wrapper for the per-block functions of transform/predict;
    it tokenizes as (func, stage) so graph names stay deterministic.
    """

    def __init__(self, func: Callable[..., Any], stage: str):
        self.func = func
        self.stage = stage

    def __call__(self, block: Any, offset: int, *args: Any, **kwargs: Any) -> Any:
        return check_finite_block(self.func(block, offset, *args, **kwargs),
                                  stage=self.stage, row_start=int(offset))

    def __dask_tokenize__(self) -> Any:
        return ("FiniteRows", tokenize(self.func), self.stage)


#: the row of a state whose blocks were all flagged clean (above any row number)
NO_ROW = 2**62


def output_flag(out: Any) -> Any | None:
    """NaN/Inf in a device output, as a 0-d bool on its device (None for host outputs)."""
    if not is_array_api(out):
        return None
    xp = namespace(out)
    if not xp.isdtype(out.dtype, ("real floating", "complex floating")):
        return xp.asarray(False, device=out.device)
    return ~xp.all(xp.isfinite(out))


class DeferredChecks:
    """The device flags of the checks made in one :func:`deferred_checks` scope.

    Each check keeps its flag and what it would re-check (the block, its
    first row).  :meth:`settle` reads one number, the position of the first
    set flag, and only then re-runs that one check synchronously, so it
    raises exactly its synchronous error (the first failing check in the
    order they were made) and a failure costs one block's re-check.
    """

    def __init__(self) -> None:
        self._rechecks: list[Callable[[], Any]] = []
        self._flags: list[Any] = []

    def input(self, block: Any, row_start: int, where: str) -> None:
        """Check input rows: flagged on a device, at once on the host."""
        flag = bad_input_flag(block) if is_array_api(block) else None
        if flag is None:
            check_finite_rows(block, row_start, where)
            return
        self._add(flag, functools.partial(check_finite_rows, block, row_start, where))

    def output(self, out: Any, stage: str, row_start: int) -> bool:
        """Flag a device output of ``stage``; False (nothing flagged) for a host one."""
        flag = output_flag(out)
        if flag is None:
            return False
        self._add(flag, functools.partial(check_finite_block, out, stage=stage, row_start=row_start,
                                            defer=False))
        return True

    def _add(self, flag: Any, recheck: Callable[[], Any]) -> None:
        self._rechecks.append(recheck)
        self._flags.append(flag)

    def settle(self) -> None:
        """Read the flags (one host read); re-check the first set one, which raises.

        Raises
        ------
        InputError
            The error the first failing check raises synchronously.
        """
        rechecks, flags = self._rechecks, self._flags
        self._rechecks, self._flags = [], []
        if not flags:
            return
        xp = namespace(*flags)
        stacked = xp.astype(xp.stack(flags), xp.int8)
        none = xp.asarray(-1, dtype=xp.int64, device=stacked.device)
        first = int(xp.where(xp.any(stacked != 0), xp.astype(xp.argmax(stacked), xp.int64), none))
        if first >= 0:
            rechecks[first]()


_LOCAL = threading.local()


def _active_checks() -> DeferredChecks | None:
    return getattr(_LOCAL, "checks", None)


@contextlib.contextmanager
def deferred_checks() -> Iterator[DeferredChecks]:
    """A scope whose device checks are read once, when it ends.

    Nested scopes join the outermost one (a block task inside a pass run in
    this process).  An exception inside the scope settles the flags first: a
    failure caused by bad input is reported as the bad input.
    """
    outer = _active_checks()
    if outer is not None:
        yield outer
        return
    checks = DeferredChecks()
    _LOCAL.checks = checks
    try:
        yield checks
    except Exception:
        _LOCAL.checks = None
        checks.settle()
        raise
    finally:
        _LOCAL.checks = None
    checks.settle()


class FlaggedState:
    """A summary state and ``first``: the first row of its first flagged block (device 0-d)."""

    __slots__ = ("first", "state")

    def __init__(self, state: Any, first: Any):
        self.state = state
        self.first = first


class FlaggedSummary:
    """``summary`` whose states carry the input checks' flags, read once at the root.

    For tree reductions over dask blocks of another namespace, whose states
    travel between tasks: each chunk flags its block on the device
    (:func:`~distsketch.ops.kernels.bad_input_flag`) and its state carries, as a
    device integer, the block's first row if flagged; merges keep the minimum.  :meth:`settle`
    reads that one integer and has the flagged block re-checked, which names
    the same first bad row as the synchronous check.
    """

    def __init__(self, summary: Any, where: str):
        self.summary = summary
        self.where = where

    def chunk(self, block: Any, row_start: int, *operands: Any) -> FlaggedState:
        """The summary's chunk state and its block's flag."""
        flag = bad_input_flag(block) if is_array_api(block) else None
        if flag is None:
            check_finite_rows(block, row_start, self.where)
            return FlaggedState(self.summary.chunk(block, row_start, *operands), None)
        try:
            state = self.summary.chunk(block, row_start, *operands)
        except Exception:
            if bool(flag):  # the failure is the bad input's: name it
                check_finite_rows(block, row_start, self.where)
            raise
        xp = namespace(flag)
        first = xp.where(flag, xp.asarray(int(row_start), dtype=xp.int64, device=flag.device),
                         xp.asarray(NO_ROW, dtype=xp.int64, device=flag.device))
        return FlaggedState(state, first)

    def merge(self, parts: list[FlaggedState]) -> FlaggedState:
        """The merged state and the first flagged row of its parts."""
        firsts = [p.first for p in parts if p.first is not None]
        first = functools.reduce(namespace(*firsts).minimum, firsts) if firsts else None
        try:
            state = self.summary.merge([p.state for p in parts])
        except Exception:
            if first is not None and int(first) < NO_ROW:
                return FlaggedState(None, first)  # the root names the bad input
            raise
        return FlaggedState(state, first)

    def settle(self, root: FlaggedState, recheck: Callable[[int], None]) -> Any:
        """The merged state, after ``recheck(row_start)`` of the first flagged block, if any."""
        if root.first is not None and (row := int(root.first)) < NO_ROW:
            recheck(row)
        return root.state

    def __dask_tokenize__(self) -> Any:
        return ("FlaggedSummary", tokenize(self.summary), self.where)


_CHECKED: OrderedDict[str, None] = OrderedDict()
_CHECKED_MAX = 1024
_CHECKED_LOCK = threading.Lock()


def mark_checked(X: Any) -> Any:
    """Record that the blocks of dask array ``X`` are checked finite where they are made.

    A writer then skips its own host check of ``X``.  Keyed by the graph name;
    the oldest names are dropped.
    """
    name = getattr(X, "name", None)
    if name is not None:
        with _CHECKED_LOCK:
            _CHECKED[name] = None
            _CHECKED.move_to_end(name)
            while len(_CHECKED) > _CHECKED_MAX:
                _CHECKED.popitem(last=False)
    return X


def is_checked(X: Any) -> bool:
    """Whether :func:`mark_checked` recorded ``X``."""
    name = getattr(X, "name", None)
    with _CHECKED_LOCK:
        return name is not None and name in _CHECKED


def narrows(src: Any, dst: Any) -> bool:
    """Whether converting ``src`` to ``dst`` can change a value's range (not just precision)."""
    src, dst = np.dtype(src), np.dtype(dst)
    if src == dst or not (np.issubdtype(src, np.number) or src == np.bool_):
        return False
    if np.issubdtype(dst, np.floating):
        return bool(np.issubdtype(src, np.floating) and np.finfo(src).max > np.finfo(dst).max)
    if np.issubdtype(dst, np.integer) or dst == np.bool_:
        return not np.can_cast(src, dst, casting="safe")
    return False


def first_out_of_range(values: np.ndarray, dtype: Any) -> tuple[int, Any] | None:
    """The first row (and value) that ``values.astype(dtype)`` would change beyond rounding.

    Narrowing in range only: float64 → float32 beyond ±3.4e38, an integer
    outside the target integer's range, a float that is not a finite whole
    number in range for an integer target.  Widening and precision-only
    conversions (int64 → float32) return None.
    """
    src, dst = np.dtype(values.dtype), np.dtype(dtype)
    if values.size == 0 or not narrows(src, dst):
        return None
    flat = values.reshape(values.shape[0], -1)
    if np.issubdtype(dst, np.floating):
        with np.errstate(invalid="ignore"):
            bad = np.isfinite(flat) & (np.abs(flat) > np.finfo(dst).max)
    else:
        lo, hi = (0, 1) if dst == np.bool_ else (np.iinfo(dst).min, np.iinfo(dst).max)
        if np.issubdtype(src, np.floating):
            with np.errstate(invalid="ignore"):
                bad = ~np.isfinite(flat) | (flat < lo) | (flat > hi) | (flat != np.round(flat))
        else:
            bad = (flat < lo) | (flat > hi)
    rows = np.flatnonzero(bad.any(axis=1))
    if not rows.size:
        return None
    r = int(rows[0])
    return r, flat[r][bad[r]][0]


def cast_checked(values: np.ndarray, dtype: Any, *, where: str, row_start: int = 0,
                 line_of: Callable[[int], int] | None = None) -> np.ndarray:
    """``values.astype(dtype)``, refusing a conversion that changes a value's range.

    Parameters
    ----------
    values : ndarray of shape (k, ...)
    dtype : dtype
        Target dtype.
    where : str
        The source named in the message (a path or an array name).
    row_start : int
        Global index of the first row.
    line_of : callable, optional
        Row of the block -> line of the file, for text sources.

    Raises
    ------
    InputError
        Names the first row holding a value the target dtype cannot hold.
    """
    dst = np.dtype(dtype)
    if values.dtype == dst:
        return values
    found = first_out_of_range(values, dst)
    if found is not None:
        row, value = found
        value = value.item() if hasattr(value, "item") else value
        at = f"row {row_start + row}" + (f" (line {line_of(row)})" if line_of else "")
        wider = "float64" if np.issubdtype(dst, np.floating) else f"a wider dtype than {dst}"
        raise InputError(
            f"{where}: {at} holds {value!r}, which {dst} cannot represent (converting "
            f"{values.dtype} to {dst} would change it). Use dtype={wider} (CLI: --dtype) or "
            "rescale the data first."
        )
    return values.astype(dst)


def first_inexact_integer(values: np.ndarray, dtype: Any) -> tuple[int, int] | None:
    """(row, column) of the first integer of ``values`` that the floating ``dtype`` rounds.

    ``values`` is an integer array of shape (k,) or (k, ...); columns count
    the values of a row flattened.  None when every value is exact in
    ``dtype`` (or ``dtype`` is not floating, or ``values`` not integers).
    """
    dt = np.dtype(dtype)
    if not (np.issubdtype(dt, np.floating) and np.issubdtype(values.dtype, np.integer)) or \
            not values.size:
        return None
    if np.iinfo(values.dtype).bits <= np.finfo(dt).nmant + 1:
        return None  # every value of the source type is exact in dtype
    flat = values.reshape(values.shape[0], -1)
    with np.errstate(invalid="ignore", over="ignore"):
        back = flat.astype(dt)
        # above the source's range the cast back is undefined: compare in float64 first
        big = np.abs(back.astype(np.float64)) >= float(np.iinfo(values.dtype).max)
        bad = big | (back.astype(values.dtype) != flat)
    rows = np.flatnonzero(bad.any(axis=1))
    if not rows.size:
        return None
    r = int(rows[0])
    return r, int(np.flatnonzero(bad[r])[0])


def check_exact_integers(values: np.ndarray, dtype: Any, *, where: str, row_start: int = 0,
                         line_of: Callable[[int], int] | None = None,
                         inexact: Callable[[np.dtype], tuple[int, int, str] | None] | None = None,
                         column: Callable[[int], str] | None = None,
                         hint: str | None = None) -> None:
    """Refuse an integer that the floating ``dtype`` would round: the one no-rounding rule.

    Every path that stores rows applies it before the cast: ``ingest`` and
    ``ingest --append`` of every format, :func:`distsketch.io.append` of
    in-memory rows, and label columns.  float32 holds integers up to 2**24
    exactly, float64 up to 2**53.  Integer arrays are checked value by
    value; values parsed from text (already float64) through ``inexact``,
    which knows which values were written as integers.

    ``values`` are rows ``row_start ..`` (shape (k,) or (k, d)) about to be
    stored in ``dtype``: nothing is checked for a non-floating one, except values
    read as float64 (``inexact`` given).  ``inexact(dtype)`` gives ``(row, column,
    text)`` of the first integer written in the source that ``dtype`` rounds;
    ``line_of``, ``column`` and ``hint`` say the line, the column's name and what to
    do in the message, which names ``where``, the row, the value, what it would
    become and the dtype to use.
    """
    dt = np.dtype(dtype)
    if inexact is not None and not np.issubdtype(dt, np.floating):
        dt = np.dtype(np.float64)  # text is parsed as float64 whatever the stored dtype
    if not np.issubdtype(dt, np.floating):
        return
    found: tuple[int, int, str] | None = None
    if np.issubdtype(values.dtype, np.integer) and values.size:
        hit = first_inexact_integer(values, dt)
        if hit is not None:
            r, c = hit
            found = (r, c, str(int(values.reshape(values.shape[0], -1)[r, c])))
    elif inexact is not None:
        found = inexact(dt)
    if found is None:
        return
    row, col, text = found
    value = int(text)
    at = f"row {row_start + row}" + (f" (line {line_of(row)})" if line_of else "")
    exact_in_64 = abs(value) <= 2**53 or int(np.float64(value)) == value
    with np.errstate(over="ignore"):
        near = dt.type(float(value)) if abs(value) < 2**1000 else dt.type(np.inf)
    became = f" (it would become {int(near)})" if np.isfinite(near) else ""
    if hint is not None:
        todo = hint
    elif exact_in_64 and dt.itemsize < 8:
        todo = ("Pass dtype='float64' (CLI: --dtype float64), which holds integers up to "
                "2**53 exactly.")
    elif inexact is not None:
        todo = ("The values are read as float64 (text, or a table mixing integer and float "
                "columns), which cannot hold it: rescale or drop that column.")
    else:
        todo = ("No floating dtype holds it exactly: store integers with dtype='int64' (CLI: "
                "--dtype int64), or rescale or drop that column.")
    name = column(col) if column is not None else f"column {col + 1}"
    raise InputError(
        f"{where}: {at}, {name} holds the integer {value}, which {dt} cannot "
        f"represent exactly{became}. {todo}"
    )
