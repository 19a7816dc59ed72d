"""Per-task runtime hygiene and computing with progress.

* BLAS is pinned to one thread per task (:mod:`distsketch.blas`, re-exported);
  :func:`compute` pins it for the whole local computation, since limits are
  process-global and a per-task restore would race.
* :func:`compute` runs collections on the active scheduler with a progress bar,
  locally or under ``distributed``; inside a fit, the fit's own report
  (:mod:`distsketch.graph.progress`) shows every pass instead.
* Lean graphs: :func:`lean_graphs` gives a fused chain its output key instead of
  leaving an alias task (:func:`drop_aliases`), and :func:`fold_reads` folds each
  block's read into the one task that uses it: one task per block, which never
  travels between workers.
"""

from __future__ import annotations

import contextlib
import sys
from collections import Counter
from collections.abc import Iterator
from typing import Any

import dask
import numpy as np

from distsketch.blas import blas_single_thread, pin_blas_for_tasks, single_threaded_blas, task_blas
from distsketch.graph.progress import (
    PROGRESS_KEY,
    progress_enabled,
)

__all__ = ["PROGRESS_KEY", "active_client", "blas_single_thread", "compute", "compute_array",
           "drop_aliases", "fold_reads", "lean_graphs", "persist", "pin_blas_for_tasks",
           "progress_enabled", "rechunk", "single_threaded_blas", "task_blas"]


def drop_aliases(dsk: Any, keys: Any = ()) -> dict:
    """Replace each alias task by the one task it points to, under the alias's key.

    Only a target that nothing else uses and that was not requested is
    renamed, so the graph computes the same values with fewer tasks.
    """
    from dask._task_spec import Alias

    dsk = dict(dsk)
    refs: Counter = Counter()
    for node in dsk.values():
        refs.update(getattr(node, "dependencies", ()))
    wanted = set(_flat_keys(keys))
    for key, node in list(dsk.items()):
        if not isinstance(node, Alias) or key != node.key:
            continue
        target = dsk.get(node.target)
        if (target is None or isinstance(target, Alias) or refs[node.target] != 1
                or node.target in wanted):
            continue
        del dsk[node.target]
        dsk[key] = target.substitute({}, key=key)
    return dsk


def fold_reads(dsk: Any, keys: Any = ()) -> dict:
    """Fold each block's read (and cut of a shared input) into the one task that uses it.

    A read (only data below it) or a cut (one block's rows of a shared input)
    with exactly one user, not requested, becomes part of that user under its
    key: a block with operands is read where it is used and never travels, and
    nothing is computed twice.  Only one row block of each array is folded into
    a task; several (a merge of states) stay tasks, or they would run in turn.
    """
    from dask._task_spec import DataNode, Task

    dsk = dict(dsk)
    refs: Counter = Counter()
    for node in dsk.values():
        refs.update(getattr(node, "dependencies", ()))
    wanted = set(_flat_keys(keys))

    def single(key: Any) -> bool:
        node = dsk.get(key)
        return (type(node) is Task and refs[key] == 1 and key not in wanted
                and not node.block_fusion)

    def foldable(key: Any) -> bool:
        # a read (only data below it) or a cut (data and shared tasks below it)
        return single(key) and all(isinstance(dsk.get(d), DataNode) or refs[d] > 1
                                   for d in dsk[key].dependencies)

    def name_row(key: Any) -> tuple[Any, Any]:
        # an array block's name and row index (a state's index in a tree)
        if isinstance(key, tuple):
            return key[0], key[1] if len(key) > 1 else None
        return key, None

    for _ in range(4):  # a cut inside a cut inside the block's task: a few rounds at most
        changed = False
        for key in list(dsk):
            node = dsk.get(key)
            if type(node) is not Task or len(node.dependencies) < 2 \
                    or node.block_fusion:
                continue  # one dependency: dask's linear fusion already joins the chain
            # one row block of each input (its column pieces too)
            rows: dict = {}
            for d in node.dependencies:
                name, row = name_row(d)
                rows.setdefault(name, set()).add(row)
            reads = [d for d in node.dependencies
                     if len(rows[name_row(d)[0]]) == 1 and foldable(d)]
            if not reads:
                continue
            dsk[key] = Task.fuse(*(dsk.pop(r) for r in reads), node, key=key)
            changed = True
        if not changed:
            break
    return dsk


def _flat_keys(keys: Any) -> list:
    if isinstance(keys, (list, set)):
        return [k for sub in keys for k in _flat_keys(sub)]
    return [keys]


def _lean_array_optimize(dsk: Any, keys: Any, **kwargs: Any) -> dict:
    from dask.array.optimization import optimize

    return _lean(optimize(dsk, keys, **kwargs), keys)


def _lean_delayed_optimize(dsk: Any, keys: Any, **kwargs: Any) -> dict:
    from dask.delayed import optimize

    return _lean(optimize(dsk, keys, **kwargs), keys)


def _lean(dsk: Any, keys: Any) -> dict:
    return fold_reads(drop_aliases(dsk, keys), keys)


@contextlib.contextmanager
def lean_graphs() -> Iterator[None]:
    """Optimise array and delayed graphs without alias tasks inside the block."""
    if dask.config.get("array_optimize", None) is not None:
        yield  # the caller chose its own optimisation
        return
    with dask.config.set(array_optimize=_lean_array_optimize,
                         delayed_optimize=_lean_delayed_optimize):
        yield

def active_client() -> Any | None:
    """The current ``distributed.Client`` if Dask is set to use one, else None (without
    importing ``distributed``, a quarter of a second, in a process that never did)."""
    if "distributed" not in sys.modules:
        return None
    try:
        from distributed import default_client
    except ImportError:  # pragma: no cover - distributed is a required dependency
        return None
    try:
        client = default_client()
    except ValueError:
        return None
    scheduler = dask.config.get("scheduler", None)
    if scheduler not in (None, "dask.distributed", "distributed"):
        return None
    return client


def compute(*collections: Any, progress: bool | None = None, **kwargs: Any) -> tuple[Any, ...]:
    """``dask.compute`` with a progress bar suited to the active scheduler.

    ``progress`` shows it on stderr (None follows :func:`progress_enabled`);
    ``kwargs`` go to ``dask.compute`` (``scheduler=...``).
    """
    with lean_graphs():
        return _compute(collections, progress, kwargs)


def _compute(collections: tuple, progress: bool | None, kwargs: dict) -> tuple[Any, ...]:
    from distsketch.graph.progress import active_fit_progress

    # inside a fit that reports its progress, the fit's report shows every pass: on a local
    # scheduler through dask's callbacks, on a cluster from here
    fit = active_fit_progress()
    show = progress_enabled(progress) and fit is None
    client = active_client() if "scheduler" not in kwargs else None
    if client is not None:
        if fit is not None:
            return _reported_on_cluster(fit, client, collections)
        if not show:
            return tuple(client.compute(list(collections), sync=True))
        from distributed import progress as dprogress

        futures = client.compute(list(collections))
        dprogress(futures, multi=False)
        print(file=sys.stderr)
        return tuple(client.gather(futures))
    kwargs = _without_distributed(collections, kwargs)
    with blas_single_thread():
        if show:
            from dask.diagnostics import ProgressBar

            with ProgressBar(out=sys.stderr, minimum=1.0):
                return dask.compute(*collections, **kwargs)
        return dask.compute(*collections, **kwargs)


def persist(collection: Any) -> Any:
    """``dask.persist`` of one collection on the active scheduler; returns it with its blocks held.

    Locally the blocks stay in this process; under ``distributed`` on the
    workers that computed them (recomputed from their tasks if a worker is
    lost), and this returns once all are there, raising a task's error.
    Inside a fit that reports its progress, this is one of its passes.
    """
    with lean_graphs():
        client = active_client()
        if client is None:
            kwargs = _without_distributed((collection,), {})
            with blas_single_thread():
                return dask.persist(collection, **kwargs)[0]
        from distributed import futures_of, wait

        from distsketch.graph.progress import active_fit_progress, pass_label

        fit = active_fit_progress()
        token = object()
        if fit is not None:
            fit.pass_started(id(token), pass_label(dask.core.flatten(collection.__dask_keys__())))
        failed = True
        try:
            held = client.persist(collection)
            futures = futures_of(held)
            wait(futures)
            for future in futures:
                if future.status == "error":
                    future.result()  # raises the task's exception
            failed = False
            return held
        finally:
            if fit is not None:
                fit.pass_finished(id(token), failed=failed)


def _reported_on_cluster(fit: Any, client: Any, collections: tuple) -> tuple[Any, ...]:
    """Compute on ``client`` as one pass of ``fit``'s progress report."""
    from distsketch.graph.progress import pass_label

    keys = [k for c in collections if dask.is_dask_collection(c)
            for k in dask.core.flatten(c.__dask_keys__())]
    token = object()
    fit.pass_started(id(token), pass_label(keys))
    failed = True
    try:
        results = tuple(client.compute(list(collections), sync=True))
        failed = False
        return results
    finally:
        fit.pass_finished(id(token), failed=failed)


def _without_distributed(collections: tuple, kwargs: dict) -> dict:
    # dask.compute imports distributed (a quarter of a second) only to find no client in a
    # process that never imported it: pass the scheduler dask would pick; else dask decides
    if "distributed" in sys.modules or dask.config.get("get", None) is not None:
        return kwargs
    from dask.base import named_schedulers

    name = kwargs.get("scheduler", dask.config.get("scheduler", None))
    if isinstance(name, str):
        get = named_schedulers.get(name.lower())
        return kwargs if get is None else {**kwargs, "scheduler": get}
    if name is not None:
        return kwargs  # a callable, an executor or a client: dask takes it as given
    schedulers = {getattr(c, "__dask_scheduler__", None) for c in collections}
    if len(schedulers) != 1 or None in schedulers \
            or not all(dask.is_dask_collection(c) for c in collections):
        return kwargs
    return {**kwargs, "scheduler": schedulers.pop()}


def rechunk(X: Any, chunks: Any) -> Any:
    """``X.rechunk(chunks)``, by tasks where dask would import ``distributed`` only to choose so
    (a quarter of a second, in a process that has no client)."""
    if "distributed" in sys.modules or dask.config.get("array.rechunk.method", None) is not None:
        return X.rechunk(chunks)
    return X.rechunk(chunks, method="tasks")


def compute_array(arr: Any, progress: bool | None = None) -> np.ndarray:
    """Compute a dask array into one NumPy array.

    On local schedulers every block is written straight into a preallocated
    result, which saves the concatenation copy and its page faults; under
    ``distributed`` the blocks are gathered by :func:`compute`.
    """
    if active_client() is not None:
        return compute(arr, progress=progress)[0]
    import dask.array as da

    out = np.empty(arr.shape, dtype=arr.dtype)
    compute(da.store(arr, out, lock=False, compute=False), progress=progress)
    return out
