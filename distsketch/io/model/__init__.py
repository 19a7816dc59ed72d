"""Model stores: save and load (no pickle, no import of names read from a
file) and the checks of a loaded model.
"""

# the package keeps the names of the module it replaced (distsketch.io.model)
from distsketch.io.model.store import (
    FORMAT_VERSION,
    load,
    save_model,
)

__all__ = [
    "FORMAT_VERSION",
    "load",
    "save_model",
]
