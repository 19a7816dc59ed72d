"""Former home of the Zarr array functions, kept as an import path.

The functions live in :mod:`distsketch.io.arrays`, :mod:`distsketch.io.codecs`,
:mod:`distsketch.io.manifest` and :mod:`distsketch.io.fingerprints`; import
them from :mod:`distsketch.io`.
"""

from distsketch.io.arrays import ZarrRowReader, create_array, open_array, open_zarr, write_array
from distsketch.io.fingerprints import fingerprint
from distsketch.io.manifest import MANIFEST_NAME, read_manifest, write_manifest

__all__ = [
    "MANIFEST_NAME",
    "ZarrRowReader",
    "create_array",
    "fingerprint",
    "open_array",
    "open_zarr",
    "read_manifest",
    "write_array",
    "write_manifest",
]
