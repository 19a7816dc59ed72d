"""Where the engine's blocks go: nowhere (NumPy, :class:`HostStage`) or the GPU (:class:`CudaStage`).

A reduction moves blocks to the device (:meth:`HostStage.host`, :meth:`HostStage.to_device`);
a writer moves them back (:meth:`HostStage.settle`, :meth:`HostStage.to_host`,
:meth:`HostStage.landed`).

:class:`CudaStage` is the only CUDA code of the engine and has not run on a GPU yet.
"""

from __future__ import annotations

import contextlib
from typing import Any

import numpy as np

from distsketch.ops.namespace import host_tree

__all__ = ["CudaStage", "HostStage", "stage_for"]


class HostStage:
    """NumPy as the device: blocks stay where the reader put them."""

    def host(self, block: Any, slot: int) -> Any:
        """The block as the reader hands it over (reader thread)."""
        return block

    def to_device(self, block: Any, slot: int) -> Any:
        """The block on the device (consumer thread)."""
        return block

    def done(self, slot: int) -> None:
        """``chunk`` of the block in ``slot`` was issued."""

    def stream(self) -> Any:
        """Context in which ``chunk`` and ``merge`` run."""
        return contextlib.nullcontext()

    def finish(self, state: Any) -> Any:
        """The merged state on the host."""
        return state

    def settle(self, block: Any) -> Any:
        """A block a writer's reader computed, its device work finished (reader thread)."""
        return block

    def to_host(self, block: Any, slot: int) -> Any:
        """Start moving a block to the host buffer of ``slot`` (engine thread)."""
        return block

    def landed(self, slot: int) -> None:
        """Wait until the block of ``slot`` is on the host (writer thread)."""


class CudaStage(HostStage):
    """CuPy as the device: pinned host ring, a copy stream and a compute stream.

    Not yet run on a GPU (see the module docstring).  Slot ``s`` holds one
    pinned host buffer and one device buffer; the reader of a block waits
    for the previous copy out of its pinned buffer, the copy into a device
    buffer waits for the previous compute on it.  A writer copies each device
    block into a pinned buffer of its slot on the copy stream (asynchronously,
    an event recorded), and its writer thread waits for that event.
    """

    def __init__(self, ring: int):
        import cupy

        self.cp = cupy
        self.copy_stream = cupy.cuda.Stream(non_blocking=True)
        self.compute_stream = cupy.cuda.Stream(non_blocking=True)
        self.pinned: list[Any] = [None] * ring  # (pinned memory, its bytes)
        self.device: list[Any] = [None] * ring
        self.copied: list[Any] = [None] * ring  # event: copy out of the pinned buffer done
        self.used: list[Any] = [None] * ring  # event: compute on the device buffer done
        self.out: list[Any] = [None] * ring  # writers: (pinned memory, its bytes)
        self.back: list[Any] = [None] * ring  # writers: (copy-to-host event, device block)

    def host(self, block: Any, slot: int) -> Any:
        if not isinstance(block, np.ndarray):
            return self.settle(block)
        block = np.ascontiguousarray(block)
        if self.copied[slot] is not None:
            self.copied[slot].synchronize()
        if self.pinned[slot] is None or self.pinned[slot][1] < block.nbytes:
            self.pinned[slot] = (self.cp.cuda.alloc_pinned_memory(max(1, block.nbytes)),
                                 block.nbytes)
        mem = self.pinned[slot][0]
        staged = np.frombuffer(mem, block.dtype, block.size).reshape(block.shape)
        np.copyto(staged, block)
        return staged

    def to_device(self, block: Any, slot: int) -> Any:
        if not isinstance(block, np.ndarray):
            return block
        buf = self.device[slot]
        if buf is None or buf.nbytes < block.nbytes:
            with self.compute_stream:
                buf = self.device[slot] = self.cp.empty(max(1, block.nbytes), dtype=np.uint8)
        dev = buf[:block.nbytes].view(block.dtype).reshape(block.shape)
        if self.used[slot] is not None:
            self.copy_stream.wait_event(self.used[slot])
        dev.set(block, stream=self.copy_stream)
        self.copied[slot] = self.copy_stream.record()
        self.compute_stream.wait_event(self.copied[slot])
        return dev

    def done(self, slot: int) -> None:
        self.used[slot] = self.compute_stream.record()

    def stream(self) -> Any:
        return self.compute_stream

    def finish(self, state: Any) -> Any:
        self.compute_stream.synchronize()
        return host_tree(state)  # the one copy of the state to the host

    def settle(self, block: Any) -> Any:
        if not isinstance(block, np.ndarray):
            # made by the graph's task on this thread's stream, which the non-blocking
            # streams do not wait for: finish it here
            self.cp.cuda.get_current_stream().synchronize()
        return block

    def to_host(self, block: Any, slot: int) -> Any:
        if isinstance(block, np.ndarray):
            return block
        # a slot's buffer is refilled only after the write of its last block finished
        if self.out[slot] is None or self.out[slot][1] < block.nbytes:
            self.out[slot] = (self.cp.cuda.alloc_pinned_memory(max(1, block.nbytes)),
                              block.nbytes)
        host = np.frombuffer(self.out[slot][0], block.dtype, block.size).reshape(block.shape)
        block.get(stream=self.copy_stream, out=host, blocking=False)
        self.back[slot] = (self.copy_stream.record(), block)  # the block lives until copied
        return host

    def landed(self, slot: int) -> None:
        entry, self.back[slot] = self.back[slot], None
        if entry is not None:
            entry[0].synchronize()


def stage_for(gpu: bool, ring: int) -> HostStage:
    """The stage of an engine computing on the GPU (``gpu``) or with NumPy, ``ring`` slots."""
    return CudaStage(ring) if gpu else HostStage()
