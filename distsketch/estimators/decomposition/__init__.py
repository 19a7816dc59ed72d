"""Kernel PCA: Frequent Directions, streaming kernel PCA (RNCA) and k-Space kernel
PCA with its principal-component regression and classifier.
"""
