"""One vocabulary over every public estimator (``distsketch.__all__``).

Every estimator counts its rows in ``n_samples_seen_``; ``n_components`` is the
output width; an estimator that fits a kernel has ``kernel_params_`` (and
``gamma_`` where the kernel has a scale); each parameter name has one meaning
(:data:`VOCABULARY`, checked against each class's numpydoc Parameters section).
For kernel PCA: ``components_`` of shape (n_components, features), and
``transform`` is the (centred, where the estimator centres) projection onto
``components_``."""

import inspect
import re

import numpy as np
import pytest
from sklearn.base import is_classifier, is_regressor

import distsketch as ds
from distsketch.ops.kernels import pairwise_kernel

RNG = np.random.default_rng(0)
X = RNG.normal(size=(300, 5))
GAMMA = 0.3


def _skpca_features(model, A):
    return model.features_.transform(A) @ model.components_.T


def _nystrom_features(model, A):
    Z = pairwise_kernel(A, model.landmarks_, "rbf", gamma=GAMMA) @ model.normalization_
    return (Z - model.mean_) @ model.components_.T


def _kspace_features(model, A):
    return model.sketch_S_.transform(A) @ model.components_.T


def _sparsified_features(model, A):
    K = pairwise_kernel(A, model.X_fit_, "rbf", gamma=GAMMA)
    Kc = K - K.mean(axis=1, keepdims=True) - model.K_fit_rows_ + model.K_fit_rows_.mean()
    return Kc @ model.components_.T


CASES = [
    # (estimator, width of the space the components live in, projection by hand)
    (ds.StreamingKernelPCA(n_components=3, n_random_features=64, sketch_size=12, gamma=GAMMA,
                           random_state=0), 64, _skpca_features),
    (ds.StreamingKernelPCA(n_components=3, n_random_features=64, method="rnca", gamma=GAMMA,
                           random_state=0), 64, _skpca_features),
    (ds.NystromKernelPCA(n_components=3, n_landmarks=40, gamma=GAMMA, random_state=0), 40,
     _nystrom_features),
    (ds.NystromKernelPCA(n_components=3, n_landmarks=40, gamma=GAMMA, center=True,
                         random_state=0), 40, _nystrom_features),
    (ds.KSpaceKernelPCA(n_components=3, degree=2, sketch_dim=24, random_state=0), 24,
     _kspace_features),
    (ds.SparsifiedKernelPCA(n_components=3, gamma=GAMMA, p=0.5, tile_rows=100,
                            random_state=0), X.shape[0], _sparsified_features),
]


@pytest.mark.parametrize("model,width,project", CASES,
                         ids=[f"{type(c[0]).__name__}-{i}" for i, c in enumerate(CASES)])
def test_kernel_pca_exposes_rows_seen_and_row_components(model, width, project):
    assert not hasattr(model, "components_")
    model.fit(X)
    assert model.n_samples_seen_ == X.shape[0]
    assert model.components_.shape == (model.n_components, width)
    np.testing.assert_allclose(model.transform(X), project(model, X), rtol=1e-8, atol=1e-8)


@pytest.mark.parametrize("model", [CASES[0][0], CASES[2][0]], ids=["StreamingKernelPCA",
                                                                   "NystromKernelPCA"])
def test_partial_fit_counts_every_row(model):
    model = model.__class__(**model.get_params())
    model.partial_fit(X[:120]).partial_fit(X[120:])
    assert model.n_samples_seen_ == X.shape[0]
    assert model.components_.shape[0] == model.n_components


def test_frequent_directions_components_are_orthonormal_rows():
    fd = ds.FrequentDirections(sketch_size=4).fit(X)
    assert fd.n_samples_seen_ == X.shape[0]
    assert fd.components_.shape == (4, X.shape[1])
    np.testing.assert_allclose(fd.components_ @ fd.components_.T, np.eye(4), atol=1e-12)


# ------------------------------------------------------------ every public estimator
ESTIMATORS = sorted((obj for name in ds.__all__
                     if inspect.isclass(obj := getattr(ds, name)) and hasattr(obj, "fit")),
                    key=lambda c: c.__name__)

# small settings that fit on XS in well under a second each
SMALL = {
    "BlockKernelApproximation": dict(n_clusters=2),
    "CountSketch": dict(n_components=4),
    "DatabaseFriendlyProjection": dict(n_components=4),
    "DotProductKernelSketch": dict(kernel="arccos1", n_components=32, check_variance=False),
    "FrequentDirections": dict(sketch_size=4),
    "GaussianSketch": dict(gamma=0.01, n_components=32),
    "KSpaceKernelPCA": dict(n_components=2),
    "KernelPCR": dict(n_components=3),
    "KernelPCRClassifier": dict(n_components=3),
    "KernelSolver": dict(),
    "MEKA": dict(n_clusters=2, rank=2),
    "MEKAKernelRidge": dict(meka=ds.MEKA(n_clusters=2, rank=2)),
    "NystromFeatures": dict(n_landmarks=5),
    "NystromKernelPCA": dict(n_components=2, n_landmarks=10),
    "NystromKernelRidge": dict(n_centers=20),
    "NystromKernelRidgeClassifier": dict(n_centers=20),
    "PolySketch": dict(n_components=16),
    "RandomFourierFeatures": dict(n_components=16),
    "RoundedExpansion": dict(budget=5),
    "SRHT": dict(n_components=2),
    "SketchedKernelRidge": dict(),
    "SketchedKernelRidgeClassifier": dict(),
    "SparsifiedGram": dict(p=0.5),
    "SparsifiedKernelPCA": dict(n_components=2, p=0.5),
    "StreamingKernelPCA": dict(n_components=2, n_random_features=32, sketch_size=8),
    "TensorSRHT": dict(n_components=16),
    "TensorSketch": dict(n_components=16),
}

XS = np.random.default_rng(1).normal(size=(120, 6))
YS = XS[:, 0] - XS[:, 1]


def _build(cls):
    params = dict(SMALL[cls.__name__])
    if "random_state" in inspect.signature(cls).parameters:
        params["random_state"] = 0
    return cls(**params)


def _fit(est, X, method="fit"):
    n = X.shape[0]
    if isinstance(est, ds.RoundedExpansion):
        return getattr(est, method)(X, coef=YS[:n])
    if is_classifier(est):
        kw = {"classes": [0, 1]} if method == "partial_fit" else {}
        return getattr(est, method)(X, (YS[:n] > 0).astype(int), **kw)
    if is_regressor(est):
        return getattr(est, method)(X, YS[:n])
    return getattr(est, method)(X)


def _fits_a_kernel(cls):
    # a kernel named or scaled by a parameter, or one of an inner fitted model
    return bool({"kernel", "gamma", "features", "meka"} & set(inspect.signature(cls).parameters))


def test_every_public_estimator_has_small_settings():
    assert {c.__name__ for c in ESTIMATORS} == set(SMALL)


@pytest.fixture(scope="module")
def fitted():
    return {cls.__name__: _fit(_build(cls), XS) for cls in ESTIMATORS}


@pytest.mark.parametrize("cls", ESTIMATORS, ids=lambda c: c.__name__)
def test_rows_seen_are_counted(cls, fitted):
    assert not hasattr(_build(cls), "n_samples_seen_")
    assert fitted[cls.__name__].n_samples_seen_ == XS.shape[0]


@pytest.mark.parametrize("cls", [c for c in ESTIMATORS if hasattr(c, "partial_fit")],
                         ids=lambda c: c.__name__)
def test_partial_fit_adds_the_rows_of_each_batch(cls):
    est = _fit(_build(cls), XS[:70], "partial_fit")
    assert est.n_samples_seen_ == 70
    assert _fit(est, XS[70:], "partial_fit").n_samples_seen_ == XS.shape[0]


@pytest.mark.parametrize("cls", [c for c in ESTIMATORS if "n_components" in
                                 inspect.signature(c).parameters and hasattr(c, "transform")],
                         ids=lambda c: c.__name__)
def test_n_components_is_the_output_width(cls, fitted):
    est = fitted[cls.__name__]
    # "auto" (DatabaseFriendlyProjection) resolves to n_components_
    width = getattr(est, "n_components_", est.n_components)
    assert np.asarray(est.transform(XS[:7])).shape == (7, width)


@pytest.mark.parametrize("cls", ESTIMATORS, ids=lambda c: c.__name__)
def test_a_fitted_kernel_has_its_parameters_and_scale(cls, fitted):
    est = fitted[cls.__name__]
    if not _fits_a_kernel(cls):
        assert not hasattr(est, "kernel_params_") and not hasattr(est, "gamma_")
        return
    params = est.kernel_params_
    assert isinstance(params, dict)
    if "gamma" in params:
        assert params["gamma"] == est.gamma_ > 0
    else:
        assert getattr(est, "gamma_", None) is None


def test_kernel_params_evaluate_the_kernel_a_map_approximates(fitted):
    # the fitted parameters are the ones pairwise_kernel takes for the named kernel
    rff = fitted["RandomFourierFeatures"]
    K = pairwise_kernel(XS[:5], XS[:5], "rbf", **rff.kernel_params_)
    np.testing.assert_allclose(K, np.exp(-rff.gamma_ * ((XS[:5, None] - XS[None, :5]) ** 2).sum(-1)))
    ts = fitted["TensorSketch"]
    assert ts.kernel_params_ == {"gamma": ts.gamma_, "degree": ts.degree, "coef0": ts.coef0}
    assert fitted["DotProductKernelSketch"].kernel_params_ == {}
    ridge = fitted["SketchedKernelRidge"]
    assert ridge.kernel_params_ == ridge.features_.kernel_params_ == {"gamma": ridge.gamma_}


# ------------------------------------------------------------ one meaning per parameter name
def _parameters_section(cls):
    """{name: "type | description"} of the class's own numpydoc Parameters section."""
    lines = inspect.cleandoc(cls.__doc__ or "").splitlines()
    if "Parameters" not in lines:
        return {}
    out, names = {}, []
    for line in lines[lines.index("Parameters") + 2:]:
        if re.fullmatch(r"-{3,}", line):
            # the line above was the next section's title, not a parameter
            for n in names:
                out.pop(n, None)
            break
        if line and not line.startswith(" "):
            head, _, kind = line.partition(" : ")
            names = [n.strip() for n in head.split(",")]
            for n in names:
                out[n] = kind.strip()
        else:
            for n in names:
                out[n] += " " + line.strip()
    return {n: text for n, text in out.items() if n.isidentifier()}


def parameter_doc(cls, name):
    """The text documenting ``name`` for ``cls``: its own entry, the entry it
    points to ("as in :class:`Other`"), or a documented base class's."""
    for owner in cls.__mro__:
        text = _parameters_section(owner).get(name)
        if text is None:
            continue
        ref = re.search(r"[Aa]s (?:in|for) :class:`~?(?:distsketch\.)?(\w+)`", text)
        if ref and len(text) < 80 and ref.group(1) != owner.__name__:
            return parameter_doc(getattr(ds, ref.group(1)), name)
        return text
    return None


def _init_params(cls):
    return list(inspect.signature(cls).parameters)


# name ~ its one meaning ~ a pattern every class's description of it must match
_TABLE = r"""
alpha               ~ ridge regularisation λ ~ λ|[Rr]idge
alphas              ~ grid of λ for cross-validation ~ λ grid
base                ~ base sketches of a PolySketch ~ srht.*tensorsketch
basis_path          ~ Zarr store for MEKA's basis coordinates ~ Zarr store
block_rows          ~ rows per block of a kernel product ~ Rows per block
budget              ~ expected kernel evaluations of a rounded expansion ~ kernel evaluations
budget_scope        ~ what the budget counts ~ per_output
center              ~ subtract a mean fitted on X ~ [Cc]entre|mean
check_variance      ~ refuse a sketch whose predicted error is too large ~ predicted RMS
checkpoint          ~ where an iterative fit saves its state after every pass ~ CG state is saved
class_weight        ~ weights of the classes' rows ~ [Ww]eights of the classes
coef0               ~ offset c of the polynomial kernel ~ [Pp]olynomial|[Oo]ffset|c >= 0|\(γ⟨x, y⟩ \+ c\)\^q
cv                  ~ folds of cross-validation ~ cross-validation
degree              ~ degree q of the polynomial kernel ~ [Pp]olynomial|[qp] >= 1|\(γ⟨x, y⟩ \+ c\)\^q
delta               ~ failure probability of a bound ~ [Ff]ailure probability
density             ~ dense or sparse projection entries ~ "dense", "sparse"
embed_size          ~ r, columns of k-Space's sketch T ~ columns of T
eps                 ~ Johnson–Lindenstrauss distortion ~ [Dd]istortion
factor_dtype        ~ precision of a preconditioner's factors ~ [Pp]recision of the preconditioner
features            ~ the feature map of a ridge model ~ feature map
fit_intercept       ~ fit an unpenalised intercept ~ unpenalised intercept
form                ~ cosines with phases or (cos, sin) pairs ~ "offset", "paired"
gamma               ~ kernel scale γ ~ [Ss]cale|gamma=None|As for
gammas              ~ grid of kernel scales for cross-validation ~ [Kk]ernel-scale grid
kernel              ~ the kernel, by name or as a callable ~ kernel|rbf|ntk|ops\.kernels
kernel_bound        ~ a bound on |k(x, x')| ~ B >= \|k
kmeans_full_iter    ~ Lloyd iterations over all rows ~ Lloyd iterations over all rows
kmeans_iter         ~ Lloyd iterations on the sample ~ Lloyd iterations on the sample
kmeans_sample       ~ rows of the k-means sample ~ [Rr]ows of the uniform sample
landmarks           ~ how Nyström landmarks are chosen, or the landmarks ~ "uniform", "kmeans"
link_rcond          ~ cutoff of MEKA's link solve ~ [Ss]ingular values
link_threshold      ~ kernel value of two centres below which a link block is zero ~ link block is zero
max_degree          ~ degree at which a power series is cut ~ cut|[Tt]runcation degree
max_error           ~ largest accepted predicted RMS error ~ accepted predicted RMS error
max_iter            ~ iteration cap of an iterative solver ~ [Ii]terations|[Ii]teration cap
meka                ~ the MEKA approximation a ridge model solves on ~ MEKA
method              ~ streaming kernel PCA variant ~ "fd", "rnca"
n_centers           ~ M, the centres of a Nyström ridge model ~ M \(at most n\)
n_clusters          ~ number of clusters c ~ number of clusters
n_components        ~ the output width ~ [Ff]eatures|[Cc]omponents|[Ss]ketch size|[Oo]utput|\bk\b|\bm\b
n_ensemble          ~ experts of an ensemble Nyström map ~ experts
n_exact             ~ leading series terms sketched deterministically ~ sketched deterministically
n_landmarks         ~ number of landmark rows ~ [Ll]andmarks|Rows R|k-Space model
n_oversamples       ~ extra columns of a randomized range finder ~ oversampl|extra columns
n_power_iter        ~ power iterations of a randomized range finder ~ power iterations
n_random_features   ~ width of an inner random Fourier feature map ~ random Fourier
n_tail_samples      ~ sampled tail terms of a series ~ [Ss]ampled tail terms
orthogonal          ~ orthogonal random features ~ [Oo]rthogonal random features
p                   ~ probability of keeping a kernel entry ~ [Pp]robability of keeping
preconditioner      ~ the preconditioner of an iterative solver ~ preconditioner
preconditioner_size ~ rank of the preconditioner ~ rank of the preconditioner
quantize            ~ round kept entries to one bit ~ one bit
quantize_bound      ~ the level of quantised entries ~ level
random_state        ~ seed ~ int, Generator or None
rank                ~ rank kept of a low-rank approximation ~ rank|eigenpairs
rank_rule           ~ how MEKA's per-cluster ranks are chosen ~ "spectrum"
rff_form            ~ form of the inner random Fourier features ~ form
rho                 ~ oversampling of MEKA's link rows ~ sampled rows
sample              ~ rows a mapping is fitted on ~ [Ff]it the mapping|as in
sketch_dim          ~ m, the output dimension of k-Space's TensorSketch S ~ TensorSketch S|as in
sketch_size         ~ ℓ, rows of a Frequent Directions sketch ~ rows of the (Frequent Directions )?sketch
solver              ~ the algorithm that solves the fitted problem ~ \{"
split_every         ~ fan-in of a tree reduction ~ [Ff]an-in
standardize         ~ scale input columns before the feature map ~ [Cc]entre and scale
state               ~ what a Frequent Directions fit accumulates ~ "sketch", "covariance"
store               ~ a Zarr group holding the strips ~ Zarr group
threshold           ~ the rounding level c ~ rounding level
tile_rows           ~ rows per strip and tile side ~ [Rr]ows per strip
tol                 ~ stopping tolerance of an iterative solver ~ [Rr]esidual
truncation_tol      ~ tail probability that chooses where a series is cut ~ [Tt]runcation tolerance
target_error        ~ relative kernel error an "auto" size must reach ~ [Rr]elative kernel error
variant             ~ which Nyström variant ~ "standard", "ensemble", "randomized"
verbose             ~ progress on the distsketch logger ~ distsketch
"""
VOCABULARY = {name.strip(): (meaning, pattern) for name, meaning, pattern in
              (line.split(" ~ ") for line in _TABLE.strip().splitlines())}

# a second meaning that a name once had must not come back
NOT_MEANT = {
    "n_components": r"[Ll]andmark",
    "sketch_size": r"columns of S|preconditioner",
    "degree": r"[Tt]runcation",
    "tol": r"[Tt]runcation",
    "eps": r"link",
}


def test_every_parameter_name_is_in_the_vocabulary():
    names = {n for cls in ESTIMATORS for n in _init_params(cls)}
    assert names <= set(VOCABULARY), sorted(names - set(VOCABULARY))
    assert set(VOCABULARY) <= names, sorted(set(VOCABULARY) - names)


@pytest.mark.parametrize("cls", ESTIMATORS, ids=lambda c: c.__name__)
def test_each_parameter_is_documented_with_its_one_meaning(cls):
    for name in _init_params(cls):
        text = parameter_doc(cls, name)
        assert text is not None, f"{cls.__name__}.{name} is not in its Parameters section"
        meaning, pattern = VOCABULARY[name]
        assert re.search(pattern, text), \
            f"{cls.__name__}.{name}: {text!r} does not read as {meaning!r}"
        if name in NOT_MEANT:
            assert not re.search(NOT_MEANT[name], text), f"{cls.__name__}.{name}: {text!r}"


def test_the_vocabulary_check_catches_a_second_meaning():
    class Landmarks(ds.RandomFourierFeatures):
        """A map whose n_components counts landmarks.

        Parameters
        ----------
        n_components : int, default 100
            Number of landmarks m.
        """

    text = parameter_doc(Landmarks, "n_components")
    assert text == "int, default 100 Number of landmarks m."
    assert re.search(NOT_MEANT["n_components"], text)
