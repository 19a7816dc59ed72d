"""Zarr and file I/O: the only package that opens paths.

Sub-packages by concept (each ``__init__`` says what it holds): ``storage``
(where data lives), ``commit`` (how an output becomes visible), ``arrays``
(row-aligned arrays), ``model`` (model stores) and ``readers`` (file formats
and ``ingest``).  Array checks live in :mod:`distsketch.validation`, which
imports nothing from here.  The flat module paths of earlier releases
(``distsketch.io.urls``, ...) still import, as aliases of the modules below.
"""


from distsketch.io.arrays.access import create_array, open_array, write_array
from distsketch.io.arrays.fingerprints import fingerprint
from distsketch.io.commit.atomic import atomic_dir
from distsketch.io.commit.kinds import FsspecLocation, LocalLocation  # registers the kinds
from distsketch.io.commit.manifest import read_manifest, write_manifest
from distsketch.io.commit.publish import atomic_output
from distsketch.io.model.store import load, save_model
from distsketch.io.readers import ingest
from distsketch.io.readers.growing import append
from distsketch.io.storage.urls import is_url, resolve
from distsketch.module_aliases import install

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

install("distsketch.io", {
    "location": "storage.location",
    "urls": "storage.urls",
    "storage_kinds": "commit.kinds",
    "stores": "arrays.stores",
    "safety": "storage.safety",
    "locks": "storage.locks",
    "claims": "storage.claims",
    "codecs": "storage.codecs",
    "layout": "commit.layout",
    "atomic": "commit.atomic",
    "publish": "commit.publish",
    "manifest": "commit.manifest",
    "digests": "commit.digests",
    "jsonable": "commit.jsonable",
    "writes": "arrays.writes",
    "small_chunks": "arrays.small_chunks",
    "sparse_strips": "arrays.sparse_strips",
    "targets": "arrays.targets",
    "class_codes": "arrays.class_codes",
    "appending": "arrays.appending",
    "growing": "readers.growing",
    "fingerprints": "arrays.fingerprints",
    "model_checks": "model.checks",
})
