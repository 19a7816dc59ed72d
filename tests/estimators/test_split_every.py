"""``split_every``: every merge tree an estimator's fit builds has the fan-in it asks for.

The planner's rule (:func:`distsketch.graph.choose_fan_in`): ``split_every`` is the
smallest fan-in, raised only to keep a tree at most three merges deep.  With 20 row
blocks that is 3 for ``split_every=2`` and 8 for ``split_every=8``; the test reads the
fan-in of every merge task that runs, so a reduction that ignored the parameter (and
merged 8 at a time) shows.
"""

from __future__ import annotations

import dask
import dask.array as da
import numpy as np
import pytest
from dask.callbacks import Callback

import distsketch
from distsketch.graph import choose_fan_in

N_ROWS, BLOCK_ROWS = 400, 20
N_BLOCKS = N_ROWS // BLOCK_ROWS


def _data():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(N_ROWS, 5))
    y = X[:, 0] - 0.5 * X[:, 1] + 0.1 * rng.normal(size=N_ROWS)
    return X, y


def _rff():
    return distsketch.RandomFourierFeatures(n_components=16, gamma=0.5, random_state=0)


ESTIMATORS = {
    "FrequentDirections": lambda se: distsketch.FrequentDirections(sketch_size=4, split_every=se),
    "StreamingKernelPCA": lambda se: distsketch.StreamingKernelPCA(
        n_components=2, n_random_features=16, sketch_size=8, split_every=se, random_state=0),
    "KSpaceKernelPCA": lambda se: distsketch.KSpaceKernelPCA(
        n_components=2, degree=2, n_landmarks=10, split_every=se, random_state=0),
    "KernelPCR": lambda se: distsketch.KernelPCR(n_components=2, degree=2, split_every=se,
                                                 random_state=0),
    # a given feature map: the standardisation is a pass of its own, a tree too
    "SketchedKernelRidge": lambda se: distsketch.SketchedKernelRidge(
        features=_rff(), alpha=1.0, split_every=se, random_state=0),
    "SketchedKernelRidgeClassifier": lambda se: distsketch.SketchedKernelRidgeClassifier(
        features=_rff(), alpha=1.0, split_every=se, random_state=0),
}
SUPERVISED = {"KernelPCR", "SketchedKernelRidge", "SketchedKernelRidgeClassifier"}


class _MergeFanIns(Callback):
    """The number of states each merge task of a tree reduction merges."""

    def __init__(self):
        super().__init__()
        self.fan_ins: list[int] = []

    def _pretask(self, key, dsk, state):
        if "-merge-" in str(key):
            self.fan_ins.append(len(state["dependencies"][key]))


def _fit_fan_ins(name, split_every):
    X, y = _data()
    est = ESTIMATORS[name](split_every)
    Xd = da.from_array(X, chunks=(BLOCK_ROWS, 5))
    args = [Xd]
    if name in SUPERVISED:
        target = (y > 0).astype(np.int64) if "Classifier" in name else y
        args.append(da.from_array(target, chunks=BLOCK_ROWS))
    with dask.config.set(scheduler="sync"), _MergeFanIns() as seen:
        est.fit(*args)
    return seen.fan_ins


@pytest.mark.parametrize("name", sorted(ESTIMATORS))
def test_split_every_sets_the_fan_in_of_every_merge_tree(name):
    small, large = (choose_fan_in(N_BLOCKS, se)[0] for se in (2, 8))
    assert (small, large) == (3, 8)  # 20 blocks: 2 is raised to 3 (depth 3), 8 is kept
    fans_small = _fit_fan_ins(name, 2)
    fans_large = _fit_fan_ins(name, 8)
    assert fans_small and fans_large  # the fit reduced over the 20 blocks
    assert max(fans_small) == small  # no tree merged more states at once than asked for
    assert max(fans_large) == large
    # 20 leaves merged 3 at a time take 7 + 3 + 1 merges per tree, 8 at a time 3 + 1
    assert len(fans_small) / 11 == len(fans_large) / 4
