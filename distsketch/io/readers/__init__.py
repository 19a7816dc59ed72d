"""Streaming files into row-chunked Zarr stores, one module per format.

========== ================================= ==========================================
format     recognised by                     how it is read
========== ================================= ==========================================
npy        ``*.npy``; ``\\x93NUMPY`` magic    ``np.load(mmap_mode="r")``; ``.npy.gz``
                                             by parsing the header then row blocks
csv        ``*.csv``, ``*.tsv``, ``*.txt``   ``chunk_rows`` lines at a time
svmlight   ``*.svm``, ``*.svmlight``,        two streaming passes (size, then rows),
           ``*.libsvm``                      ``chunk_rows`` lines at a time
idx        ``*-ubyte``, ``*.idx``,           MNIST idx: header, then record blocks
           ``*.idx3``/``*.idx1``...; magic
========== ================================= ==========================================

``.gz`` works for every one of them.  Each format is a
:class:`~distsketch.io.readers.base.Reader` found by the registry; :func:`ingest`
casts, checks and writes for all of them (docs/architecture.md, "Adding a reader").

``distsketch.open_array("dest.zarr")`` picks ``X``; ``"dest.zarr::y"`` names
the labels.
"""

from distsketch.io.readers.base import Block, Header, Reader, ReadOptions, Stream
from distsketch.io.readers.ingest import ingest
from distsketch.io.readers.registry import (
    find_reader,
    formats,
    infer_format,
    register_reader,
    unregister_reader,
)

__all__ = [
    "FORMATS",
    "Block",
    "Header",
    "ReadOptions",
    "Reader",
    "Stream",
    "find_reader",
    "formats",
    "infer_format",
    "ingest",
    "register_reader",
    "unregister_reader",
]

# the built-in formats; formats() also lists those registered later
FORMATS = formats()
