"""Row-aligned arrays: opened as validated dask arrays, written, appended to,
their targets and class codes, and their fingerprints.
"""

# the package keeps the names of the module it replaced (distsketch.io.arrays): access's
from distsketch.io.arrays.access import *  # noqa: F403
from distsketch.io.arrays.access import __all__  # noqa: F401
