"""Zarr and file I/O, one module per responsibility.

========================= ==================================================
module                    holds
========================= ==================================================
``io.urls``               the one place paths and URLs are understood:
                          ``resolve(path, storage_options)`` -> Location
``io.location``           ``Location``: the storage protocol (base class)
``io.storage_kinds``      its subclasses, one per storage kind
``io.stores``             Zarr stores (local or fsspec) and opening arrays
``io.arrays``             open a Zarr path/array as a validated dask array
``io.writes``             create and write row-aligned arrays, committed
``io.codecs``             chunk codecs by name
``io.atomic``             temporary-sibling-then-rename outputs (local)
``io.publish``            ``atomic_output``: committed outputs anywhere
                          (rename locally, manifest last on object stores)
``io.manifest``           the completion manifest
``io.fingerprints``       the one input fingerprint (whole input or prefix)
``io.model``              model save/load
``io.appending``          rows appended to an ingested store, atomically
``io.growing``            :func:`append`: rows from arrays or files (the
                          ingest readers) into an ingested store
``io.layout``             each array's recorded layout, checked on open
``io.readers``            file formats behind one reader interface, a
                          registry, one Zarr sink and :func:`ingest`
========================= ==================================================

Only this package opens paths; array checks live in
:mod:`distsketch.validation`, which imports nothing from here.
"""

from distsketch.io.arrays import create_array, open_array, write_array
from distsketch.io.atomic import atomic_dir
from distsketch.io.fingerprints import fingerprint
from distsketch.io.growing import append
from distsketch.io.manifest import read_manifest, write_manifest
from distsketch.io.model import load, save_model
from distsketch.io.publish import atomic_output
from distsketch.io.readers import ingest
from distsketch.io.storage_kinds import FsspecLocation, LocalLocation  # registers the kinds
from distsketch.io.urls import is_url, resolve

__all__ = [
    "FsspecLocation",
    "LocalLocation",
    "append",
    "atomic_dir",
    "atomic_output",
    "create_array",
    "fingerprint",
    "ingest",
    "is_url",
    "load",
    "open_array",
    "read_manifest",
    "resolve",
    "save_model",
    "write_array",
    "write_manifest",
]

