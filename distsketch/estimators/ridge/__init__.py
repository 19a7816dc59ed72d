"""Sketched kernel ridge regression and classification: the estimators, their
defaults (standardisation, gamma search and alpha choice), the solve (one
factorisation shared by GCV, the solution and the leverages; the precision
rule of ``ZᵀZ``), cross-validation, probability calibration, class weights and
the folding of segment summaries.
"""

# the package keeps the names of the module it replaced (distsketch.estimators.ridge)
from distsketch.estimators.ridge.regressor import (
    RidgeSummary,
    SketchedKernelRidge,
    feature_block_function,
)

__all__ = [
    "RidgeSummary",
    "SketchedKernelRidge",
    "feature_block_function",
]
