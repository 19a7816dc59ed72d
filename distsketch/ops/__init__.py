"""Pure NumPy/SciPy per-block kernels: no Dask in this package."""
