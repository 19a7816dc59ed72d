"""Kernel linear systems with sketch preconditioners: the preconditioned
solver, Falkon (Nystrom kernel ridge) and MEKA kernel ridge.
"""
