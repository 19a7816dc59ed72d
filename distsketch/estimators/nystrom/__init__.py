"""The Nystrom family: Nystrom features and kernel PCA, landmark choice
(uniform, k-means, leverage scores, RP-Cholesky), MEKA and block kernel
approximations.
"""

# the package keeps the names of the module it replaced (distsketch.estimators.nystrom)
from distsketch.estimators.nystrom.features import (
    NystromFeatures,
    NystromKernelPCA,
    fit_kmeans,
    sample_landmarks,
)

__all__ = [
    "NystromFeatures",
    "NystromKernelPCA",
    "fit_kmeans",
    "sample_landmarks",
]
