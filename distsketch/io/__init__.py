"""Zarr and file I/O: open, ingest, atomic writes, model save/load, manifests."""

from distsketch.io.atomic import atomic_dir
from distsketch.io.model import load, save_model
from distsketch.io.zarr_io import (
    create_array,
    fingerprint,
    open_array,
    read_manifest,
    write_array,
    write_manifest,
)

__all__ = [
    "atomic_dir",
    "create_array",
    "fingerprint",
    "ingest",
    "load",
    "open_array",
    "read_manifest",
    "save_model",
    "write_array",
    "write_manifest",
]


def ingest(*args, **kwargs):
    """Stream a file (.npy, CSV, svmlight/libsvm, MNIST idx) into Zarr.

    See :func:`distsketch.io.readers.ingest` for parameters.
    """
    from distsketch.io.readers import ingest as _ingest

    return _ingest(*args, **kwargs)
