"""Row blocks of a dask array computed one by one, in reader threads, through its own graph."""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Sequence
from typing import Any

import dask

from distsketch.graph.blocks import whole_rows
from distsketch.graph.runtime import lean_graphs

__all__ = ["BlockSource"]


def _cull(dsk: dict, key: Any) -> set:
    # the keys `key` depends on, itself included
    seen, stack = {key}, [key]
    while stack:
        for dep in dsk[stack.pop()].dependencies:
            if dep not in seen:
                seen.add(dep)
                stack.append(dep)
    return seen


class BlockSource:
    """Row blocks of a dask array computed one by one through its own graph.

    The graph is optimised once (as for a ``compute``) and culled per block;
    a task that several blocks need (a chunk cut into several blocks, a
    shared read) is computed once, by the first reader that needs it, and
    dropped when its last block was read.

    Parameters
    ----------
    dsk : dict
        The low-level graph (``key -> GraphNode``) holding every block's key.
    keys : sequence
        The blocks' keys, in row order.
    """

    def __init__(self, dsk: dict, keys: Sequence[Any]):
        from dask._task_spec import DataNode

        self.dsk = dsk
        self.keys = list(keys)
        self.needs = [_cull(dsk, k) for k in self.keys]
        counts = Counter(k for need in self.needs for k in need)
        self.shared = {k for k, c in counts.items() if c > 1 and not isinstance(dsk[k], DataNode)}
        self._left = Counter({k: counts[k] for k in self.shared})
        self._values: dict = {}
        self._locks = {k: threading.Lock() for k in self.shared}
        self._guard = threading.Lock()

    @classmethod
    def of_array(cls, X: Any) -> BlockSource:
        """The row blocks of dask array ``X`` (column blocks joined)."""
        X = whole_rows(X)
        keys = [k[0] if isinstance(k, list) else k for k in X.__dask_keys__()]
        with lean_graphs():
            (opt,) = dask.optimize(X)
        return cls(dict(opt.__dask_graph__()), keys)

    def subset(self, indices: Sequence[int]) -> BlockSource:
        """The blocks ``indices`` only, with their part of the graph (a worker's share)."""
        keys = [self.keys[i] for i in indices]
        need = set().union(*(self.needs[i] for i in indices)) if keys else set()
        return BlockSource({k: self.dsk[k] for k in need}, keys)

    def __getstate__(self) -> dict:
        # travels as graph and keys (an opaque object: a scheduler does not unpack its tasks)
        return {"dsk": self.dsk, "keys": self.keys}

    def __setstate__(self, state: dict) -> None:
        self.__init__(state["dsk"], state["keys"])  # type: ignore[misc]

    def _shared_value(self, key: Any) -> Any:
        with self._locks[key]:
            if key not in self._values:
                node = self.dsk[key]
                deps = {d: (self._shared_value(d) if d in self.shared else self.dsk[d]({}))
                        for d in node.dependencies}
                self._values[key] = node(deps)
            return self._values[key]

    def read(self, i: int) -> Any:
        """Compute block ``i`` (in the calling thread)."""
        from dask._task_spec import DataNode, execute_graph

        key, need = self.keys[i], self.needs[i]
        try:
            if key in self.shared:
                return self._shared_value(key)
            graph = {k: (DataNode(k, self._shared_value(k)) if k in self.shared else self.dsk[k])
                     for k in need}
            return execute_graph(graph, keys={key})[key]
        finally:
            with self._guard:  # shared results no later block needs are dropped
                for k in need & self.shared:
                    self._left[k] -= 1
                    if self._left[k] == 0:
                        self._values.pop(k, None)
