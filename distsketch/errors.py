"""The one exception hierarchy of distsketch.

Every error the package raises on purpose derives from :class:`DistsketchError`,
which is a :class:`ValueError` so that code written against scikit-learn's
conventions (``except ValueError``) keeps working.  Messages say *what* was
wrong, *where* (path, array, row or chunk) and *what to do*.

All classes take a single message argument so that they pickle cleanly when a
Dask worker raises them and the client re-raises them.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

__all__ = [
    "ClusterError",
    "ConfigError",
    "DistsketchError",
    "InputError",
    "MemoryBudgetError",
    "NotFittedError",
    "PerformanceWarning",
    "StoreError",
    "StoreVersionWarning",
    "WorkflowError",
]


class DistsketchError(ValueError):
    """Base class of every error raised by distsketch."""


class InputError(DistsketchError):
    """The data handed in is unusable (shape, dtype, NaN/Inf, zero rows, width)."""


class StoreError(DistsketchError):
    """A Zarr store or file is missing, corrupt, unreadable or unwritable."""


class ConfigError(DistsketchError):
    """A parameter, option or spec has an invalid value."""


class MemoryBudgetError(DistsketchError, MemoryError):
    """A planned task would need more memory than the configured budget."""


if TYPE_CHECKING:  # the class made on first use (see the end of this module), for type checkers
    from sklearn.exceptions import NotFittedError as _SkNotFittedError

    class NotFittedError(DistsketchError, _SkNotFittedError):
        """An estimator was used before ``fit``."""


class ClusterError(DistsketchError):
    """A Dask cluster could not be started or reached."""


class WorkflowError(DistsketchError):
    """A workflow run could not proceed (lock held, spec inconsistent with state)."""


class StoreVersionWarning(UserWarning):
    """A model store was written with other library versions than those installed."""


class PerformanceWarning(UserWarning):
    """The input is valid but laid out so that reading it is needlessly slow (e.g. a store
    in thousands of tiny chunks); the message names the fix."""


def _not_fitted_error() -> type:
    # scikit-learn's NotFittedError as a base: ``sklearn.utils.validation.check_is_fitted``
    # callers catch ours.  Importing scikit-learn costs over a second (it pulls in SciPy),
    # so the class is made on first use, not when ``distsketch.errors`` is imported (every
    # command line, ``--help`` included, imports this module).
    from sklearn.exceptions import NotFittedError as SkNotFittedError

    class NotFittedError(DistsketchError, SkNotFittedError):
        """An estimator was used before ``fit``."""

    NotFittedError.__module__ = __name__
    NotFittedError.__qualname__ = "NotFittedError"  # pickles by name, as a top-level class
    return NotFittedError


_MAKING = threading.Lock()


def __getattr__(name: str) -> Any:
    if name == "NotFittedError":
        with _MAKING:  # one class object for every importer and thread (and for pickle)
            if name not in globals():
                globals()[name] = _not_fitted_error()
        return globals()[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
