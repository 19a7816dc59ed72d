"""The method adapter: a spec's estimator as a foldable, checkpointable state."""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Any

import numpy as np

from distsketch import registry
from distsketch.errors import ConfigError, WorkflowError

__all__ = ["MethodAdapter", "resolve_method"]


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
        # NystromKernelPCA.partial_fit keeps its first landmarks: merging would not equal a refit
        self.incremental = (hasattr(self.cls, "partial_fit")
                            and getattr(self.cls, "_partial_fit_equals_fit", True))
        if "random_state" in inspect.signature(self.cls).parameters:
            self.params.setdefault("random_state", seed)
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
        else:
            self.state.partial_fit(X, y)

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
