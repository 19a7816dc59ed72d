"""Parameter constraints: one vocabulary for estimators, functions and specs.

A constraint table maps a name to a list of accepted constraints (as
scikit-learn's ``_parameter_constraints`` does); a value is valid when any
constraint accepts it.  A constraint is one of

* an :class:`Interval` (finite values only, unless ``finite=False``),
  :class:`Options`/:class:`StrOptions` or :class:`InstanceOf` object;
* a type (``isinstance``), or ``None`` (the value ``None``);
* one of the strings ``"boolean"``, ``"random_state"``, ``"callable"``,
  ``"array-like"``, ``"str"``, ``"estimator"``.

The same table is checked three ways: :func:`check_estimator_params` for an
estimator (run by the wrapper around ``fit``/``partial_fit``), the
:func:`validate_params` decorator for public functions, and
:func:`check_section` for a plain mapping read from a spec file.  Every
failure is a :class:`~distsketch.errors.ConfigError` naming the parameter,
the value and what is allowed.

Kernel parameters are also held together (:func:`check_kernel_params`): a
``gamma``, ``coef0`` and ``degree`` whose kernel argument overflows for data
of unit scale is refused before any data is read.
"""

from __future__ import annotations

import functools
import inspect
import math
import numbers
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np

from distsketch.errors import ConfigError

__all__ = [
    "MAX_GAMMA",
    "InstanceOf",
    "Interval",
    "Options",
    "StrOptions",
    "accepts",
    "check_estimator_params",
    "check_kernel_params",
    "check_params",
    "check_section",
    "describe",
    "text_hint",
    "validate_params",
]

F = TypeVar("F", bound=Callable[..., Any])


# float64's largest value; a float parameter above it is inf
_F64_MAX = float(np.finfo(np.float64).max)
_F32_MAX = float(np.finfo(np.float32).max)
# features are float32 by default: the kernel argument gamma * ||x - y||^2 of two points in
# the unit ball (at most 4 * gamma) must stay in float32's range
MAX_GAMMA = _F32_MAX / 4
# headroom left when a polynomial kernel's value for unit-scale points is computed
_POLY_HEADROOM = 16.0


@dataclass(frozen=True)
class Interval:
    """A numeric range constraint: ``kind`` is ``int`` or ``float`` (real).

    ``finite`` (default True) refuses ``inf`` and ``-inf`` even where a bound
    is open (``None``): no parameter of distsketch has a meaning at infinity,
    and an infinite scale turns every kernel value into NaN.
    """

    kind: type
    left: float | None
    right: float | None
    closed: str = "both"  # "both", "left", "right", "neither"
    finite: bool = True

    def accepts(self, value: Any) -> bool:
        if isinstance(value, bool):
            return False
        if self.kind is int:
            if not isinstance(value, numbers.Integral):
                return False
        elif not isinstance(value, numbers.Real):
            return False
        if self.finite and not math.isfinite(float(value)) and self.kind is not int:
            return False
        lo_ok = self.left is None or (
            value >= self.left if self.closed in ("both", "left") else value > self.left)
        hi_ok = self.right is None or (
            value <= self.right if self.closed in ("both", "right") else value < self.right)
        return bool(lo_ok and hi_ok)

    def __str__(self) -> str:
        lb = "[" if self.closed in ("both", "left") else "("
        rb = "]" if self.closed in ("both", "right") else ")"
        lo = "-inf" if self.left is None else self.left
        hi = "inf" if self.right is None else self.right
        kind = "an int" if self.kind is int else ("a finite float" if self.finite else "a float")
        return f"{kind} in {lb}{lo}, {hi}{rb}"


@dataclass(frozen=True)
class Options:
    """One of a fixed set of values."""

    values: frozenset

    def __init__(self, values: Iterable[Any]):
        object.__setattr__(self, "values", frozenset(values))

    def accepts(self, value: Any) -> bool:
        try:
            return value in self.values
        except TypeError:
            return False

    def __str__(self) -> str:
        return "one of " + ", ".join(repr(v) for v in sorted(self.values, key=str))


class StrOptions(Options):
    """One of a fixed set of strings (a non-string never matches)."""

    def accepts(self, value: Any) -> bool:
        return isinstance(value, str) and value in self.values


@dataclass(frozen=True)
class InstanceOf:
    """An instance of one of ``types``; a bool passes only if ``bool`` is listed.

    Spec files distinguish flags from counts: ``processes: 1`` is not a flag
    and ``n_workers: true`` is not a count, although ``bool`` subclasses ``int``.
    """

    types: tuple[type, ...]

    def __init__(self, *types: type):
        object.__setattr__(self, "types", tuple(types))

    def accepts(self, value: Any) -> bool:
        if isinstance(value, bool) and bool not in self.types:
            return False
        return isinstance(value, self.types)

    def __str__(self) -> str:
        return "/".join(t.__name__ for t in self.types)


_NAMED = {
    "random_state": lambda v: v is None or isinstance(
        v, (numbers.Integral, np.random.Generator, np.random.RandomState)),
    "boolean": lambda v: isinstance(v, (bool, np.bool_)),
    "callable": callable,
    "array-like": lambda v: hasattr(v, "shape") or isinstance(v, (list, tuple)),
    "str": lambda v: isinstance(v, str),
    "estimator": lambda v: hasattr(v, "fit") or hasattr(v, "transform"),
}


def accepts(constraint: Any, value: Any) -> bool:
    """Whether one constraint accepts ``value``."""
    if constraint is None:
        return value is None
    if isinstance(constraint, str):
        try:
            return bool(_NAMED[constraint](value))
        except KeyError:
            raise TypeError(f"unknown constraint {constraint!r}") from None
    if isinstance(constraint, type):
        return isinstance(value, constraint)
    if isinstance(constraint, (Interval, Options, InstanceOf)):
        return constraint.accepts(value)
    raise TypeError(f"unknown constraint {constraint!r}")


def describe(constraints: Iterable[Any]) -> str:
    """What a list of constraints allows, for error messages."""
    return " or ".join(c if isinstance(c, str) else str(c) for c in constraints)


def check_params(params: Mapping[str, Any], table: Mapping[str, list[Any]], owner: str) -> None:
    """Check the values in ``params`` that ``table`` constrains.

    Parameters
    ----------
    params : mapping
        Parameter values by name; names without an entry in ``table`` pass.
    table : mapping
        ``{name: [constraint, ...]}``.
    owner : str
        The estimator or function named in the message.

    Raises
    ------
    ConfigError
        The first invalid value, with what would be allowed.
    """
    for name, constraints in table.items():
        if name not in params:
            continue
        value = params[name]
        if not any(accepts(c, value) for c in constraints):
            raise ConfigError(f"{owner}: parameter {name}={value!r} is invalid; "
                              f"it must be {describe(constraints)}.{text_hint(value, constraints)}")


def text_hint(value: Any, constraints: Iterable[Any]) -> str:
    """A note for a string given where a number is expected (YAML read it as text).

    Returns an empty string unless ``value`` is a string and a numeric
    :class:`Interval` is among ``constraints``.
    """
    if not isinstance(value, str) or not any(isinstance(c, Interval) for c in constraints):
        return ""
    return (f" The value {value!r} is text: YAML read it as text (in a spec or a --param value), "
            "not as a number. Write a plain number, e.g. 0.001, 1e-3 or 1.5E+2, without quotes, units "
            "or other characters.")


def check_estimator_params(estimator: Any) -> None:
    """Check every parameter of ``estimator`` against its ``_parameter_constraints``.

    Its kernel parameters (``gamma``, ``coef0``, ``degree``) are then held
    together by :func:`check_kernel_params`.
    """
    params = estimator.get_params(deep=False)
    owner = type(estimator).__name__
    table = getattr(estimator, "_parameter_constraints", {})
    check_params(params, table, owner)
    check_kernel_params({k: params[k] for k in ("kernel", "gamma", "coef0", "degree")
                         if k in params and k in table}, owner)


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        return None
    return float(value)


def check_kernel_params(params: Mapping[str, Any], owner: str) -> None:
    """Refuse kernel parameters whose kernel argument overflows on unit-scale data.

    Parameters
    ----------
    params : mapping
        Any of ``gamma``, ``coef0`` and ``degree``; ``None`` and non-numbers
        (e.g. ``"median"``) pass, their own constraints judge them.  With a
        ``kernel`` other than the polynomial one, ``degree`` is not used and
        not judged.
    owner : str
        The estimator or function named in the message.

    Raises
    ------
    ConfigError
        ``gamma`` or ``coef0`` not finite or above :data:`MAX_GAMMA` (the
        kernel argument ``gamma * ||x - y||**2`` of points in the unit ball
        must fit float32, the default feature dtype), or a polynomial value
        ``(gamma + |coef0|) ** degree`` beyond float64's range / 16.

    Notes
    -----
    Data-dependent overflow (large rows) is refused by the input checks
    (:func:`distsketch.validation.check_input`) and, when a computation still
    overflows, by the finite checks of :mod:`distsketch.validation.finite`.
    """
    gamma, coef0, degree = (_number(params.get(k)) for k in ("gamma", "coef0", "degree"))
    fix = "scale the data instead (e.g. sklearn.preprocessing.StandardScaler) and use a " \
          "moderate value."
    for name, value in (("gamma", gamma), ("coef0", coef0)):
        if value is not None and not (math.isfinite(value) and abs(value) <= MAX_GAMMA):
            raise ConfigError(
                f"{owner}: parameter {name}={params[name]!r} is invalid; it must be finite "
                f"with |{name}| <= {MAX_GAMMA:.3g}, or the kernel argument overflows; {fix}")
    kernel = params.get("kernel", "polynomial")
    if kernel not in ("polynomial", "poly"):
        degree = None
    if degree is not None and degree >= 1:
        base = (gamma if gamma is not None else 1.0) + abs(coef0 if coef0 is not None else 0.0)
        if base > 1.0 and degree * math.log(base) > math.log(_F64_MAX / _POLY_HEADROOM):
            raise ConfigError(
                f"{owner}: parameters gamma={params.get('gamma')!r}, "
                f"coef0={params.get('coef0')!r}, degree={params['degree']!r} are invalid "
                f"together: (gamma + |coef0|) ** degree = 10**{degree * math.log10(base):.0f} "
                f"overflows float64 for points of unit norm; lower gamma, coef0 or degree, "
                f"or {fix}")


def validate_params(table: Mapping[str, list[Any]]) -> Callable[[F], F]:
    """Decorate a public function so its arguments are checked against ``table``.

    The check binds the call to the signature (defaults applied), so a
    default is held to the same table as a passed value.

    Examples
    --------
    >>> @validate_params({"k": [Interval(int, 1, None)]})
    ... def top(k=3):
    ...     return k
    >>> top(k=0)
    Traceback (most recent call last):
    ...
    distsketch.errors.ConfigError: top: parameter k=0 is invalid; it must be an int in [1, inf].
    """

    def decorate(func: F) -> F:
        sig = inspect.signature(func)
        unknown = set(table) - set(sig.parameters)
        if unknown:
            raise TypeError(f"{func.__qualname__}: constraints for unknown parameters {unknown}")

        @functools.wraps(func)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            bound = sig.bind(*args, **kwargs)
            bound.apply_defaults()
            check_params(bound.arguments, table, func.__name__)
            return func(*args, **kwargs)

        wrapper.__wrapped__ = func  # type: ignore[attr-defined]
        wrapper._parameter_constraints = dict(table)  # type: ignore[attr-defined]
        return wrapper  # type: ignore[return-value]

    return decorate


def check_section(section: Any, table: Mapping[str, list[Any]], where: str, *,
                  owner: str = "", noun: str = "option", required: Iterable[str] = (),
                  hint: str = "") -> dict[str, Any]:
    """Check a mapping read from a spec file against a constraint table.

    Parameters
    ----------
    section : Any
        The value read from the file (it must be a mapping).
    table : mapping
        ``{key: [constraint, ...]}``: the known keys and what each accepts.
    where : str
        Where the section comes from (e.g. the file and section name).
    owner : str
        What the keys belong to, e.g. ``"kind 'slurm'"``, used in messages.
    noun : str
        What a key is called in messages ("option", "key").
    required : iterable of str
        Keys that must be present.
    hint : str
        Appended to the unknown-key message (e.g. where free options go).

    Returns
    -------
    dict
        A shallow copy of the section.

    Raises
    ------
    ConfigError
        Not a mapping, an unknown or missing key, or an invalid value.
    """
    if not isinstance(section, Mapping):
        raise ConfigError(f"{where} must be a mapping, got {type(section).__name__}.")
    of = f" of {owner}" if owner else ""
    for key, value in section.items():
        if key not in table:
            known = f" for {owner}" if owner else ""
            raise ConfigError(f"{where}: {noun} {key!r} is not known{known}; known {noun}s: "
                              f"{sorted(table)}{hint}.")
        if not any(accepts(c, value) for c in table[key]):
            raise ConfigError(f"{where}: {noun} {key!r}{of} must be {describe(table[key])}, "
                              f"got {value!r}.{text_hint(value, table[key])}")
    for key in required:
        if key not in section:
            raise ConfigError(f"{where}: missing required {noun} {key!r}{of}.")
    return dict(section)
