"""Per-task runtime hygiene and computing with progress.

* BLAS threads are pinned to one per task (nested BLAS threading inside Dask
  threads is slow and makes results depend on thread counts).  BLAS thread
  limits are process-global, so a per-task "set then restore" would race
  between concurrent tasks; instead :func:`compute` pins BLAS for the whole
  local computation, and tasks running in pool threads (a user's own
  ``.compute()``, ``distributed`` workers) pin it once for their process.
  The pinning itself lives in :mod:`distsketch.blas` (re-exported here).
* :func:`compute` runs collections on the active scheduler with a progress bar
  that works both locally (``dask.diagnostics.ProgressBar``) and under
  ``distributed`` (``distributed.progress``); inside a fit, the fit's own
  report (:mod:`distsketch.graph.progress`) shows every pass instead.
* Lean graphs: dask's linear fusion renames a fused chain (read + map) and
  leaves the old output key as an alias task, one more task per block for the
  scheduler.  :func:`lean_graphs` (active inside :func:`compute`) gives the
  fused task its output key instead (:func:`drop_aliases`).  Linear fusion
  also stops at a task with several dependencies, which is every map or
  summary with operands (a block and W, b): :func:`fold_reads` folds each
  block's read into the one task that uses it, so a pass is one task per
  block and the block never travels between workers.
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
           "drop_aliases", "fold_reads", "lean_graphs", "pin_blas_for_tasks", "progress_enabled",
           "rechunk", "single_threaded_blas", "task_blas"]


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

    A root read is a task whose own dependencies are only data (a store
    handle): reading a block of a Zarr store, say.  When exactly one task
    uses it and it was not requested, the two become one task under the
    user's key, so a block with operands (W, b) is read where it is used and
    never sent to another worker.  Nothing is computed twice: the read had
    only that one user.

    A cut is likewise used by one task, and depends on data and on tasks
    that other tasks use too: one block's rows of a shared input (targets
    read in larger blocks, cut to a store's re-read blocks).  It is folded
    into its user too, after the cuts below it, so the block's task depends
    only on shared inputs and the scheduler shares such tasks out one by one.
    Only one row block of each array (with its column pieces) is folded into
    a task: a task using several row blocks of one array (a merge of several
    blocks' states) keeps them, or they would run one after another.
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
            # one row block of each input (its column pieces too): several row blocks
            # of one array (a merge of states) stay tasks of their own, or they would
            # run one after another
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

    return fold_reads(drop_aliases(optimize(dsk, keys, **kwargs), keys), keys)


def _lean_delayed_optimize(dsk: Any, keys: Any, **kwargs: Any) -> dict:
    from dask.delayed import optimize

    return fold_reads(drop_aliases(optimize(dsk, keys, **kwargs), keys), keys)


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
    """The current ``distributed.Client`` if Dask is set to use one, else None.

    A process that never imported ``distributed`` has no client, and importing
    it only to ask costs a quarter of a second: then None without the import.
    """
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

    Parameters
    ----------
    *collections
        Dask collections (arrays, delayed) to compute together.
    progress : bool or None
        Show progress on stderr; None follows :func:`progress_enabled`.
    **kwargs
        Passed to ``dask.compute`` (``scheduler=...``).

    Returns
    -------
    tuple
        The computed results, in order.
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
    """``kwargs`` with the scheduler that dask would choose, where dask would import
    ``distributed`` only to find no client.

    ``dask.compute`` imports ``distributed`` (a quarter of a second, once per
    process) to look for a client, or to check one for a scheduler given by
    name, before it takes the collections' own scheduler or the named one.  A
    process that never imported ``distributed`` has no client, so the same
    scheduler is passed as the function dask would pick.  Otherwise (or where
    the choice is not plain) ``kwargs`` as they are: dask decides.
    """
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
    """``X.rechunk(chunks)``, by tasks where dask would import ``distributed`` only to choose so.

    With no method configured (dask config ``array.rechunk.method``), dask's
    ``rechunk`` asks ``distributed`` for a client, importing it (a quarter of
    a second, once per process), and rechunks by tasks when there is none.
    A process that never imported ``distributed`` has none: the same choice,
    without the import.
    """
    if "distributed" in sys.modules or dask.config.get("array.rechunk.method", None) is not None:
        return X.rechunk(chunks)
    return X.rechunk(chunks, method="tasks")


def compute_array(arr: Any, progress: bool | None = None) -> np.ndarray:
    """Compute a dask array into one NumPy array.

    On local schedulers every block is written straight into a preallocated
    result (``dask.array.store``), which saves the concatenation copy and the
    second set of page faults a plain ``compute`` costs; under ``distributed``
    blocks must travel back anyway and are gathered by :func:`compute`.

    Parameters
    ----------
    arr : dask array
    progress : bool or None
        As in :func:`compute`.

    Returns
    -------
    ndarray of arr's shape and dtype
    """
    if active_client() is not None:
        return compute(arr, progress=progress)[0]
    import dask.array as da

    out = np.empty(arr.shape, dtype=arr.dtype)
    compute(da.store(arr, out, lock=False, compute=False), progress=progress)
    return out
