"""Kernel ridge classification on sketched features (one-vs-rest, ±1 targets)."""

from __future__ import annotations

from typing import Any

import numpy as np
from sklearn.base import ClassifierMixin

from distsketch.errors import ConfigError
from distsketch.estimators.base import fit_context, summary_context
from distsketch.estimators.labels import (
    accuracy,
    encode_labels,
    labels_of_scores,
    one_vs_rest,
    softmax_scores,
)
from distsketch.estimators.ridge.calibration import (
    calibration_rows,
    calibration_sampler,
    fit_inverse_temperature,
    loo_decision_values,
)
from distsketch.estimators.ridge.class_weight import class_row_weights
from distsketch.estimators.ridge.defaults import feature_block_functions
from distsketch.estimators.ridge.regressor import SketchedKernelRidge, feature_block_function, stack_xy
from distsketch.estimators.ridge.system import RidgeSystem
from distsketch.estimators.ridge.weights import check_sample_weight, check_weight_scale
from distsketch.footprint import Footprint
from distsketch.graph import reduce_blocks
from distsketch.ops.namespace import asarray, densify, host_dtype
from distsketch.summaries.ridge import cv_folds, map_features
from distsketch.summaries.sums import SumSummary
from distsketch.validation import StrOptions
from distsketch.validation.finite import is_array_api

__all__ = ["SketchedKernelRidgeClassifier"]


class SketchedKernelRidgeClassifier(ClassifierMixin, SketchedKernelRidge):
    """One-vs-rest classification with sketched kernel ridge regression.

    Classes are encoded as ±1 targets (one column per class; one column for
    two classes), exactly as scikit-learn's ``RidgeClassifier`` does, and the
    regression is solved once for all columns from the same summary.

    Parameters
    ----------
    class_weight : None, "balanced" or dict, default None
        Weights of the classes' rows, as scikit-learn's ``RidgeClassifier``:
        a dict maps labels to weights (labels not in it weigh 1);
        "balanced" gives class c the weight ``n / (n_classes · n_c)``.  The
        weights multiply ``sample_weight`` row by row and are folded into the
        same one-pass summary.  "balanced" counts the classes from y, which
        the classifier reads on the driver before the pass (y is encoded there
        anyway); not with ``cv``, and "balanced" not in ``partial_fit`` (the
        counts of later batches are unknown).
    Other parameters: see :class:`SketchedKernelRidge` (``alpha`` must be a
    scalar, or use ``cv``).

    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
    coef_ : ndarray of shape (m,) for two classes else (n_classes, m)
    Other attributes as :class:`SketchedKernelRidge`.

    proba_scale_ : float
        Inverse temperature a of ``predict_proba = softmax(a · scores)``.
    calibration_rows_ : int
        Sample rows ``proba_scale_`` was fitted on.

    Notes
    -----
    Same cost as the regressor with t = n_classes targets (t = 1 for two
    classes).  ``predict`` returns labels; ``decision_function`` the scores.

    ``predict_proba`` is calibrated by temperature scaling:
    ``softmax(a · scores)`` (scores ``(−d, d)`` for two classes) with one
    scalar ``a > 0`` that minimises the log-loss of the leave-one-out scores
    of n / 8 rows (at least 1000, at most 2000) sampled (bottom-k by
    ``hash(seed, row)``) in the same pass that reduces ``ZᵀZ``; the
    leave-one-out scores are exact for ridge, from the summary and the
    factorisation of the solve (see :mod:`~distsketch.estimators.ridge.calibration`).
    One scalar keeps ``argmax predict_proba == predict``.  The sample lives
    only in the fitted object: ``partial_fit`` merges the samples of its
    calls and refits ``a``; after ``load`` a ``partial_fit`` calibrates on
    the rows it is given from then on (an incremental workflow segment keeps
    the last ``a``).  Cost: O(k · m²) for those k rows after the solve (no
    factorisation of its own), 2000 × (d + t + 1) floats per summary state.

    With ``cv``, candidates (``alphas`` × ``gammas``) are ranked by validation
    accuracy (ties by mean squared error of the ±1 scores): the folds'
    summaries come from one pass as for the regressor, and a second pass
    scores every candidate on its held-out rows (per task: the block, its
    features for each candidate map and rows × n_alphas × t scores; the
    operands are k × n_alphas × m × t fold weights per map).

    References
    ----------
    Song, Woodruff, Yu, Zhang. ICML 2021, Appendix E.
    """

    _parameter_constraints = {
        **SketchedKernelRidge._parameter_constraints,
        "class_weight": [None, StrOptions({"balanced"}), dict],
    }

    def __init__(self, *, features: Any = None, alpha: Any = "auto", fit_intercept: bool = True,
                 standardize: bool | str = "auto", cv: int | None = None, alphas: Any = None,
                 gammas: Any = None, split_every: int = 8, class_weight: Any = None,
                 random_state: Any = None):
        super().__init__(features=features, alpha=alpha, fit_intercept=fit_intercept,
                         standardize=standardize, cv=cv, alphas=alphas, gammas=gammas,
                         split_every=split_every, random_state=random_state)
        self.class_weight = class_weight

    # ---------------------------------------------------------------- calibration
    def _row_sampler(self) -> Any:
        return calibration_sampler(self.seed_)

    def _sampled_rows(self, sampler: Any, state: dict, weighted: bool, x_dtype: str) -> dict:
        # rows (inputs, targets, weight) whatever the weighting, so partial_fit samples merge
        index, rows = sampler.finalize(state)
        d, t = int(self.n_features_in_), int(self.n_targets_)
        w = rows[:, -1:] if weighted else np.ones((rows.shape[0], 1))
        return {"rows": sampler.state_of(index, np.hstack([rows[:, :d + t], w])),
                "dtype": x_dtype}

    def _merge_samples(self, samples: list[dict]) -> dict:
        rows = calibration_sampler(self.seed_).merge([s["rows"] for s in samples])
        return {"rows": rows, "dtype": samples[-1]["dtype"]}

    def _keep_sample(self, sample: dict | None) -> None:
        if sample is None:
            return
        self._calibration_dtype = sample["dtype"]
        old = self.__dict__.get("_calibration_sample")
        self._calibration_sample = sample["rows"] if old is None else \
            calibration_sampler(self.seed_).merge([old, sample["rows"]])

    def _calibrate(self, system: RidgeSystem) -> None:
        # proba_scale_ from the sample's leave-one-out values (leverages from the solve's system)
        sample = self.__dict__.get("_calibration_sample")
        if sample is None:
            if not hasattr(self, "proba_scale_"):
                self.proba_scale_, self.calibration_rows_ = 1.0, 0
            return
        # the bottom-k of the sample sized to the rows seen (calibration_rows)
        sampler = calibration_sampler(self.seed_, calibration_rows(self.n_samples_seen_))
        _, rows = sampler.finalize(sampler.merge([sample]))
        d, t = int(self.n_features_in_), int(self.n_targets_)
        X = np.asarray(rows[:, :d], dtype=self._calibration_dtype)
        fn, ops = feature_block_function(self.features_, self._scaler())
        Z = fn(X, 0, *ops)
        Z = np.asarray(densify(Z), dtype=np.float64)
        c = np.atleast_1d(np.asarray(self.intercept_, dtype=np.float64))
        D, keep = loo_decision_values(Z, rows[:, d:d + t], rows[:, -1], system.state,
                                      float(self.alpha_), self.fit_intercept, self._W[0], c,
                                      system=system)
        self.proba_scale_ = fit_inverse_temperature(D, rows[keep, d:d + t], rows[keep, -1])
        self.calibration_rows_ = int(keep.sum())

    def _row_weights(self, sample_weight: Any, n_rows: int, where: str,
                     codes: Any = None) -> Any:
        """``sample_weight`` times the class weights of the rows with class ``codes`` (default:
        those of the labels just encoded); None when both are None."""
        if codes is None:
            codes = self.__dict__.pop("_codes", None)
        if self.class_weight is None:
            return sample_weight
        if self.cv is not None:
            raise ConfigError(f"{where}: class_weight with cv is not supported (the folds score "
                              "rows unweighted); drop one of them.")
        # the codes of the labels (O(n), not kept on the model)
        cw = class_row_weights(self.class_weight, self.classes_, codes, where)
        classes, row_codes = self.classes_, np.asarray(codes)

        def label_of(row: int) -> Any:
            label = classes[row_codes[row]]
            return label.item() if isinstance(label, np.generic) else label

        # the totals are checked here, where the weights can be named (the regressor's own
        # check would blame sample_weight for weights the class weights made large)
        if sample_weight is None:
            check_weight_scale(cw, where, "class_weight", label_of)
            return cw
        with np.errstate(over="ignore"):
            w = cw * check_sample_weight(sample_weight, n_rows, where)
        check_weight_scale(w, where, "sample_weight × class_weight", label_of)
        return w

    def _labels(self, y: Any, classes: Any = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(classes, codes, Y)``: the labels' classes, codes and ±1 matrix (changes nothing)."""
        # labels as scikit-learn reads them (type_of_target, classes in their own dtype);
        # their alignment with X is checked with the ±1 matrix by the regressor
        classes, codes = encode_labels(y, None, owner=type(self).__name__, classes=classes,
                                       regressor="SketchedKernelRidge")
        Y = one_vs_rest(codes, classes.size)
        return classes, codes, (Y[:, 1:] if classes.size == 2 else Y)

    def _encode(self, y: Any, classes: Any = None) -> np.ndarray:
        self.classes_, self._codes, Y = self._labels(y, classes)
        return Y

    def _forget_calibration(self) -> None:
        for attr in ("_calibration_sample", "proba_scale_", "calibration_rows_"):
            self.__dict__.pop(attr, None)

    def _device_targets(self, X: Any, Y: Any) -> Any:
        # labels are encoded on the host: the ±1 targets go to the device of X's blocks
        meta = getattr(X, "_meta", X)
        return asarray(Y, like=meta) if is_array_api(meta) else Y

    @fit_context
    def fit(self, X: Any, y: Any, sample_weight: Any = None) -> SketchedKernelRidgeClassifier:
        """Fit on labels y of shape (n_samples,), rows weighted by ``sample_weight`` (optional)."""
        if np.ndim(self.alpha) > 0 and self.cv is None:
            raise ConfigError(f"{type(self).__name__}: alpha must be a scalar (or set cv to "
                              "choose among alphas).")
        Y = self._encode(y)
        w = self._row_weights(sample_weight, Y.shape[0], f"{type(self).__name__}.fit")
        self._forget_calibration()
        super().fit(X, Y, w)
        return self

    def _prepare_targets(self, y: Any, n_rows: int) -> tuple[Any, bool]:
        # the ±1 matrix has one column for two classes: reported as one output
        Y, _ = super()._prepare_targets(y, n_rows)
        return Y, self.classes_.size == 2

    @fit_context
    def partial_fit(self, X: Any, y: Any, classes: Any = None,
                    sample_weight: Any = None) -> SketchedKernelRidgeClassifier:
        """Merge new labelled rows (weighted by ``sample_weight``); ``classes`` on the first call."""
        if hasattr(self, "coef_"):
            return self.fold(self.summarize(X, y, row_offset=self.n_samples_seen_,
                                            sample_weight=sample_weight))
        self._forget_calibration()
        if classes is None:
            raise ConfigError(f"{type(self).__name__}.partial_fit: pass classes=... (all labels) "
                              "on the first call.")
        Y = self._encode(y, classes)
        self._refuse_balanced()
        w = self._row_weights(sample_weight, Y.shape[0], f"{type(self).__name__}.partial_fit")
        return super().partial_fit(X, Y, sample_weight=w)

    def _refuse_balanced(self) -> None:
        if isinstance(self.class_weight, str):
            raise ConfigError(f"{type(self).__name__}.partial_fit: class_weight='balanced' needs "
                              "the class counts of all rows, which partial_fit does not see; "
                              "pass a dict of weights, or fit on all rows.")

    @summary_context
    def summarize(self, X: Any, y: Any = None, *, row_offset: int,
                  sample_weight: Any = None) -> dict:
        """The normal equations of rows X with labels y (global rows from ``row_offset``).

        As :meth:`SketchedKernelRidge.summarize`, with y the labels (among
        ``classes_``) and each row weighted by its class weight; changes nothing.
        """
        self._check_is_fitted("coef_")
        _, codes, Y = self._labels(y, self.classes_)
        self._refuse_balanced()
        w = self._row_weights(sample_weight, Y.shape[0], f"{type(self).__name__}.partial_fit",
                              codes=codes)
        return super().summarize(X, Y, row_offset=row_offset, sample_weight=w)

    def decision_function(self, X: Any) -> Any:
        """Scores of shape (n_samples,) for two classes else (n_samples, n_classes)."""
        return self._shape_output(self._decision(X))

    def predict_proba(self, X: Any) -> Any:
        """Calibrated class probabilities ``softmax(a · scores)``, shape (n_samples, n_classes).

        ``a = proba_scale_`` is fitted by temperature scaling on
        leave-one-out scores of a row sample (see the class Notes).  For two
        classes the scores are (−d, d) with d = ``decision_function``, so the
        probability of ``classes_[1]`` is 1 / (1 + e^(−2ad)).  Rows sum to 1
        and their argmax is ``predict``.  Dask in, dask out.
        """
        return softmax_scores(self.decision_function(X) * getattr(self, "proba_scale_", 1.0))

    def _cv_scores(self, X: Any, Y: Any, maps: list, folds: list, totals: list,
                   alphas: np.ndarray) -> dict[str, np.ndarray]:
        scores = super()._cv_scores(X, Y, maps, folds, totals, alphas)
        k, t = int(self.cv or 0), int(Y.shape[1])  # called only with cv set
        weights: list[list[np.ndarray]] = []
        for g in range(len(maps)):
            m = int(totals[g]["ztz"].shape[0])
            weights.append([np.zeros((k, len(alphas), m, t)), np.zeros((k, len(alphas), t))])
        for g, fold, _, W, c in self._fold_solutions(folds, totals, alphas):
            weights[g][0][fold], weights[g][1][fold] = W, c
        fns, ops, counts = feature_block_functions(maps, self._scaler())
        chunk = _FoldAccuracy(fns, counts, int(X.shape[1]), host_dtype(X.dtype).str, k, self.seed_)
        st = reduce_blocks(SumSummary(chunk), stack_xy(X, Y), *ops,
                           *[a for w in weights for a in w], split_every=self.split_every,
                           footprint=chunk.footprint(t, len(alphas), weights),
                           name="ridge-cv-accuracy")
        scores["accuracy"] = st["correct"] / max(1, int(st["n"]))
        return scores

    @staticmethod
    def _cv_best(scores: dict[str, np.ndarray]) -> tuple[int, int]:
        acc, mse = scores["accuracy"], scores["mse"]
        best = np.lexsort((mse.ravel(), -acc.ravel()))[0]
        g, a = np.unravel_index(int(best), acc.shape)
        return int(g), int(a)

    def predict(self, X: Any) -> Any:
        """Class labels of shape (n_samples,) (dask in -> dask out)."""
        self._check_is_fitted("coef_")
        return labels_of_scores(self.classes_, self._decision(X))

    def score(self, X: Any, y: Any, sample_weight: Any = None,
              metric: str = "accuracy") -> float:
        """Mean accuracy of ``predict(X)`` against the labels y (weighted by ``sample_weight``)."""
        if metric != "accuracy":
            raise ConfigError(f"{type(self).__name__}.score: metric={metric!r}; a classifier "
                              "scores by 'accuracy' (the regressor's r2, rmse and mae do not "
                              "apply to labels).")
        return accuracy(y, self.predict(X), sample_weight)


class _FoldAccuracy:
    """Held-out correct counts per (map, alpha) of the k fold models (a picklable chunk function).

    Blocks are ``[X | ±1 targets]``; a row is scored by the model trained without its fold
    (as :class:`~distsketch.summaries.ridge.RidgeSummary` assigns them).  Operands: every
    map's own, then per map the fold weights (k, n_alphas, m, t) and intercepts (k, n_alphas, t).
    """

    def __init__(self, functions: list, n_operands: list[int], n_features: int, x_dtype: str,
                 n_folds: int, seed: int):
        self.functions = list(functions)
        self.n_operands = list(n_operands)
        self.n_features = int(n_features)
        self.x_dtype = str(x_dtype)
        self.n_folds = int(n_folds)
        self.seed = int(seed)

    def footprint(self, n_targets: int, n_alphas: int, weights: list) -> Footprint:
        """Per row: the input and target columns, one map's features twice and the scores of
        every alpha; fixed: the fold weights and intercepts (``weights``, per map)."""
        widest = max(w[0].shape[2] for w in weights)
        return Footprint(
            per_row=8.0 * (self.n_features + n_targets + 2 * widest + 2 * n_alphas * n_targets),
            fixed=8.0 * sum(w[0].size + w[1].size for w in weights))

    def __call__(self, block: Any, row_offset: int, *operands: Any) -> dict:
        d = self.n_features
        X = np.ascontiguousarray(block[:, :d], dtype=self.x_dtype)
        y = np.asarray(block[:, d:], dtype=np.float64)
        truth = y[:, 0] > 0 if y.shape[1] == 1 else y.argmax(axis=1)
        fold = cv_folds(self.seed, row_offset, X.shape[0], self.n_folds)
        fold_weights = operands[sum(self.n_operands):]
        correct = []
        features = map_features(self.functions, self.n_operands, X, row_offset, operands)
        for g, Z in enumerate(features):
            W, c = fold_weights[2 * g], fold_weights[2 * g + 1]
            hits = np.zeros(W.shape[1])
            for f in range(self.n_folds):
                sel = fold == f
                if not sel.any():
                    continue
                S = np.einsum("rm,amt->art", Z[sel], W[f]) + c[f][:, None, :]
                pred = S[..., 0] > 0 if S.shape[2] == 1 else S.argmax(axis=2)
                hits += (pred == truth[sel][None, :]).sum(axis=1)
            correct.append(hits)
        return {"correct": np.asarray(correct), "n": X.shape[0]}
