"""Zarr and file I/O, one module per responsibility.

========================= ==================================================
module                    holds
========================= ==================================================
``io.arrays``             open a Zarr path/array as a validated dask array;
                          create and write row-aligned arrays atomically
``io.codecs``             chunk codecs by name
``io.atomic``             temporary-sibling-then-rename outputs
``io.manifest``           the completion manifest
``io.fingerprints``       the one input fingerprint (whole input or prefix)
``io.model``              model save/load
``io.readers``            file formats behind one reader interface, a
                          registry, one Zarr sink and :func:`ingest`
========================= ==================================================

Only this package opens paths; array checks live in
:mod:`distsketch.validation`, which imports nothing from here.
"""

from distsketch.io.arrays import create_array, open_array, write_array
from distsketch.io.atomic import atomic_dir
from distsketch.io.fingerprints import fingerprint
from distsketch.io.manifest import read_manifest, write_manifest
from distsketch.io.model import load, save_model
from distsketch.io.readers import ingest

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

