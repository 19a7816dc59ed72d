"""Where data lives: paths and URLs, the storage kinds behind ``Location``,
Zarr stores, codecs, recorded layouts, writer locks and claims, and the link
checks of untrusted stores.
"""
