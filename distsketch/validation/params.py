"""Parameter constraints: one vocabulary for estimators, functions and specs.

A constraint table maps a name to a list of accepted constraints (as
scikit-learn's ``_parameter_constraints`` does): an :class:`Interval`,
:class:`Options`/:class:`StrOptions`, :class:`InstanceOf` or :class:`Satisfies`,
a type, ``None``, or one of the strings ``"boolean"``, ``"random_state"``,
``"callable"``, ``"array-like"``, ``"str"``, ``"estimator"``.  One checker,
:func:`check_params`, judges values and one, :func:`check_names`, names; every
failure is a :class:`~distsketch.errors.ConfigError` in one style::

    <where>: <noun> <name>=<value> is invalid; it must be <what is allowed>.
    <where>: <noun> '<name>' is not known. Did you mean '<close>'? Known <noun>s: ...

They are entered from an estimator's fit (:func:`check_estimator_params`), the
:func:`validate_params` decorator and :func:`check_section` for spec files;
:func:`check_kernel_params` refuses kernel parameters that overflow for data of
unit scale.
"""

from __future__ import annotations

import difflib
import functools
import inspect
import math
import numbers
import reprlib
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
    "Satisfies",
    "StrOptions",
    "accepts",
    "check_estimator_params",
    "check_kernel_params",
    "check_names",
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


@dataclass(frozen=True)
class Satisfies:
    """A value for which ``test`` is true; ``text`` says what that is, for messages.

    For what no range, set or type expresses (a plain file name), so that such
    a rule sits in the same table, and fails with the same message, as the rest.
    """

    test: Callable[[Any], bool]
    text: str

    def accepts(self, value: Any) -> bool:
        return bool(self.test(value))

    def __str__(self) -> str:
        return self.text


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
    if isinstance(constraint, (Interval, Options, InstanceOf, Satisfies)):
        return constraint.accepts(value)
    raise TypeError(f"unknown constraint {constraint!r}")


def describe(constraints: Iterable[Any]) -> str:
    """What a list of constraints allows, for error messages."""
    return " or ".join(c if isinstance(c, str) else c.__name__ if isinstance(c, type) else str(c)
                       for c in constraints)


# a value read from a file may be huge (a list shared 10**9 times once copied): shown bounded
_REPR = reprlib.Repr()
_REPR.maxstring = _REPR.maxother = 200
_REPR.maxlist = _REPR.maxtuple = _REPR.maxdict = _REPR.maxset = 10
_REPR.maxlevel = 2


def check_params(params: Mapping[str, Any], table: Mapping[str, list[Any]], owner: str, *,
                 noun: str = "parameter", of: str = "",
                 what: Mapping[str, str] | None = None) -> None:
    """Check the values in ``params`` that ``table`` constrains.

    Parameters
    ----------
    params : mapping
        Values by name; names without an entry in ``table`` pass.
    table : mapping
        ``{name: [constraint, ...]}``.
    owner : str
        Where the values come from, first in the message: the estimator or
        function, or a spec section (``"workflow spec w.yaml: preprocessing"``).
    noun : str
        What a name is called in the message ("parameter", "option", "key").
    of : str
        What the names belong to when ``owner`` is a place, e.g. ``"kind 'slurm'"``.
    what : mapping, optional
        ``{name: text}``: what a valid value is, in place of the constraints'
        own description (e.g. ``"true or false"``).

    Raises
    ------
    ConfigError
        The first invalid value, with what would be allowed.
    """
    of = f" of {of}" if of else ""
    for name, constraints in table.items():
        if name not in params:
            continue
        value = params[name]
        if not any(accepts(c, value) for c in constraints):
            allowed = (what or {}).get(name) or describe(constraints)
            raise ConfigError(f"{owner}: {noun} {name}={_REPR.repr(value)}{of} is invalid; "
                              f"it must be {allowed}.{text_hint(value, constraints)}")


def check_names(names: Iterable[Any], known: Iterable[str], where: str, *,
                noun: str = "parameter", owner: str = "", hint: str = "") -> None:
    """Refuse a name that is not among ``known``, suggesting a close match.

    Parameters
    ----------
    names : iterable
        The names given (the keys of a section, the parameters of a call).
    known : iterable of str
        The names that are accepted.
    where : str
        Where the names come from, first in the message.
    noun : str
        What a name is called in the message ("parameter", "option", "key").
    owner : str
        What the names belong to, e.g. ``"StreamingKernelPCA"`` or ``"kind 'slurm'"``.
    hint : str
        Appended to the message (e.g. where the list of fields is documented).

    Raises
    ------
    ConfigError
        The first unknown name, a close match if there is one, and every known name.
    """
    valid = sorted(known)
    for name in names:
        if isinstance(name, str) and name in valid:
            continue
        close = difflib.get_close_matches(str(name), valid, n=1)
        suggest = f" Did you mean {close[0]!r}?" if close else ""
        owned = f" for {owner}" if owner else ""
        raise ConfigError(f"{where}: {noun} {_REPR.repr(name)} is not known{owned}.{suggest} "
                          f"Known {noun}s: {', '.join(valid)}{hint}.")


def text_hint(value: Any, constraints: Iterable[Any]) -> str:
    """A note for a string given where an :class:`Interval` expects a number, else ``""``."""
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
                  owner: str = "", noun: str = "option",
                  required: Iterable[str] | Mapping[str, str] = (), hint: str = "",
                  what: Mapping[str, str] | None = None) -> dict[str, Any]:
    """Check a mapping read from a spec file against a constraint table.

    Names are checked by :func:`check_names` and values by :func:`check_params`,
    the checkers of every parameter, so a spec's messages read like an
    estimator's.

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
    required : iterable of str, or mapping
        Keys that must be present; a mapping ``{key: what it holds}`` also
        says, when one is missing, what each holds.
    hint : str
        Appended to the unknown-key message (e.g. where free options go).
    what : mapping, optional
        ``{key: text}``: what a valid value is, in place of the constraints'
        own description.

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
    check_names(section, table, where, noun=noun, owner=owner, hint=hint)
    check_params(section, table, where, noun=noun, of=owner, what=what)
    for key in required:
        if key not in section:
            of = f" of {owner}" if owner else ""
            explain = ("; ".join(f"{k}: {v}" for k, v in required.items())
                       if isinstance(required, Mapping) else "")
            raise ConfigError(f"{where}: missing required {noun} {key!r}{of}"
                              f"{f' ({explain})' if explain else ''}.")
    return dict(section)
