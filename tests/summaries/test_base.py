"""``takes_out``: which row maps the slice-by-slice summaries give an output buffer."""

from __future__ import annotations

from distsketch.summaries.base import takes_out
from distsketch.summaries.rff_covariance import RFFRows


class _Flagged:
    def __init__(self, flag):
        self.accepts_out = flag

    def __call__(self, block, offset, out=None):
        return block


def test_the_flag_decides_where_there_is_one():
    assert takes_out(_Flagged(True))
    assert not takes_out(_Flagged(False))  # although its signature names out


def test_otherwise_a_parameter_named_out():
    assert takes_out(RFFRows())
    assert takes_out(lambda block, offset, *, out=None: block)
    assert not takes_out(lambda block, offset, W, b: block)
    # a catch-all **out or *out is not a parameter named out
    assert not takes_out(lambda block, offset, **out: block)
    assert not takes_out(lambda block, offset, *out: block)


def test_an_uninspectable_callable_takes_none():
    assert not takes_out(object())  # no signature at all
