"""Validation: parameter constraints (:mod:`~distsketch.validation.params`), array
checks (:mod:`~distsketch.validation.arrays`), finiteness and range
(:mod:`~distsketch.validation.finite`) and the one YAML loader
(:mod:`~distsketch.validation.config`).

This package imports nothing from :mod:`distsketch.io`; ``io`` opens paths
and then uses these checks.
"""

from distsketch.validation.arrays import (
    check_input,
    check_n_features,
    check_shape_dtype,
    check_targets,
    is_dask,
    is_path_like,
)
from distsketch.validation.config import load_yaml, loads_yaml
from distsketch.validation.finite import (
    FiniteRows,
    cast_checked,
    check_finite_block,
    check_finite_output,
    check_finite_result,
)
from distsketch.validation.params import (
    MAX_GAMMA,
    InstanceOf,
    Interval,
    Options,
    Satisfies,
    StrOptions,
    check_estimator_params,
    check_kernel_params,
    check_names,
    check_params,
    check_section,
    validate_params,
)

__all__ = [
    "MAX_GAMMA",
    "FiniteRows",
    "InstanceOf",
    "Interval",
    "Options",
    "Satisfies",
    "StrOptions",
    "cast_checked",
    "check_estimator_params",
    "check_finite_block",
    "check_finite_output",
    "check_finite_result",
    "check_input",
    "check_kernel_params",
    "check_n_features",
    "check_names",
    "check_params",
    "check_section",
    "check_shape_dtype",
    "check_targets",
    "is_dask",
    "is_path_like",
    "load_yaml",
    "loads_yaml",
    "validate_params",
]
