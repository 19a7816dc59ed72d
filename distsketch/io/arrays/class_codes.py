"""Class labels stored as codes: int32 codes in a targets array, the names in its attributes.

``distsketch ingest`` stores string labels this way (code ``i`` is
``classes[i]``); every reader of targets (:mod:`distsketch.io.arrays.targets`,
``open_array(..., targets=True)``) reads them back as the names, so a model
fitted on them predicts the names.  A classifier's predictions hold the
labels themselves, with the model's classes in the same attribute.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Mapping
from typing import Any

import numpy as np

from distsketch.errors import StoreError

__all__ = ["MAX_CLASSES", "MAX_CLASS_NAME", "class_name_clash", "class_name_problem", "class_names",
           "dask_targets", "decode_classes", "nfc", "predictions_attrs"]

#: distinct class names a label column may hold: more is an ID column, not classes
MAX_CLASSES = 65536

#: longest class name, in characters: ingest and append refuse a longer one, and a store
#: whose ``classes`` attribute holds one is refused as changed or damaged (one limit)
MAX_CLASS_NAME = 1024

# the spellings a reader takes for NaN (a missing value), never a class name
_NAN_NAME = re.compile(r"[+-]?nan", re.IGNORECASE | re.ASCII)
# control characters (C0, DEL, C1: line breaks, tabs, terminal escapes) and the bidirectional
# overrides and isolates, which make a name print as another one (or rewrite a terminal line
# or a report) wherever it is shown: in messages, reports, predictions
_HIDDEN = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def class_name_problem(name: str) -> str | None:
    """Why ``name`` (a label as stored, stripped of blanks) cannot be a class name; None when it can.

    The one rule for class names written by ``ingest`` (a label column, a
    ``.npy`` of strings) and by ``append``; each message says what is wrong and why.
    """
    if not name:
        return "the label is empty; every row needs a label (remove or fill that row)."
    if _NAN_NAME.fullmatch(name):
        return (f"the label {name!r} reads as NaN, a missing value; NaN labels are refused, as "
                "for numeric labels (a class code cannot be NaN, so allow_nan does not keep "
                "them). Drop or fill those rows before ingesting (pandas: "
                "df.dropna(subset=[label column])).")
    if len(name) > MAX_CLASS_NAME:
        return (f"the label is {len(name)} characters long ({name[:20]!r}...), more than the "
                f"{MAX_CLASS_NAME} a class name may have; is this a text column? Shorten or map "
                "the names to shorter ones.")
    hidden = _HIDDEN.search(name)
    if hidden is not None:
        return (f"the label {name[:40]!r} holds the control character U+{ord(hidden.group()):04X} "
                f"({unicodedata.name(hidden.group(), 'a control character')}); a class name is "
                "printed in messages, reports and predictions, where a line break, a terminal "
                "escape or a direction override would show something else. Remove or replace "
                "it in the labels.")
    return None


def nfc(name: str) -> str:
    """``name`` in Unicode normalisation form C (composed: ``e`` + U+0301 is ``é``)."""
    return unicodedata.normalize("NFC", name)


def class_name_clash(name: str, known: Mapping[str, str]) -> str | None:
    """Why the new class name ``name`` cannot join ``known`` (None when it can).

    Two names that differ only in their Unicode normalisation (``café``
    composed, and ``cafe`` + a combining accent) print the same but would be
    two classes; a reader never merges them silently, so the second one is
    refused, naming both.  ``known`` holds the stored names by their :func:`nfc` form.
    """
    other = known.get(nfc(name))
    if other is None or other == name:
        return None
    return (f"the label {name!a} and the class name {other!a} differ only in their "
            "Unicode normalisation (they print the same) and would be two classes; normalise "
            "the labels first (unicodedata.normalize('NFC', label)).")


def class_names(array: Any, where: str) -> np.ndarray | None:
    """The class names of a targets array that stores their codes, else None.

    Predictions of a classifier hold the labels themselves and carry the
    model's classes in the same attribute (names beside strings, numbers
    beside numbers): nothing to decode there.  Any other ``classes``
    attribute is a StoreError (the store was changed or damaged).
    """
    attrs = getattr(array, "attrs", None)
    names = None if attrs is None else attrs.get("classes")
    if names is None:
        return None
    kind = np.dtype(array.dtype).kind
    distinct = isinstance(names, list) and bool(names) and len(set(names)) == len(names)
    text = distinct and all(isinstance(c, str) and 0 < len(c) <= MAX_CLASS_NAME for c in names)
    numbers = distinct and all(isinstance(c, (int, float)) and not isinstance(c, bool)
                               for c in names)
    if array.ndim in (1, 2) and ((text and kind in "OUT") or (numbers and kind in "iuf")):
        return None  # a classifier's predictions: the values are the labels
    if not text or array.ndim != 1 or kind not in "iu":
        raise StoreError(f"targets {where}: the 'classes' attribute must be a list of distinct "
                         "class names beside a 1-D array of integer codes (as distsketch ingest "
                         "writes them); the store was changed or damaged. Re-ingest it.")
    return np.asarray(names, dtype=str)


def predictions_attrs(model: Any) -> dict[str, Any]:
    """Attributes of a model's predictions: ``classes`` (the model's ``classes_``) for a classifier.

    The list is in the model's order (the columns of ``predict_proba``):
    class names for a model fitted on names, numbers for numeric labels.
    A regressor, or classes that JSON cannot hold faithfully, give ``{}``.
    """
    classes = getattr(model, "classes_", None)
    if classes is None:
        return {}
    values = np.asarray(classes).tolist()
    text = all(isinstance(c, str) and 0 < len(c) <= MAX_CLASS_NAME for c in values)
    numbers = all(isinstance(c, int) and not isinstance(c, bool) for c in values) or all(
        isinstance(c, float) and np.isfinite(c) for c in values)
    if not values or not (text or numbers) or len(set(values)) != len(values):
        return {}
    return {"classes": values}


def decode_classes(codes: np.ndarray, classes: np.ndarray, where: str,
                   first_row: int = 0) -> np.ndarray:
    """``classes[codes]``, refusing a code outside the classes (no wrap-around)."""
    codes = np.asarray(codes)
    bad = (codes < 0) | (codes >= classes.shape[0])
    if bad.any():
        row = first_row + int(np.flatnonzero(bad)[0])
        raise StoreError(f"targets {where}: row {row} holds the code {int(codes[bad][0])}, "
                         f"outside the {classes.shape[0]} class names of its 'classes' "
                         "attribute; the store was changed or damaged. Re-ingest it.")
    return classes[codes]


class _Decode:
    """Block function of :func:`decode_classes` (picklable for distributed workers)."""

    def __init__(self, classes: np.ndarray, where: str):
        self.classes = classes
        self.where = where

    def __call__(self, codes: np.ndarray, block_info: Any = None) -> np.ndarray:
        start = block_info[0]["array-location"][0][0] if block_info else 0
        return decode_classes(codes, self.classes, self.where, start)


def dask_targets(array: Any, where: str) -> Any:
    """A targets array as dask, chunked like the store; class codes read as their names."""
    from distsketch.graph import from_source

    classes = class_names(array, where)
    d: Any = from_source(array, array.chunks)
    if classes is None:
        return d
    return d.map_blocks(_Decode(classes, where), dtype=classes.dtype)
