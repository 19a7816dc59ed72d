"""Conformance tests for mergeable summaries, reusable by any package.

Every :class:`distsketch.summaries.Summary` should pass the same checks:
``chunk`` is deterministic, ``merge`` is associative, the identity state (if
the summary has one) changes nothing, a state survives the forms it travels
and is checkpointed in (pickle between processes; arrays + JSON in a Zarr
group, as models and workflow checkpoints store it), and a real
:func:`distsketch.graph.tree_reduce` over *any* chunking gives the
single-block result.  Subclass :class:`MergeableSummaryTests` in a pytest
module and define the hooks::

    from distsketch.testing import MergeableSummaryTests

    class TestMySummary(MergeableSummaryTests):
        def make_summary(self):
            return MySummary(...)

        def make_data(self, rng):
            return rng.normal(size=(120, 5))       # the rows (at least 30)

Optional hooks and attributes:

``exact = True``
    Merged states must agree within ``rtol``/``atol`` whatever the merge
    order.  A summary that is mergeable only within a guarantee (Frequent
    Directions: ‖AᵀA − BᵀB‖₂ ≤ ‖A − A_k‖_F²/(ℓ − k)) sets ``exact = False``
    and implements :meth:`~MergeableSummaryTests.check_guarantee`, which is
    then asserted for every state instead of closeness.
``has_identity = True``
    False for summaries without ``empty()`` (which must then raise
    ``NotImplementedError``).
``operands()``
    Arrays passed to ``chunk`` after the row offset.
``assert_states_close(actual, expected, X)``
    Override for a custom comparison.
``rtol``, ``atol``
    Tolerances of the default comparison.

:func:`raise_on_compute` makes any dask computation inside a ``with`` block
raise, to prove that a method only builds a graph.

Storage kinds have their own conformance base, :class:`LocationTests`: the
contract every :class:`~distsketch.io.storage.location.Location` subclass keeps
(objects, paths, capabilities, commits, checkpoints, the one-writer lock).  Subclass it and
define ``make_location(tmp_path)``, returning a fresh location that does not
exist yet (its parent writable)::

    from distsketch.io import resolve
    from distsketch.testing import LocationTests

    class TestMemoryLocation(LocationTests):
        def make_location(self, tmp_path):
            return resolve(f"memory://{tmp_path.name}/out")

Requires the ``test`` extra (pytest, hypothesis).

Over 500 lines because it ships two complete conformance suites (summaries and storage
kinds) to other packages.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import pickle
from collections.abc import Iterator
from typing import Any

import dask
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from distsketch.graph import from_source, tree_reduce

__all__ = [
    "ComputeError",
    "LocationTests",
    "MergeableSummaryTests",
    "assert_states_equal",
    "checkpoint_round_trip",
    "raise_on_compute",
    "states_allclose",
]


class ComputeError(AssertionError):
    """Raised by :func:`raise_on_compute` when something computes."""


def _refuse(dsk: Any, keys: Any, **kwargs: Any) -> Any:
    raise ComputeError(f"a dask graph was computed (keys {list(keys)[:3]}...) where only "
                       "building one was expected")


@contextlib.contextmanager
def raise_on_compute() -> Iterator[None]:
    """Within the block, any dask computation raises :class:`ComputeError`.

    The raising scheduler is both the configured default and every named
    scheduler (``"sync"``, ``"threads"``, ``"processes"``), so code that asks
    for a scheduler by name is caught too.  Use it to prove that building a
    graph (``transform`` of a dask array) computes nothing::

        est.fit(X)                       # outside: fitting may compute
        with raise_on_compute():
            Z = est.transform(X_dask)    # must only build a graph
    """
    from dask import base

    saved = dict(base.named_schedulers)
    base.named_schedulers.update(dict.fromkeys(saved, _refuse))
    try:
        with dask.config.set(scheduler=_refuse):
            yield
    finally:
        base.named_schedulers.clear()
        base.named_schedulers.update(saved)


def assert_states_equal(a: Any, b: Any, path: str = "state") -> None:
    """Bitwise equality of two (nested dict/list/array/scalar) states, dtypes included."""
    if isinstance(a, dict):
        assert isinstance(b, dict) and set(a) == set(b), f"{path}: keys {set(a)} vs {set(b)}"
        for k in a:
            assert_states_equal(a[k], b[k], f"{path}[{k!r}]")
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b), f"{path}: lengths {len(a)} vs {len(b)}"
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            assert_states_equal(x, y, f"{path}[{i}]")
    elif hasattr(a, "toarray"):
        np.testing.assert_array_equal(a.toarray(), b.toarray(), err_msg=path)
    elif isinstance(a, np.ndarray) or np.isscalar(a):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b), err_msg=path)
        assert np.asarray(a).dtype == np.asarray(b).dtype or np.isscalar(a), path
    else:
        assert a == b, f"{path}: {a!r} != {b!r}"


def states_allclose(a: Any, b: Any, rtol: float, atol: float, path: str = "state") -> None:
    """Assert two states are equal within tolerances, recursively."""
    if isinstance(a, dict):
        assert isinstance(b, dict) and set(a) == set(b), f"{path}: keys {set(a)} vs {set(b)}"
        for k in a:
            states_allclose(a[k], b[k], rtol, atol, f"{path}[{k!r}]")
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b), f"{path}: lengths {len(a)} vs {len(b)}"
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            states_allclose(x, y, rtol, atol, f"{path}[{i}]")
    elif hasattr(a, "toarray"):
        np.testing.assert_allclose(a.toarray(), b.toarray(), rtol=rtol, atol=atol, err_msg=path)
    else:
        aa, bb = np.asarray(a), np.asarray(b)
        if aa.dtype.kind in "fc":
            np.testing.assert_allclose(aa, bb, rtol=rtol, atol=atol, err_msg=path)
        else:
            np.testing.assert_array_equal(aa, bb, err_msg=path)


# ------------------------------------------------------------- checkpoint form

def _write(group: Any, name: str, value: Any, path: str) -> Any:
    """Store ``value`` under ``name``; return its JSON descriptor."""
    if isinstance(value, dict):
        assert all(isinstance(k, str) for k in value), f"{path}: state keys must be strings"
        sub = group.create_group(name)
        return {"dict": {k: _write(sub, k, v, f"{path}[{k!r}]") for k, v in value.items()}}
    if isinstance(value, (list, tuple)):
        sub = group.create_group(name)
        items = [_write(sub, str(i), v, f"{path}[{i}]") for i, v in enumerate(value)]
        return {"tuple" if isinstance(value, tuple) else "list": items}
    if isinstance(value, (np.ndarray, np.generic)):
        arr = np.asarray(value)
        assert arr.dtype != object, f"{path}: object arrays cannot be checkpointed"
        z = group.create_array(name, shape=arr.shape, dtype=arr.dtype, chunks=arr.shape or None)
        if arr.size:
            z[...] = arr
        return {"array": name, "scalar": isinstance(value, np.generic)}
    if isinstance(value, (bool, int, float, str, type(None))):
        return {"json": json.loads(json.dumps(value))}
    raise AssertionError(f"{path}: a {type(value).__name__} cannot be checkpointed; states "
                         "hold arrays, JSON scalars, and dicts/lists of them")


def _read(group: Any, desc: dict, name: str) -> Any:
    if "dict" in desc:
        sub = group[name]
        return {k: _read(sub, d, k) for k, d in desc["dict"].items()}
    for kind in ("list", "tuple"):
        if kind in desc:
            sub = group[name]
            items = [_read(sub, d, str(i)) for i, d in enumerate(desc[kind])]
            return items if kind == "list" else tuple(items)
    if "array" in desc:
        arr = np.asarray(group[desc["array"]][...])
        return arr[()] if desc["scalar"] else arr
    return desc["json"]


def checkpoint_round_trip(state: Any) -> Any:
    """``state`` written to and read back from an in-memory Zarr group.

    Checkpoints (a fitted model's learned state, a workflow's summary) hold
    NumPy arrays as Zarr arrays and everything else as JSON attributes; a
    state that needs anything else (object arrays, arbitrary classes) cannot
    be checkpointed and fails here with its path in the state.
    """
    import zarr

    root = zarr.open_group(store=zarr.storage.MemoryStore(), mode="w")
    desc = _write(root, "state", state, "state")
    root.attrs["state"] = desc
    return _read(root, dict(root.attrs["state"]), "state")  # type: ignore[arg-type]


def _blocks(n: int, cuts: set[int]) -> tuple[int, ...]:
    edges = [0, *sorted(c for c in cuts if 0 < c < n), n]
    return tuple(b - a for a, b in itertools.pairwise(edges))


class MergeableSummaryTests:
    """Conformance tests every mergeable summary should pass.

    Hooks: :meth:`make_summary`, :meth:`make_data`, optionally
    :meth:`operands`, :meth:`check_guarantee` (with ``exact = False``) and
    :meth:`assert_states_close`.
    """

    exact: bool = True
    has_identity: bool = True
    rtol: float = 1e-10
    atol: float = 1e-12

    # ------------------------------------------------------------------ hooks
    def make_summary(self) -> Any:
        raise NotImplementedError

    def make_data(self, rng: np.random.Generator) -> np.ndarray:
        raise NotImplementedError

    def operands(self) -> tuple:
        return ()

    def check_guarantee(self, state: Any, X: np.ndarray) -> None:
        """Assert ``state`` meets the summary's guarantee for the rows X (``exact = False``)."""
        raise NotImplementedError(
            f"{type(self).__name__} sets exact = False: implement check_guarantee(state, X)")

    def assert_states_close(self, actual: Any, expected: Any, X: np.ndarray) -> None:
        """Assert two states of the rows X agree: within rtol/atol when ``exact``,
        else both within the summary's guarantee."""
        if self.exact:
            states_allclose(actual, expected, self.rtol, self.atol)
        else:
            self.check_guarantee(actual, X)
            self.check_guarantee(expected, X)

    # ---------------------------------------------------------------- helpers
    def _data(self) -> np.ndarray:
        return self.make_data(np.random.default_rng(20240601))

    def _chunk(self, summary: Any, X: np.ndarray, start: int, stop: int) -> Any:
        return summary.chunk(X[start:stop], start, *self.operands())

    # ------------------------------------------------------------------ tests
    def test_declares_exact_or_guarantee(self) -> None:
        if not self.exact:
            # an inexact summary must say what it guarantees, and the state of all rows meets it
            assert type(self).check_guarantee is not MergeableSummaryTests.check_guarantee
            X = self._data()
            self.check_guarantee(self._chunk(self.make_summary(), X, 0, X.shape[0]), X)
        else:
            assert self.rtol <= 1e-6, "an exact summary compares with a tight tolerance"

    def test_chunk_is_deterministic(self) -> None:
        X = self._data()
        s = self.make_summary()
        assert_states_equal(self._chunk(s, X, 0, X.shape[0]), self._chunk(s, X, 0, X.shape[0]))

    def test_merge_is_associative(self) -> None:
        X = self._data()
        n = X.shape[0]
        s = self.make_summary()
        a, b, c = (self._chunk(s, X, lo, hi) for lo, hi in
                   ((0, n // 3), (n // 3, 2 * n // 3), (2 * n // 3, n)))
        left = s.merge([s.merge([a, b]), c])
        right = s.merge([a, s.merge([b, c])])
        flat = s.merge([a, b, c])
        self.assert_states_close(left, right, X)
        self.assert_states_close(flat, left, X)
        self.assert_states_close(flat, self._chunk(s, X, 0, n), X)

    def test_merge_with_identity(self) -> None:
        X = self._data()
        s = self.make_summary()
        state = self._chunk(s, X, 0, X.shape[0])
        if not self.has_identity:
            # a summary without an identity must say so through the protocol
            with pytest.raises(NotImplementedError):
                s.empty()
            return
        empty = s.empty()
        self.assert_states_close(s.merge([empty, state]), state, X)
        self.assert_states_close(s.merge([state, empty]), state, X)

    def test_pickle_round_trip(self) -> None:
        X = self._data()
        s = self.make_summary()
        state = self._chunk(s, X, 0, X.shape[0])
        assert_states_equal(pickle.loads(pickle.dumps(state)), state)
        s2 = pickle.loads(pickle.dumps(s))
        assert_states_equal(self._chunk(s2, X, 0, X.shape[0]), state)

    def test_checkpoint_round_trip(self) -> None:
        X = self._data()
        n = X.shape[0]
        s = self.make_summary()
        first = self._chunk(s, X, 0, n // 2)
        back = checkpoint_round_trip(first)
        assert_states_equal(back, first)
        # a restored state merges with later rows exactly as the live one (partial_fit)
        later = self._chunk(s, X, n // 2, n)
        assert_states_equal(s.merge([back, later]), s.merge([first, later]))

    @settings(max_examples=12, deadline=None, suppress_health_check=list(HealthCheck))
    @given(cuts=st.sets(st.integers(1, 10_000), max_size=7), split_every=st.integers(2, 5))
    def test_tree_reduce_any_chunking_matches_single_block(self, cuts: set[int],
                                                           split_every: int) -> None:
        X = self._data()
        n = X.shape[0]
        chunks = _blocks(n, {c % n for c in cuts})
        s = self.make_summary()
        Xd = from_source(X, (chunks, X.shape[1]))
        with dask.config.set(scheduler="sync"):
            got = tree_reduce(s, Xd, *self.operands(), split_every=split_every).compute()
        self.assert_states_close(got, self._chunk(s, X, 0, n), X)


def to_strict_device(a: Any) -> Any:
    """NumPy array ``a`` as an ``array_api_strict`` array on a non-CPU device of that library.

    There, a hidden conversion to NumPy raises and an operand allocated on the
    host fails when it meets the array: the stand-in for a GPU block in tests
    that run without a GPU (needs the ``array-api-strict`` test dependency).
    """
    import array_api_strict as xps

    return xps.asarray(np.asarray(a), device=xps.Device("device1"))


def from_strict_device(a: Any) -> np.ndarray:
    """``a`` as NumPy, after asserting it is a strict array on :func:`to_strict_device`'s device."""
    import array_api_compat
    import array_api_strict as xps

    assert array_api_compat.is_array_api_strict_namespace(array_api_compat.array_namespace(a)), \
        f"expected an array_api_strict array, got {type(a).__module__}.{type(a).__name__}"
    assert a.device == xps.Device("device1"), f"expected the strict test device, got {a.device}"
    return np.from_dlpack(a)


def learned_state(est: Any) -> dict[str, Any]:
    """An estimator's learned arrays and numbers (public attributes ending in ``_``)."""
    return {k: v for k, v in sorted(vars(est).items())
            if k.endswith("_") and not k.startswith("_")
            and ((isinstance(v, np.ndarray) and v.dtype != object)
                 or (isinstance(v, (int, float, np.number)) and not isinstance(v, bool)))}


class MergeableEstimatorTests:
    """Conformance tests of the mergeable-estimator protocol
    (:class:`~distsketch.estimators.base.MergeableEstimator`).

    Hooks: :meth:`make_estimator` (a new, unfitted estimator) and
    :meth:`make_data` (rows and targets, None for an unsupervised estimator);
    optionally ``first_call`` (keyword arguments of the first ``partial_fit``,
    e.g. ``{"classes": [0, 1, 2]}``), ``exact``/``rtol``/``atol`` and
    :meth:`check_guarantee` as in :class:`MergeableSummaryTests`.

    The checks: ``partial_fit`` is ``fold(summarize(X, y, row_offset=n_samples_seen_))``
    bitwise; ``summarize`` changes nothing; summaries computed ahead from a
    copy of the fitted operators and folded in order give bitwise the state
    of ``partial_fit`` batch by batch (the workflow's segments in flight);
    ``merge_summaries`` is associative and folding a merge equals folding
    its parts (within ``rtol``, or the guarantee when not ``exact``).
    """

    exact: bool = True
    rtol: float = 1e-9
    atol: float = 1e-10
    first_call: dict[str, Any] = {}

    # ------------------------------------------------------------------ hooks
    def make_estimator(self) -> Any:
        raise NotImplementedError

    def make_data(self, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray | None]:
        raise NotImplementedError

    def check_guarantee(self, est: Any, X: np.ndarray) -> None:
        """Assert the fitted ``est`` meets its guarantee for the rows X (``exact = False``)."""
        raise NotImplementedError(
            f"{type(self).__name__} sets exact = False: implement check_guarantee(est, X)")

    # ---------------------------------------------------------------- helpers
    def _batches(self) -> list[tuple[np.ndarray, Any]]:
        X, y = self.make_data(np.random.default_rng(20240602))
        cuts = [0, X.shape[0] // 4, X.shape[0] // 2, 3 * X.shape[0] // 4, X.shape[0]]
        return [(X[a:b], None if y is None else y[a:b]) for a, b in itertools.pairwise(cuts)]

    def _first(self) -> tuple[Any, list[tuple[np.ndarray, Any]]]:
        batches = self._batches()
        X0, y0 = batches[0]
        est = self.make_estimator()
        est.partial_fit(X0, **self.first_call) if y0 is None else \
            est.partial_fit(X0, y0, **self.first_call)
        return est, batches[1:]

    @staticmethod
    def _partial_fit(est: Any, X: np.ndarray, y: Any) -> None:
        est.partial_fit(X) if y is None else est.partial_fit(X, y)

    @staticmethod
    def _summaries(est: Any, batches: list, reverse: bool = False) -> list[Any]:
        """The summaries of consecutive batches after the rows ``est`` has seen (computed
        last batch first with ``reverse``: they need not be computed in row order)."""
        offsets = np.cumsum([int(est.n_samples_seen_), *(X.shape[0] for X, _ in batches)])
        order = range(len(batches))[::-1] if reverse else range(len(batches))
        out: dict[int, Any] = {}
        for i in order:
            X, y = batches[i]
            out[i] = est.summarize(X, y, row_offset=int(offsets[i]))
        return [out[i] for i in range(len(batches))]

    def _assert_close(self, a: Any, b: Any, X: np.ndarray) -> None:
        if self.exact:
            states_allclose(learned_state(a), learned_state(b), self.rtol, self.atol)
        else:
            self.check_guarantee(a, X)
            self.check_guarantee(b, X)
        assert a.n_samples_seen_ == b.n_samples_seen_

    # ------------------------------------------------------------------ tests
    def test_partial_fit_is_fold_of_summarize(self) -> None:
        a, batches = self._first()
        b = pickle.loads(pickle.dumps(a))
        for X, y in batches:
            self._partial_fit(a, X, y)
            assert b.fold(b.summarize(X, y, row_offset=b.n_samples_seen_)) is b
        assert_states_equal(learned_state(b), learned_state(a))

    def test_summarize_changes_nothing(self) -> None:
        est, batches = self._first()
        before = pickle.dumps(est)
        self._summaries(est, batches)
        # nothing changed, private attributes and nested estimators included
        assert pickle.dumps(est) == before
        # and its private state too: a later fold gives what it gives without the summaries
        twin = pickle.loads(before)
        for X, y in batches:
            self._partial_fit(est, X, y)
            self._partial_fit(twin, X, y)
        assert_states_equal(learned_state(est), learned_state(twin))

    def test_summaries_ahead_folded_in_order_equal_partial_fit(self) -> None:
        est, batches = self._first()
        ref = pickle.loads(pickle.dumps(est))
        # computed from a copy of the operators, last batch first, before any fold
        summaries = self._summaries(pickle.loads(pickle.dumps(est)), batches, reverse=True)
        for (X, y), s in zip(batches, summaries, strict=True):
            self._partial_fit(ref, X, y)
            est.fold(s)
            assert_states_equal(learned_state(est), learned_state(ref))

    def test_merge_summaries_is_associative(self) -> None:
        est, batches = self._first()
        s1, s2, s3 = self._summaries(est, batches)
        folds = []
        for merged in (est.merge_summaries([est.merge_summaries([s1, s2]), s3]),
                       est.merge_summaries([s1, est.merge_summaries([s2, s3])]),
                       est.merge_summaries([s1, s2, s3])):
            folds.append(pickle.loads(pickle.dumps(est)).fold(merged))
        # folding the merge of the batches equals partial_fit batch by batch
        for X, y in batches:
            self._partial_fit(est, X, y)
        X_all = np.concatenate([self._batches()[0][0], *(X for X, _ in batches)])
        for folded in folds:
            self._assert_close(folded, est, X_all)


class LocationTests:
    """Conformance tests every storage kind (:class:`~distsketch.io.storage.location.Location`
    subclass) should pass.

    Hook: :meth:`make_location`.  A kind that needs a server takes it in an
    autouse fixture of the subclass and keeps it on ``self``.

    The contract: objects are written whole and read back byte for byte, a
    missing one is a :class:`FileNotFoundError` (where the storage has folders,
    ``write_bytes`` writes into existing ones: the tests make them first); a child lies inside its
    parent and keeps its kind; an output is committed all at once by
    :meth:`~distsketch.io.storage.location.Location.atomic_output` (by a folder swap
    where ``supports_rename``, else by its manifest, written last, so that an
    output without one reads as uncommitted); a
    :meth:`~distsketch.io.storage.location.Location.checkpoint` replaces its object and
    its store together; ``supports_links`` says whether
    stores are checked for links; :meth:`~distsketch.io.storage.location.Location.writer_lock`
    admits one writer at a time.
    """

    # ------------------------------------------------------------------ hooks
    def make_location(self, tmp_path: Any) -> Any:
        """A fresh :class:`~distsketch.io.storage.location.Location` where nothing exists yet
        (``tmp_path``: pytest's temporary folder of the test)."""
        raise NotImplementedError

    # ---------------------------------------------------------------- helpers
    @pytest.fixture
    def loc(self, tmp_path: Any) -> Any:
        return self.make_location(tmp_path)

    @staticmethod
    def _folders(loc: Any, *names: str) -> None:
        """Make the folders ``write_bytes`` writes into: on a file system they must exist
        (no call creates them behind a writer's back); on an object store this is a no-op."""
        for name in ("", *names):
            loc.fs.makedirs(loc.child(name).path if name else loc.path, exist_ok=True)

    @staticmethod
    def _commit(loc: Any, files: dict[str, bytes], *, overwrite: bool) -> None:
        with loc.atomic_output(overwrite=overwrite) as tmp:
            for name, data in files.items():
                tmp.write_bytes(name, data)

    @staticmethod
    def _leftovers(loc: Any) -> list[str]:
        # temporaries (.tmp-, .old-, .init-) and claims of writers of this output
        return [n for n in loc.parent.list_names() if n.startswith(f".{loc.name}.")]

    # ------------------------------------------------------------------ tests
    def test_write_bytes_read_bytes_round_trip(self, loc: Any) -> None:
        assert not loc.exists()
        data = bytes(range(256))
        self._folders(loc, "sub")
        loc.write_bytes("a.bin", data)
        loc.write_bytes("sub/b.bin", b"b")
        assert loc.exists()
        assert loc.read_bytes("a.bin") == data
        assert loc.child("sub").read_bytes("b.bin") == b"b"
        loc.write_bytes("a.bin", b"short")  # replaced whole, never appended to
        assert loc.read_bytes("a.bin") == b"short"
        assert loc.list_names() == ["a.bin", "sub"]

    def test_isfile(self, loc: Any) -> None:
        assert not loc.isfile("a.bin")
        self._folders(loc, "sub")
        loc.write_bytes("sub/a.bin", b"1")
        assert loc.isfile("sub/a.bin") and loc.child("sub").isfile("a.bin")
        assert not loc.isfile("sub")  # a folder (prefix) is not a file
        assert not loc.isfile("a.bin")

    def test_missing_object_is_file_not_found(self, loc: Any) -> None:
        with pytest.raises(FileNotFoundError):
            loc.read_bytes("nothing.bin")  # the location itself is missing too
        self._folders(loc)
        loc.write_bytes("a.bin", b"1")
        with pytest.raises(FileNotFoundError):
            loc.read_bytes("nothing.bin")
        assert loc.child("missing").list_names() == []

    def test_remove_deletes_the_name_and_what_is_under_it(self, loc: Any) -> None:
        self._folders(loc, "sub", "sub/deeper")
        loc.write_bytes("keep.bin", b"1")
        loc.write_bytes("sub/a.bin", b"2")
        loc.write_bytes("sub/deeper/b.bin", b"3")
        loc.remove("sub")
        loc.remove("never-was")  # quietly
        assert loc.list_names() == ["keep.bin"]
        assert loc.read_bytes("keep.bin") == b"1"

    def test_children_stay_inside_and_keep_their_kind(self, loc: Any) -> None:
        child = loc.child("a")
        assert type(child) is type(loc) and type(loc.sibling("b")) is type(loc)
        assert child.within(loc) and loc.child("a/b").within(loc) and loc.within(loc)
        assert child.parent == loc and child.name == "a"
        assert not loc.within(child)
        # beside it, even with a name it begins with: not inside
        assert not loc.sibling(f"{loc.name}x").within(loc)
        assert not loc.sibling(f".{loc.name}.tmp-1").within(loc)
        self._folders(loc, "a")
        loc.child("a").write_bytes("f.bin", b"1")
        assert loc.read_bytes("a/f.bin") == b"1"

    def test_capabilities_are_declared_on_the_kind(self, loc: Any) -> None:
        for flag in ("supports_rename", "supports_links", "is_local"):
            assert isinstance(getattr(type(loc), flag), bool), flag
        assert isinstance(loc.noun, str) and loc.noun

    def test_links_are_refused_where_the_storage_has_them(self, loc: Any) -> None:
        from distsketch.errors import StoreError

        self._folders(loc)
        loc.write_bytes("data.bin", b"1")
        loc.refuse_links("test store")  # no link: read as it is
        if not loc.supports_links:
            return  # nothing can be linked: no check to make
        elsewhere = loc.sibling(f"{loc.name}-elsewhere")
        self._folders(elsewhere)
        elsewhere.write_bytes("secret.bin", b"s")
        loc.fs.symlink(elsewhere.child("secret.bin").path, loc.child("link.bin").path)
        with pytest.raises(StoreError, match="link"):
            loc.refuse_links("test store")
        assert elsewhere.read_bytes("secret.bin") == b"s"

    def test_commit_is_all_or_nothing(self, loc: Any) -> None:
        from distsketch.errors import StoreError

        with loc.atomic_output(overwrite=False) as tmp:
            assert not tmp.within(loc)
            tmp.write_bytes("a.bin", b"old")
            tmp.write_bytes("old-only.bin", b"x")
            assert not loc.isfile("a.bin")  # nothing shows before the block ends
        assert loc.read_bytes("a.bin") == b"old" and loc.written_by_distsketch()
        loc.check_committed()
        # a failing replacement changes nothing and leaves no temporary behind
        with pytest.raises(RuntimeError, match="stop"):
            with loc.atomic_output(overwrite=True) as tmp:
                tmp.write_bytes("a.bin", b"new")
                tmp.write_bytes("b.bin", b"new")
                raise RuntimeError("stop")
        assert loc.read_bytes("a.bin") == b"old" and not loc.isfile("b.bin")
        assert self._leftovers(loc) == []
        # an output is replaced only when asked to
        with pytest.raises(StoreError):
            self._commit(loc, {"a.bin": b"new"}, overwrite=False)
        assert loc.read_bytes("a.bin") == b"old"
        # a replacement is whole: what the old output alone held is gone
        self._commit(loc, {"a.bin": b"new", "b.bin": b"new"}, overwrite=True)
        assert loc.read_bytes("a.bin") == b"new" and loc.read_bytes("b.bin") == b"new"
        assert not loc.isfile("old-only.bin")
        assert self._leftovers(loc) == []
        loc.check_committed()

    def test_output_without_manifest_is_uncommitted_where_nothing_renames(self, loc: Any
                                                                          ) -> None:
        from distsketch.errors import StoreError
        from distsketch.io.commit.manifest import MANIFEST_NAME

        self._commit(loc, {"a.bin": b"1"}, overwrite=False)
        if loc.supports_rename:
            # committed by its rename: what is there is whole, whatever it holds
            loc.remove(MANIFEST_NAME)
            loc.check_committed()
            return
        # committed by its manifest, written last: without it, a write was interrupted
        assert loc.isfile(MANIFEST_NAME)
        loc.remove(MANIFEST_NAME)
        with pytest.raises(StoreError, match="no manifest"):
            loc.check_committed()
        assert loc.read_bytes("a.bin") == b"1"  # refused, not deleted

    def test_checkpoint_object_and_store_are_replaced_together(self, loc: Any) -> None:
        from pathlib import Path

        from distsketch.errors import StoreError
        from distsketch.io.storage.urls import resolve

        def write(data: bytes) -> Any:
            def into(path: Path) -> None:
                Path(path).mkdir(parents=True)
                (Path(path) / "data.bin").write_bytes(data)
            return into

        def stop(path: Path) -> None:
            raise RuntimeError("stop")

        seen: list[bytes] = []

        def read(store: Any) -> None:  # a local path, or a location on an object store
            seen.append(resolve(store).read_bytes("data.bin"))

        ckpt = loc.checkpoint(lambda where, why: StoreError(f"damaged {where}: {why}"))
        assert ckpt.read() is None
        ckpt.save({"rows": 1}, write(b"one"), read)
        assert seen == [b"one"]  # the caller is handed the bytes committed
        assert ckpt.read()["rows"] == 1 and ckpt.store().read_bytes("data.bin") == b"one"
        # a save that fails changes nothing and leaves no temporary behind
        with pytest.raises(RuntimeError, match="stop"):
            ckpt.save({"rows": 2}, stop, read)
        assert ckpt.read()["rows"] == 1 and ckpt.store().read_bytes("data.bin") == b"one"
        assert self._leftovers(loc) == []
        ckpt.save({"rows": 3}, write(b"three"), read)
        ckpt.clean()
        assert ckpt.read()["rows"] == 3
        ckpt.load(read)
        assert seen == [b"one", b"three", b"three"]
        # what the object replaced is gone: one store is left beside it
        store = ckpt.store()
        assert store.within(loc)
        top = store.path[len(loc.path.rstrip("/")) + 1:].split("/")[0]
        assert [n for n in loc.list_names() if not n.startswith(".")] == sorted(["state.json", top])
        ckpt.check_foreign([])  # its own checkpoint is not foreign
        loc.write_bytes("state.json", b"[1, 2]")
        with pytest.raises(StoreError, match="damaged"):
            ckpt.read()

    def test_writer_lock_admits_one_writer(self, loc: Any) -> None:
        from distsketch.errors import StoreError

        self._folders(loc)
        loc.write_bytes("data.bin", b"1")
        with loc.writer_lock("writing") as held:
            held.confirm()
            with pytest.raises(StoreError, match="another"):
                with loc.writer_lock("writing"):
                    pass
            held.confirm()  # the refused writer took nothing over
        with loc.writer_lock("writing") as again:  # released on leaving the block
            again.confirm()
        assert loc.read_bytes("data.bin") == b"1"
