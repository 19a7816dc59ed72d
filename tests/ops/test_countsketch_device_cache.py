"""CountSketch on blocks of another namespace: the one-hot operator moves to the device once."""

from __future__ import annotations

import numpy as np
import pytest

from distsketch.ops import countsketch as cs
from distsketch.testing import from_strict_device, to_strict_device

pytest.importorskip("array_api_strict")


def test_one_hot_slices_are_built_once_per_device_and_give_the_sparse_result(monkeypatch):
    monkeypatch.setattr(cs, "_DEVICE_ONEHOT", type(cs._DEVICE_ONEHOT)())
    built = []
    real = cs.asarray
    monkeypatch.setattr(cs, "asarray", lambda C, like: built.append(C.shape) or real(C, like=like))
    rng = np.random.default_rng(0)
    blocks = [rng.normal(size=(40, 1500)) for _ in range(3)]
    for X in blocks:
        got = from_strict_device(cs.countsketch(to_strict_device(X), 7, "t", 32))
        # each output entry sums the same ±x values as the sparse NumPy kernel, in another order
        np.testing.assert_allclose(got, cs.countsketch(X, 7, "t", 32), rtol=1e-12, atol=1e-12)
    # two slices (1024 + 476 columns), built for the first block only
    assert built == [(1024, 32), (476, 32)]
    # a float32 block needs its own (float32) operator; the cache stays bounded
    cs.countsketch(to_strict_device(blocks[0].astype(np.float32)), 7, "t", 32)
    assert len(built) == 4
    for seed in range(20):
        cs.countsketch(to_strict_device(blocks[0][:, :10]), seed, "t", 32)
    assert len(cs._DEVICE_ONEHOT) == cs._DEVICE_ONEHOT_MAX
