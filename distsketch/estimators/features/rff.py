"""Random Fourier features transformer."""

from __future__ import annotations

from typing import Any

from distsketch.errors import ConfigError
from distsketch.estimators.autosize import AutoSized, is_auto
from distsketch.estimators.base import OperatorSize, RowMapTransformer, fit_context
from distsketch.estimators.kernel_params import GAMMA_CONSTRAINT, fit_kernel_params
from distsketch.footprint import Footprint
from distsketch.ops.kernels import SHIFT_INVARIANT_NAMES
from distsketch.ops.rff import RFF_FORMS, rff_block, rff_fold_scaling, rff_map_footprint, rff_operator
from distsketch.validation import Interval, Options

__all__ = ["RandomFourierFeatures"]


class RandomFourierFeatures(AutoSized, RowMapTransformer):
    """Random Fourier features for shift-invariant kernels, blockwise and out of core.

    z(x) = sqrt(2/m) cos(Wᵀx + b) with E[z(x)ᵀz(y)] = k(x, y) (``form="offset"``),
    or z(x) = sqrt(2/m) [cos(Wᵀx), sin(Wᵀx)] with m/2 frequencies
    (``form="paired"``), the same expectation at lower variance for equal m.

    Parameters
    ----------
    kernel : {"rbf", "laplacian", "cauchy"}, default "rbf"
        ``exp(-γ‖x−y‖²)``, ``exp(-γ‖x−y‖₁)`` or ``1/(1+γ‖x−y‖²)``.
    gamma : float, "median" or None, default None
        Kernel scale; None means 1 / n_features, "median" the median
        heuristic on a 1000-row sample
        (:func:`~distsketch.estimators.kernel_params.median_gamma`, one pass
        over X in ``fit``).
    n_components : int or "auto", default 100
        Number of features m; "auto" chooses the smallest m whose relative
        kernel error reaches ``target_error`` (:mod:`~distsketch.estimators.autosize`;
        an even m for ``form="paired"``).
    orthogonal : bool, default False
        Orthogonal random features (lower variance; rbf and cauchy).
    form : {"offset", "paired"}, default "offset"
        "offset": m phase-shifted cosines.  "paired": a cosine and a sine per
        frequency, m/2 frequencies (m must be even), so the output width is
        still m; its kernel estimate has variance 2V/m against (V + 1/2)/m
        for "offset", V = Var[cos(wᵀ(x − y))] <= 1/2 for the Gaussian kernel
        (Sutherland & Schneider 2015), i.e. never more and about half where
        k(x, y) is large.  The paired form's frequencies are the first m/2 of
        the offset form's for the same seed.
    target_error : float or None, default None
        Relative kernel error ‖K − K̂‖_F / ‖K‖_F on a row sample that
        ``n_components="auto"`` must reach (None: 0.1); unused otherwise.
    random_state : int, Generator or None
        Seed; the operator is a pure function of it.

    Attributes
    ----------
    seed_ : int
        The resolved seed.
    gamma_ : float
        The kernel scale used.
    random_weights_ : ndarray of shape (n_features_in_, n_components)
        (n_components // 2 columns for ``form="paired"``).
    random_offset_ : ndarray of shape (n_components,)
        Phases b (shape (0,) for ``form="paired"``, which has none).
    kernel_params_ : dict
        The parameters of the approximated kernel, by name (``gamma_`` among them).
    n_samples_seen_ : int
        Rows ``fit`` was given (a data-oblivious map reads only their shape).
    n_components_ : int
        The number of features used (``n_components``, or the one "auto" chose).
    kernel_error_ : float
        ``n_components="auto"`` only: the relative kernel error of the fitted
        map on the pilot's evaluation rows (at most ``target_error``).
    pilot_sizes_, pilot_errors_ : ndarray
        ``n_components="auto"`` only: the sizes the pilot measured (increasing)
        and their relative kernel errors on the evaluation rows.
    n_features_in_ : int
    n_output_features_ : int

    Notes
    -----
    Cost per row: 2·d·m flops + m cos (offset), d·m flops + m cos/sin
    (paired); a task holds its block and its block_rows × m output.  The
    operator (d × m, or d × m/2 paired) travels once per worker.
    float32 input gives float32 features (cos is ~20x faster in float32).
    ``n_components="auto"``: one pass for a 500-row sample, then maps of
    32, 64, 128 features and the model's size on it (error ∝ m^(−1/2)).

    References
    ----------
    Rahimi, Recht. Random features for large-scale kernel machines. NIPS 2007.
    Ghashami, Perry, Phillips. Streaming kernel principal component analysis.
    AISTATS 2016 (RFF maps as the first stage of SKPCA).
    Sutherland, Schneider. On the error of random Fourier features. UAI 2015.

    Examples
    --------
    >>> import numpy as np
    >>> from distsketch import RandomFourierFeatures
    >>> X = np.random.default_rng(0).normal(size=(100, 5))
    >>> Z = RandomFourierFeatures(gamma=0.1, n_components=64, random_state=0).fit_transform(X)
    >>> Z.shape
    (100, 64)
    """

    _array_api_support = True

    _parameter_constraints = {
        "kernel": [Options(SHIFT_INVARIANT_NAMES)],
        "gamma": GAMMA_CONSTRAINT,
        "n_components": [Interval(int, 1, None), Options({"auto"})],
        "orthogonal": ["boolean"],
        "form": [Options(RFF_FORMS)],
        "target_error": [Interval(float, 0, None, closed="neither"), None],
        "random_state": ["random_state"],
    }

    def __init__(self, *, kernel: str = "rbf", gamma: float | str | None = None,
                 n_components: int | str = 100, orthogonal: bool = False, form: str = "offset",
                 target_error: float | None = None, random_state: Any = None):
        self.kernel = kernel
        self.gamma = gamma
        self.n_components = n_components
        self.orthogonal = orthogonal
        self.form = form
        self.target_error = target_error
        self.random_state = random_state

    _accepts_sparse = True

    @fit_context
    def fit(self, X: Any, y: Any = None) -> RandomFourierFeatures:
        """Draw the operator for X's number of features.

        Reads only X's shape, unless ``gamma="median"`` (one pass for a row sample).
        """
        if self.form == "paired" and not is_auto(self.n_components) and int(self.n_components) % 2:
            m = int(self.n_components)
            raise ConfigError(
                f"RandomFourierFeatures(form='paired') outputs a (cos, sin) pair per frequency, "
                f"so n_components must be even; got {m}. Use {m + 1} or {m - 1}.")
        X = self._check_input(X, reset=True, allow_sparse=True)
        self._check_params_for_shape(*X.shape)
        seed = self._init_seed()
        self.n_components_ = self._resolve_size(X)
        name, params = fit_kernel_params(self, X)
        self.random_weights_, self.random_offset_ = rff_operator(
            seed, name, params["gamma"], X.shape[1], self.n_components_, self.orthogonal,  # type: ignore[arg-type]
            self.form)
        self.n_output_features_ = self.n_components_
        self.kernel_params_ = params
        self.n_samples_seen_ = int(X.shape[0])
        self._certify(X)
        return self

    def _admissible(self, m: int) -> int:
        return m + m % 2 if self.form == "paired" else m

    def _operator_sizes(self, n_samples: int, n_features: int) -> list[OperatorSize]:
        """The weights W (d x m float64), refused before they are drawn if too large."""
        m, d = self._size_for_check(), int(n_features)
        return [(f"RandomFourierFeatures: a map of {m} features on {d} input features has weights W "
                 f"({d} x {m} float64) that", 8 * m * d,
                 "lower n_components (n_random_features of a model holding this map) or reduce "
                 "the input's width first (feature selection, PCA)")]

    def _operands(self) -> tuple:
        return (self.random_weights_, self.random_offset_)

    def scaled_operands(self, mean: Any, scale: Any) -> tuple | None:
        """Operands of this map applied to ``(x − mean) / scale``, taking raw rows.

        ``(W', b')`` of :func:`~distsketch.ops.rff.rff_fold_scaling` for the
        per-block function (``_map_block``): the standardisation rides in the
        operator, so a pass never forms the standardised block.  None where
        it does not fold (the paired form, or a large ``|mean| / scale``).
        """
        return rff_fold_scaling(self.random_weights_, self.random_offset_, mean, scale)

    def _map_footprint(self) -> Footprint:
        return rff_map_footprint(self.n_features_in_, self.n_components_)

    # takes out=: the ridge summary maps its slices into one reused buffer
    _map_block = staticmethod(rff_block)
