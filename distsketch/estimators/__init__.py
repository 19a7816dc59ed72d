"""scikit-learn-style estimators, composed of :mod:`distsketch.ops` and :mod:`distsketch.summaries`.

Each sub-package holds one family; a new estimator goes into the family whose
methods it shares (its summary into :mod:`distsketch.summaries`, its per-block
kernel into :mod:`distsketch.ops`, its public name into
:data:`distsketch.registry.ESTIMATORS`):

=============================== ================================================
sub-package                     holds
=============================== ================================================
``estimators.features``         explicit kernel feature maps: random Fourier
                                features, CountSketch / TensorSketch / SRHT /
                                TensorSRHT / PolySketch, Gaussian and
                                dot-product (NTK, arc-cosine) sketches,
                                database-friendly projections
``estimators.decomposition``    kernel PCA: Frequent Directions, streaming
                                kernel PCA (RNCA), k-Space kernel PCA and PCR
``estimators.nystrom``          Nystrom features and kernel PCA, landmark
                                choice, MEKA and block kernel approximations
``estimators.ridge``            sketched kernel ridge regression and its
                                classifier: defaults, cross-validation,
                                calibration, folding of segment summaries
``estimators.solvers``          kernel linear systems: the preconditioned
                                solver, Falkon, MEKA kernel ridge
``estimators.sampling``         Gram sparsification and quantization,
                                randomized rounding, sparsified kernel PCA
=============================== ================================================

Shared by all families: :mod:`~distsketch.estimators.base` (the estimator
protocol and the fit context), :mod:`~distsketch.estimators.kernel_params`,
:mod:`~distsketch.estimators.autosize` and :mod:`~distsketch.estimators.labels`.
The flat module paths of earlier releases (``distsketch.estimators.rff``, ...)
still import, as aliases of the modules above.
"""

from distsketch.module_aliases import install

install("distsketch.estimators", {
    "rff": "features.rff",
    "polynomial": "features.polynomial",
    "dot_product": "features.dot_product",
    "linear_stage": "features.linear_stage",
    "projection": "features.projection",
    "frequent_directions": "decomposition.frequent_directions",
    "streaming_kpca": "decomposition.streaming_kpca",
    "kspace": "decomposition.kspace",
    "kspace_classifier": "decomposition.kspace_classifier",
    "nystrom_fold": "nystrom.fold",
    "landmark_choice": "nystrom.landmark_choice",
    "meka": "nystrom.meka",
    "block_kernel": "nystrom.block_kernel",
    "ridge_classifier": "ridge.classifier",
    "ridge_cv": "ridge.cv",
    "ridge_defaults": "ridge.defaults",
    "ridge_fold": "ridge.fold",
    "ridge_summary": "ridge.weights",
    "ridge_calibration": "ridge.calibration",
    "class_weight": "ridge.class_weight",
    "statistical_dimension": "ridge.statistical_dimension",
    "solver": "solvers.solver",
    "falkon": "solvers.falkon",
    "falkon_classifier": "solvers.falkon_classifier",
    "meka_ridge": "solvers.meka_ridge",
    "sparsified": "sampling.sparsified",
    "sparsified_kpca": "sampling.sparsified_kpca",
    "rounding": "sampling.rounding",
})
