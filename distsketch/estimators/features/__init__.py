"""Explicit kernel feature maps: random Fourier features, polynomial sketches
(CountSketch, TensorSketch, SRHT, TensorSRHT, PolySketch), Gaussian and dot-product
kernel sketches, and database-friendly projections.
"""
