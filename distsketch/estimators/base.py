"""Shared machinery of distsketch estimators (scikit-learn conventions): the fit
context, parameter checks, the mergeable protocol, row-map transformers.

Randomness is drawn once in ``fit`` into an integer ``seed_`` from which every
operator is regenerated, on any worker; NumPy in, NumPy out; dask in, dask out (lazy).

Over 500 lines because it holds the whole estimator protocol (fit context, parameter
checks, row maps, the mergeable protocol) that every family shares.
"""

from __future__ import annotations

import contextlib
import functools
import os
from collections.abc import Callable, Sequence
from contextvars import ContextVar
from typing import Any, ClassVar

import numpy as np
from sklearn.base import BaseEstimator
from sklearn.base import TransformerMixin as _SklearnTransformerMixin
from sklearn.utils._set_output import _get_output_config, _wrap_data_with_container
from sklearn.utils.validation import _check_feature_names, _check_feature_names_in

from distsketch.blas import blas_single_thread
from distsketch.errors import ConfigError, NotFittedError
from distsketch.footprint import Footprint
from distsketch.graph import (
    check_operator_memory,
    cluster_resources,
    map_blocks,
    resources_scope,
    to_numpy,
)
from distsketch.graph.progress import fit_progress
from distsketch.ops.namespace import host_dtype
from distsketch.ops.random import resolve_seed
from distsketch.validation import (
    check_estimator_params,
    check_input,
    check_n_features,
    is_dask,
    is_path_like,
)
from distsketch.validation.finite import FiniteRows, is_array_api

__all__ = ["DistsketchEstimator", "MergeableEstimator", "OperatorSize", "RowMapTransformer",
           "TransformerMixin", "fit_context", "is_mergeable", "summary_context", "to_numpy"]

#: One operator or state a fit holds in a task: (what it is, with the parameters that size it;
#: its bytes; the fix), as :func:`distsketch.graph.check_operator_memory` takes them.
OperatorSize = tuple[str, float, str]

#: ids of the estimators whose parameters the running fit context has checked (a fit calling
#: its own ``partial_fit`` checks once); a new thread starts with none.
_VALIDATED_IN: ContextVar[frozenset[int]] = ContextVar("distsketch_validated_in",
                                                      default=frozenset())

#: the marker :func:`fit_context` and :func:`summary_context` set on what they return:
#: "fit" (validates), "merge" (does not) or "summary"
FIT_CONTEXT_MARKER = "__fit_context__"


def fit_context(method: Callable[..., Any] | None = None, *,
                validate: bool = True) -> Any:
    """Run an estimator method in the fit context (scikit-learn's ``_fit_context``).

    Put explicitly on every method that changes the fitted state: ``fit`` and
    ``partial_fit`` (``@fit_context``), ``merge``, ``merge_summaries`` and
    ``fold`` (``@fit_context(validate=False)``).  The call runs

    * with BLAS on one thread (:func:`~distsketch.blas.blas_single_thread`):
      LAPACK results change in the last bits with the thread count, and a
      fitted model must be bitwise the same in any process;
    * with the cluster resources looked up once
      (:func:`~distsketch.graph.budget.resources_scope`), shared by its
      stages and by the estimators it fits inside;
    * with ``validate``: after :meth:`DistsketchEstimator._validate_params`
      (once per outermost call on this estimator: a ``fit`` that calls its own
      ``partial_fit`` or ``super().fit`` does not check again), and with ``y``
      given as ``"store.zarr::y"`` opened;
    * for ``fit`` (the outermost call), after
      :meth:`DistsketchEstimator._reset_fitted`: a refit starts from nothing an
      earlier fit learned, the one place fitted attributes are forgotten.

    Parameters
    ----------
    method : callable, optional
        The method (``@fit_context``); omitted for ``@fit_context(validate=False)``.
    validate : bool, default=True
        Whether the call checks the parameters first.

    Returns
    -------
    callable
        The wrapped method, marked ``__fit_context__`` ("fit" or "merge").
    """
    def decorate(method: Callable[..., Any]) -> Callable[..., Any]:
        resets = validate and method.__name__ == "fit"

        @functools.wraps(method)
        def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
            # a fit reports every pass of its own while progress is on (not a merge: no pass)
            report = fit_progress(type(self).__name__) if validate else contextlib.nullcontext()
            with blas_single_thread(), resources_scope(), report:
                if not validate:
                    return method(self, *args, **kwargs)
                checked = _VALIDATED_IN.get()
                token = None
                if id(self) not in checked:
                    if not self._take_checked_params():
                        self._validate_params()
                    if resets:
                        self._reset_fitted()
                    token = _VALIDATED_IN.set(checked | {id(self)})
                try:
                    if (len(args) > 1 and is_path_like(args[1])) or is_path_like(kwargs.get("y")):
                        from distsketch.io.arrays.targets import open_target_args  # y: "store.zarr::y"

                        args, kwargs = open_target_args(args, kwargs)
                    return method(self, *args, **kwargs)
                finally:
                    if token is not None:
                        _VALIDATED_IN.reset(token)

        setattr(wrapper, FIT_CONTEXT_MARKER, "fit" if validate else "merge")
        # read by tests of the parameter checks: this method checks them
        wrapper._validates_params = validate  # type: ignore[attr-defined]
        return wrapper

    return decorate if method is None else decorate(method)


def summary_context(method: Callable[..., Any]) -> Callable[..., Any]:
    """Run ``summarize`` with the cluster resources looked up once for its passes.

    It runs in any thread (a workflow's segments at once), so BLAS is left to
    the tasks (no :func:`~distsketch.blas.blas_single_thread`).
    """
    @functools.wraps(method)
    def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
        with resources_scope():
            return method(self, *args, **kwargs)

    setattr(wrapper, FIT_CONTEXT_MARKER, "summary")
    return wrapper


class DistsketchEstimator(BaseEstimator):
    """Base class: parameter validation, input checks, fitted checks, save.

    A subclass decorates its ``fit`` and ``partial_fit`` with
    :func:`fit_context` (parameters checked against ``_parameter_constraints``
    once, BLAS on one thread, cluster resources looked up once), its
    ``merge``, ``merge_summaries`` and ``fold`` with
    ``fit_context(validate=False)`` and its ``summarize`` with
    :func:`summary_context`.  Nothing is wrapped implicitly.
    """

    _parameter_constraints: dict[str, list[Any]] = {}
    #: whether fit/transform/predict run on arrays of another namespace (CuPy, array-api-strict,
    #: dask arrays of their blocks) and return the input's kind; without it such input is refused
    _array_api_support: ClassVar[bool] = False
    #: whether ``partial_fit`` over consecutive batches gives the model ``fit`` on all rows
    #: gives (for estimators with ``partial_fit``); a workflow folds segments only then
    partial_fit_equals_fit: ClassVar[bool] = True

    def _reset_fitted(self) -> None:
        """Forget what an earlier fit learned, so no stale attribute survives a refit."""
        for attr in [k for k in vars(self) if k.endswith("_") and not k.startswith("_")]:
            delattr(self, attr)

    def _validate_params(self) -> None:
        """Every parameter check that needs no data (the constraint table, then
        :meth:`_check_params`): the fit context's first step."""
        check_estimator_params(self)
        self._check_params()

    def _check_params_once(self) -> None:
        """For a shape check also called on its own: no second check inside ``fit``."""
        if id(self) not in _VALIDATED_IN.get():
            self._check_params()

    def check_params(self, n_samples: int | None = None, n_features: int | None = None) -> None:
        """Check the parameters as ``fit`` will, before any data is read.

        The constraint table and the relations between parameters; given the
        input's shape, also what the shape cannot give, among them every
        operator's and state's size against the per-task memory budget.  The
        CLI and the workflow call this before a cluster starts or a segment is
        read, so a bad parameter fails in milliseconds; the next ``fit`` takes
        this check instead of repeating it, unless a parameter changed since.

        Parameters
        ----------
        n_samples, n_features : int, optional
            The input's shape, when known.

        Raises
        ------
        ConfigError, InputError, MemoryBudgetError
            What ``fit`` would raise for these parameters.
        """
        self._validate_params()
        if n_samples is not None and n_features is not None:
            self._check_params_for_shape(int(n_samples), int(n_features))
        self._checked_params = self._params_token()

    def _params_token(self) -> tuple:
        # what the parameter checks read: every (nested) parameter, by identity and value
        return tuple((k, id(v), repr(v)) for k, v in sorted(self.get_params(deep=True).items()))

    def _take_checked_params(self) -> bool:
        """Whether :meth:`check_params` just checked these very parameters (used once),
        so that a command validates its parameters once."""
        token = self.__dict__.pop("_checked_params", None)
        return token is not None and token == self._params_token()

    def _check_params(self) -> None:
        """Override to refuse relations between parameters (e.g. ``n_components <=
        n_landmarks``) with ConfigError; shape checks go in :meth:`_check_params_for_shape`."""

    def _operator_sizes(self, n_samples: int, n_features: int) -> list[OperatorSize]:
        """The operators and states a fit on X of this shape holds in one task, from
        the parameters alone (Python integers: no overflow, no allocation)."""
        return []

    def _check_params_for_shape(self, n_samples: int, n_features: int) -> None:
        """Refuse, before any pass over X, what X's shape cannot give: every operator
        size against the per-task budget, here and in each estimator given as a parameter."""
        sizes = self._operator_sizes(int(n_samples), int(n_features))
        if sizes:
            resources = cluster_resources()  # one look-up (a scheduler query) for all of them
            for what, n_bytes, fix in sizes:
                check_operator_memory(what, n_bytes, fix, resources=resources)
        for value in self.get_params(deep=False).values():
            if isinstance(value, DistsketchEstimator):
                value._validate_params()  # its sizes read its parameters as numbers
                value._check_params_for_shape(n_samples, n_features)

    def _check_input(self, X: Any, *, reset: bool, allow_sparse: bool = False,
                     dtype: Any = None) -> Any:
        if is_path_like(X):
            # only io opens paths; a model fitted from a store records which data it saw
            from distsketch.io import fingerprint, open_array

            source = X
            X = open_array(X)
            if reset and isinstance(source, (str, os.PathLike)):
                self.fingerprint_ = fingerprint(X, path=source)
        else:
            # column names of a DataFrame: feature_names_in_ (fit) or checked against it
            _check_feature_names(self, X, reset=reset)
        self._check_namespace_support(X)
        X = check_input(X, where=f"{type(self).__name__} input", allow_sparse=allow_sparse,
                        dtype=dtype)
        check_n_features(self, X, reset=reset)
        return X

    def _check_namespace_support(self, X: Any) -> None:
        """Refuse input of another array namespace where this estimator has no path for it."""
        if type(self)._array_api_support or not is_array_api(getattr(X, "_meta", X)):
            return
        raise ConfigError(
            f"{type(self).__name__} has no GPU (array-API) path yet; pass NumPy input (e.g. "
            "cupy.asnumpy(X), or a dask array of NumPy blocks), or use an estimator listed in "
            "docs/gpu.md ('Estimators on the GPU').")

    def _check_is_fitted(self, attribute: str | None = None) -> None:
        fitted = (hasattr(self, attribute) if attribute else
                  any(k.endswith("_") and not k.startswith("_") for k in vars(self)))
        if not fitted:
            raise NotFittedError(
                f"This {type(self).__name__} instance is not fitted yet; call fit (or "
                "partial_fit) with training data first."
            )

    def _init_seed(self) -> int:
        if not hasattr(self, "seed_"):
            self.seed_ = resolve_seed(getattr(self, "random_state", None))
        return self.seed_

    def save(self, path: str | os.PathLike, *, overwrite: bool = False,
             storage_options: dict | None = None) -> Any:
        """Save the fitted estimator to a Zarr group at ``path`` (atomic).

        ``path`` may be a URL (``s3://bucket/model.zarr``) with fsspec
        ``storage_options``.  Load it with :func:`distsketch.load`.
        """
        from distsketch.io.model.store import save_model

        self._check_is_fitted()
        return save_model(self, path, overwrite=overwrite, storage_options=storage_options)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.non_deterministic = False
        tags.input_tags.sparse = bool(getattr(self, "_accepts_sparse", False))
        return tags


class MergeableEstimator(DistsketchEstimator):
    """The mergeable-estimator protocol: summarise rows, merge summaries, fold.

    An estimator whose ``partial_fit`` merges new rows into its fitted state
    inherits this class and so declares that its ``partial_fit`` splits into
    three public steps:

    * :meth:`summarize` ``(X, y, *, row_offset)``: the summary of some rows,
      computed from the fitted operators only.  It changes nothing, so it runs
      in any thread and in any order (a tree reduction on the cluster), on
      rows whose first global index is ``row_offset``;
    * :meth:`merge_summaries` ``(summaries)``: one summary of the rows of
      several, associative, so summaries can be combined anywhere;
    * :meth:`fold` ``(summary)``: merge a summary into the fitted state, in
      row order, and finish (solution or components, ``n_samples_seen_``).

    After the first call (a fit on its rows), ``partial_fit(X, y)`` is exactly
    ``fold(summarize(X, y, row_offset=n_samples_seen_))``, bitwise.  The
    workflow folds segments through these three methods alone, so an estimator
    that implements them (and is registered in :mod:`distsketch.registry`) is
    usable in segment folding without a change to the workflow.

    The defaults of :meth:`merge_summaries` and :meth:`fold` serve estimators
    whose state is one :class:`~distsketch.summaries.base.Summary` state:
    they need ``_summary()`` (the summary object), ``_state()`` (the fitted
    state as a summary state) and ``_set_state(state)`` (store it and
    finish); others override both.  Like ``partial_fit``, both run with BLAS
    on one thread (an override carries ``@fit_context(validate=False)``, and
    a ``summarize`` ``@summary_context``).
    """

    n_samples_seen_: int

    def _summary(self) -> Any:
        raise NotImplementedError

    def _state(self) -> Any:
        raise NotImplementedError

    def _set_state(self, state: Any) -> None:
        raise NotImplementedError

    @summary_context
    def summarize(self, X: Any, y: Any = None, *, row_offset: int) -> Any:
        """The summary of rows ``X`` (and targets ``y``), global rows from ``row_offset``.

        Parameters
        ----------
        X : array-like, dask array or Zarr path of shape (n_rows, n_features_in_)
        y : array-like of shape (n_rows, ...), optional
            Targets of a supervised estimator; ignored otherwise.
        row_offset : int
            Global index of the first row of X (rows are numbered after
            those already seen, so row-keyed randomness and row-stable
            products match a fit on all rows).

        Returns
        -------
        summary
            Nested dicts, lists and arrays: what :meth:`merge_summaries` and
            :meth:`fold` take.  The estimator is not changed.
        """
        raise NotImplementedError(f"{type(self).__name__} does not implement summarize")

    @fit_context(validate=False)
    def merge_summaries(self, summaries: Sequence[Any]) -> Any:
        """One summary of the rows of ``summaries`` (associative, order of rows kept).

        Parameters
        ----------
        summaries : sequence of summaries
            From :meth:`summarize` (or earlier merges), in row order.

        Returns
        -------
        summary
        """
        return self._summary().merge(list(summaries))

    @fit_context(validate=False)
    def fold(self, summary: Any) -> Any:
        """Merge ``summary`` into the fitted state and finish, as ``partial_fit`` does.

        Parameters
        ----------
        summary
            Of the rows that follow the ``n_samples_seen_`` rows already seen.

        Returns
        -------
        self
        """
        self._check_is_fitted()
        self._set_state(self.merge_summaries([self._state(), summary]))
        return self


def is_mergeable(estimator: Any) -> bool:
    """Whether an estimator (class or instance) implements :class:`MergeableEstimator`."""
    cls = estimator if isinstance(estimator, type) else type(estimator)
    return issubclass(cls, MergeableEstimator)


def _lazy_frame(out: Any, columns: np.ndarray) -> Any:
    """A dask array of features as a dask DataFrame with these columns (still lazy)."""
    try:
        import dask.dataframe as dd
    except ImportError as exc:
        raise ConfigError(
            "set_output(transform='pandas') on dask input gives a lazy dask DataFrame, which "
            f"needs dask's dataframe support ({exc}); install it (pip install "
            "'distsketch[dataframe]'), or pass NumPy input, or use set_output(transform='default') "
            "and wrap the computed result yourself.") from exc
    out = out[:, None] if out.ndim == 1 else out
    return dd.from_dask_array(out, columns=[str(c) for c in columns])


def _wrap_output(method: Callable[..., Any]) -> Callable[..., Any]:
    """scikit-learn's ``set_output`` wrapping, except that dask output stays lazy."""
    @functools.wraps(method)
    def wrapped(self: Any, X: Any, *args: Any, **kwargs: Any) -> Any:
        out = method(self, X, *args, **kwargs)
        if is_dask(out) and _get_output_config("transform", self)["dense"] != "default":
            if _get_output_config("transform", self)["dense"] != "pandas":
                raise ConfigError(
                    f"{type(self).__name__}: set_output(transform="
                    f"{_get_output_config('transform', self)['dense']!r}) is not available for "
                    "dask input; use 'pandas' (a lazy dask DataFrame) or 'default'.")
            return _lazy_frame(out, self.get_feature_names_out())
        return _wrap_data_with_container("transform", out, X, self)

    wrapped._lazy_output = True  # type: ignore[attr-defined]
    return wrapped


class TransformerMixin(_SklearnTransformerMixin):
    """scikit-learn's ``TransformerMixin`` for distsketch transformers.

    Adds ``get_feature_names_out`` (``<classname>0``, ``<classname>1``, …,
    as scikit-learn's ``ClassNamePrefixFeaturesOutMixin``), so ``set_output``
    works, and keeps ``set_output(transform="pandas")`` lazy on dask input:
    the result is a dask DataFrame, never a computed pandas one.
    """

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        # scikit-learn has just wrapped the methods this class defines: wrap the originals
        for name in ("transform", "fit_transform"):
            method = cls.__dict__.get(name)
            if method is None or getattr(method, "_lazy_output", False):
                continue
            setattr(cls, name, _wrap_output(getattr(method, "__wrapped__", method)))

    def _n_features_out(self) -> int:
        for attr in ("n_output_features_", "n_outputs_"):
            if hasattr(self, attr):
                return int(getattr(self, attr))
        return int(self.components_.shape[0])  # type: ignore[attr-defined]

    def get_feature_names_out(self, input_features: Any = None) -> np.ndarray:
        """Output feature names ``<classname>0 … <classname>{k-1}``.

        Parameters
        ----------
        input_features : array-like of str, optional
            Checked against ``feature_names_in_`` / ``n_features_in_``; not used.

        Returns
        -------
        ndarray of str objects, shape (n_output_features,)
        """
        self._check_is_fitted()  # type: ignore[attr-defined]
        _check_feature_names_in(self, input_features, generate_names=False)
        name = type(self).__name__.lower()
        return np.asarray([f"{name}{i}" for i in range(self._n_features_out())], dtype=object)


class RowMapTransformer(TransformerMixin, DistsketchEstimator):
    """Base for oblivious/learned row maps ``x -> z(x)`` (feature maps).

    Subclasses implement ``_map_block(block, offset, *operands) -> ndarray`` and
    ``_operands()`` (arrays shipped once to workers), ``n_output_features_`` and
    ``_map_footprint()``, the memory of one task of the map as its op declares
    it (e.g. :func:`distsketch.ops.nystrom.nystrom_map_footprint`).
    """

    dtype: Any = None

    def _operands(self) -> tuple:
        return ()

    def _map_footprint(self) -> Footprint:
        """Unknown by default (a multiple of the input row)."""
        return Footprint()

    def _output_dtype(self, X: Any) -> np.dtype:
        dtype = host_dtype(X.dtype)
        return dtype if dtype in (np.float32, np.float64) else np.dtype(np.float64)

    def transform(self, X: Any) -> Any:
        """Map rows of X to features.

        Parameters
        ----------
        X : ndarray, sparse matrix or dask array of shape (n_samples, n_features)

        Returns
        -------
        ndarray or dask array of shape (n_samples, n_output_features_)
            Same kind (NumPy or dask) as X; float32 input gives float32 output.
        """
        self._check_is_fitted("n_output_features_")
        X = self._check_input(X, reset=False, allow_sparse=getattr(self, "_accepts_sparse", False))
        return map_blocks(X, FiniteRows(self._map_block, f"{type(self).__name__} transform"),
                          *self._operands(),
                          n_out=self.n_output_features_, dtype=self._output_dtype(X),
                          footprint=self._map_footprint(), name=type(self).__name__.lower())

    def fit_transform(self, X: Any, y: Any = None, **fit_params: Any) -> Any:
        return self.fit(X, y, **fit_params).transform(X)

    def kernel_approx(self, A: np.ndarray, B: np.ndarray | None = None) -> np.ndarray:
        """The approximate kernel block z(A) z(B)ᵀ (small in-memory inputs)."""
        ZA = np.asarray(self.transform(np.asarray(A)), dtype=np.float64)
        ZB = ZA if B is None else np.asarray(self.transform(np.asarray(B)), dtype=np.float64)
        return ZA @ ZB.T
