"""The method adapter: a spec's estimator as a foldable, checkpointable state."""

from __future__ import annotations

import difflib
import inspect
import numbers
from pathlib import Path
from typing import Any

import numpy as np

from distsketch import registry
from distsketch.errors import ConfigError, WorkflowError

__all__ = ["MethodAdapter", "check_method_params", "resolve_method", "takes_classes"]


def resolve_method(name: str, where: str) -> type:
    """The estimator class a spec's method name stands for.

    Names resolve through :mod:`distsketch.registry` (public estimators only;
    nothing is imported by a dotted path).

    Raises
    ------
    ConfigError
        Unknown name, a public name that is not an estimator, or an estimator
        whose optional dependencies are missing.
    """
    if name.lower() == "rnca":
        raise ConfigError(
            f"{where}: the method 'rnca' is StreamingKernelPCA with method: rnca; write "
            "method: {name: StreamingKernelPCA, params: {method: rnca, n_random_features: m, "
            "n_components: k, gamma: ...}} and rerun with --full.")
    cls = registry.resolve(name, kind="estimator", where=where)
    if not hasattr(cls, "fit"):
        raise ConfigError(f"{where}: {name} is not an estimator (it has no fit method).")
    return cls


def takes_classes(cls: type) -> bool:
    """True for a classifier whose ``partial_fit`` needs every label on its first call."""
    partial_fit = getattr(cls, "partial_fit", None)
    return callable(partial_fit) and "classes" in inspect.signature(partial_fit).parameters


def check_method_params(cls: type, params: dict[str, Any], where: str) -> dict[str, Any]:
    """Check a spec's ``method.params`` against the estimator, before any run starts.

    Names must be parameters of ``cls`` (a close match is suggested for a
    typo), values must pass the estimator's constraint table and its own
    parameter checks.  A classifier with ``partial_fit(..., classes)`` also
    takes ``classes``: all labels, returned sorted as :func:`numpy.unique`
    sorts them.

    Returns
    -------
    dict
        The parameters, with ``classes`` (if given) normalised.

    Raises
    ------
    ConfigError
        Unknown name (with the valid names), bad value, or bad ``classes``.
    """
    from distsketch.validation import check_estimator_params

    valid = set(inspect.signature(cls).parameters) | ({"classes"} if takes_classes(cls) else set())
    for name in params:
        if not isinstance(name, str) or name not in valid:
            close = difflib.get_close_matches(str(name), sorted(valid), n=1)
            hint = f" Did you mean {close[0]!r}?" if close else ""
            raise ConfigError(f"{where}: method.params: {cls.__name__} has no parameter {name!r}."
                              f"{hint} Valid names: {', '.join(sorted(valid))}.")
    out = dict(params)
    if "classes" in out:
        out["classes"] = _check_classes(out["classes"], where)
    try:
        est = cls(**{k: v for k, v in out.items() if k != "classes"})
        check_estimator_params(est)
        own = getattr(est, "_check_params", None)
        if callable(own):
            own()
    except ConfigError as exc:
        raise ConfigError(f"{where}: method.params: {exc}") from exc
    return out


def _check_classes(value: Any, where: str) -> list[Any]:
    ok = isinstance(value, (list, tuple)) and len(value) >= 2
    kinds = {isinstance(v, str) for v in value} if ok else set()
    ok = ok and len(kinds) == 1 and all(
        isinstance(v, str) or (isinstance(v, numbers.Real) and not isinstance(v, bool)
                               and np.isfinite(v)) for v in value)  # type: ignore[call-overload]
    if ok:
        classes = np.unique(np.asarray(value))
        ok = classes.size == len(value)
    if not ok:
        raise ConfigError(f"{where}: method.params.classes must list every label once, at least "
                          f"two, all numbers or all strings (e.g. classes: [0, 1, 2]); got "
                          f"{value!r}. Leave it out to learn the labels from the targets.")
    return classes.tolist()


class MethodAdapter:
    """Fold row segments into an estimator, checkpoint it, hand out the model.

    The state is the estimator itself: ``partial_fit`` merges each segment's
    mergeable summary into it.  An estimator without an exact ``partial_fit``
    has no summary to merge and is fitted on all rows in one segment.

    Parameters
    ----------
    name : str
        The spec's method name.
    params : dict
        Its parameters; ``random_state`` defaults to ``seed``.
    seed : int
        The workflow seed.

    Notes
    -----
    ``partial_fit`` of a distsketch estimator numbers new rows after the rows
    it has seen, so segment ``[start, stop)`` meets the same global row
    offsets as in a fit on all rows.
    """

    def __init__(self, name: str, params: dict[str, Any], seed: int):
        self.name = name
        self.params = dict(params)
        self.cls = resolve_method(name, "workflow spec")
        # a classifier's labels: from the spec, else learned from the targets before the fold
        given = self.params.pop("classes", None)
        self.classes: np.ndarray | None = None if given is None else np.asarray(given)
        self.classes_given = given is not None
        # NystromKernelPCA.partial_fit keeps its first landmarks: merging would not equal a refit
        self.incremental = (hasattr(self.cls, "partial_fit")
                            and getattr(self.cls, "_partial_fit_equals_fit", True))
        if "random_state" in inspect.signature(self.cls).parameters:
            self.params.setdefault("random_state", seed)
        self.needs_classes = self.incremental and takes_classes(self.cls)
        self.state: Any = None

    def update(self, X: Any, start: int, y: np.ndarray | None = None) -> None:
        """Fold the rows ``X`` (global rows ``start, start + len(X)``) into the state."""
        if not self.incremental:
            if start != 0:
                raise WorkflowError(f"{self.name} has no partial_fit: it can only be fitted on all "
                                    "rows at once; rerun with --full.")
            est = self.cls(**self.params)
            self.state = est.fit(X) if y is None else est.fit(X, y)
            return
        if self.state is None:
            self.state = self.cls(**self.params)
        if y is None:
            self.state.partial_fit(X)
        elif self.needs_classes and self.classes is not None:
            self._check_labels(y, start)
            self.state.partial_fit(X, y, classes=self.classes)
        else:
            self.state.partial_fit(X, y)

    def _check_labels(self, y: np.ndarray, start: int) -> None:
        """Refuse labels outside the classes fixed for this state, naming the first one."""
        assert self.classes is not None
        new = np.setdiff1d(np.unique(np.ravel(y)), self.classes)
        if new.size == 0:
            return
        rows = f"rows {start}..{start + len(y)}"
        if self.classes_given:
            fix = ("add it to method.params.classes and rerun with --full")
            source = "method.params.classes"
        else:
            fix = "rerun with --full to learn the classes from all targets again"
            source = "the classes learned from the targets when the workflow state was created"
        raise WorkflowError(f"{self.name}: the targets of {rows} hold the label {new[0].item()!r}, "
                            f"which is not among {source} ({self.classes.tolist()}); {fix}.")

    def save(self, folder: Path) -> None:
        """Write the state into ``folder`` (inside an uncommitted checkpoint)."""
        from distsketch.io.model import save_model

        save_model(self.state, folder / "model.zarr")

    def load(self, folder: Path) -> None:
        """Read the state written by :meth:`save`."""
        from distsketch.io.model import load

        self.state = load(folder / "model.zarr")

    def model(self) -> Any:
        """The fitted estimator."""
        return self.state
