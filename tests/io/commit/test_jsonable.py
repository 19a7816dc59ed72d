"""The one JSON encoder: the lossy ``default=`` hook and the model state's tagged form."""

import json
import math
from pathlib import Path

import numpy as np
import pytest

from distsketch.errors import StoreError
from distsketch.io.commit.jsonable import from_tagged_json, json_default, plain_scalar, to_tagged_json


def test_default_hook_numbers_arrays_and_text():
    body = {"i": np.int64(3), "f": np.float32(0.5), "b": np.bool_(True),
            "a": np.arange(3, dtype=np.int8), "p": Path("/tmp/x"), "o": object}
    text = json.dumps(body, sort_keys=True, default=json_default)
    assert text == ('{"a": [0, 1, 2], "b": true, "f": 0.5, "i": 3, "o": "<class \'object\'>", '
                    '"p": "/tmp/x"}')


def test_plain_scalar_keeps_python_values():
    assert type(plain_scalar(np.int32(2))) is int
    assert type(plain_scalar(np.float16(2))) is float
    assert type(plain_scalar(np.bool_(False))) is bool
    marker = object()
    assert plain_scalar(marker) is marker


def test_tagged_round_trip():
    value = {"t": (1, np.int64(2)), "inf": np.float64(np.inf), "l": [np.nan, -math.inf, 0.25],
             "b": np.bool_(True), "s": "x", "n": None}
    ok, j = to_tagged_json(value)
    assert ok
    assert j == {"t": {"__tuple__": [1, 2]}, "inf": {"__float__": "inf"},
                 "l": [{"__float__": "nan"}, {"__float__": "-inf"}, 0.25], "b": True, "s": "x",
                 "n": None}
    back = from_tagged_json(json.loads(json.dumps(j, allow_nan=False)))
    assert back["t"] == (1, 2) and back["inf"] == math.inf and back["l"][1] == -math.inf
    assert math.isnan(back["l"][0]) and back["b"] is True


def test_tagged_refuses_what_json_cannot_hold():
    assert to_tagged_json({"a": np.zeros(2)}) == (False, None)
    assert to_tagged_json({1: "int key"}) == (False, None)
    with pytest.raises(StoreError, match="damaged"):
        from_tagged_json({"__float__": "1e999"})
