"""Sampling techniques on the Gram matrix: sparsification and quantization,
sparsified kernel PCA and randomized rounding of expansions.
"""
