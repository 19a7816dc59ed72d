"""Preconditioned conjugate gradient for symmetric positive definite systems.

The operator and the preconditioner are callables on ``(n, t)`` blocks of
right-hand sides, so a caller can evaluate ``A @ V`` any way it likes (kernel
tiles on a cluster, a low-rank factor, a dense matrix).  The ``t`` columns are
independent CG runs advanced together: one operator call per iteration serves
all of them, which matters when one call is a pass over a large data set.
The iterates live in the namespace of the right-hand side (NumPy, or CuPy on a
GPU); only the residual history comes back to the host.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from distsketch.errors import ConfigError, InputError
from distsketch.ops.namespace import asarray, copy_array, namespace, to_host

__all__ = ["CGResult", "cg_iteration_bound", "pcg"]

logger = logging.getLogger("distsketch")

Operator = Callable[[np.ndarray], np.ndarray]


@dataclass
class CGResult:
    """Outcome of :func:`pcg`.

    Attributes
    ----------
    x : ndarray of shape (n, t)
        The approximate solution.
    n_iter : int
        Operator applications used (iterations).
    residuals : ndarray of shape (n_iter + 1,)
        Largest relative residual ``‖b − A x‖ / ‖b‖`` over the columns, per
        iteration (entry 0 is the starting point).
    converged : bool
        True when every column reached ``tol``.
    """

    x: np.ndarray
    n_iter: int
    residuals: np.ndarray
    converged: bool
    column_residuals: np.ndarray = field(default_factory=lambda: np.empty(0))


def _as_matrix(b: Any, like: Any) -> tuple[Any, bool]:
    b = asarray(b, like=like, dtype=namespace(like).float64)
    if b.ndim == 1:
        return b[:, None], True
    if b.ndim != 2:
        raise InputError(f"pcg: right-hand side must be 1-D or 2-D, got shape {b.shape}.")
    return b, False


def _col_dot(xp: Any, A: Any, B: Any) -> Any:
    return np.einsum("ij,ij->j", A, B) if xp is np else xp.sum(A * B, axis=0)


def _col_norm(xp: Any, A: Any) -> Any:
    return np.linalg.norm(A, axis=0) if xp is np else xp.linalg.vector_norm(A, axis=0)


def _max(xp: Any, v: Any) -> float:
    """Largest entry of a 1-D array as a float (0 when empty)."""
    if xp is np:
        return float(v.max(initial=0.0))
    return float(xp.max(v)) if v.shape[0] else 0.0


def pcg(
    matvec: Operator,
    b: np.ndarray,
    *,
    precond: Operator | None = None,
    x0: np.ndarray | None = None,
    tol: float = 1e-6,
    max_iter: int = 1000,
    verbose: int = 0,
    label: str = "pcg",
) -> CGResult:
    """Solve ``A x = b`` for SPD ``A`` by (preconditioned) conjugate gradient.

    Parameters
    ----------
    matvec : callable
        ``matvec(V)`` returns ``A @ V`` for V of shape (n, t).
    b : ndarray of shape (n,) or (n, t)
        Right-hand side(s); columns are solved simultaneously.
    precond : callable, optional
        ``precond(R)`` returns ``M⁻¹ R`` for an SPD preconditioner M ≈ A.
    x0 : ndarray of shape like ``b``, optional
        Starting point (default zero).
    tol : float, default 1e-6
        Stop when ``‖b − A x‖ ≤ tol · ‖b‖`` for every column.
    max_iter : int, default 1000
        Maximum number of operator applications.
    verbose : int, default 0
        Progress goes to the ``"distsketch"`` logger: 0 logs the start and
        end at DEBUG level and every iteration at DEBUG; 1 logs the start,
        every 10th iteration and the end at INFO; 2 or more logs every
        iteration at INFO.
    label : str, default "pcg"
        Prefix of the log lines and error messages (the caller's name).

    Returns
    -------
    CGResult
        Solution with the shape of ``b``, iteration count and residual history.

    Notes
    -----
    Memory: five ``n × t`` float64 blocks.  Each iteration costs one ``matvec``
    and one ``precond`` call plus O(n t) vector work.  Residuals are the
    recurrence residuals (exact in exact arithmetic); the loop does not
    recompute ``b − A x`` so no extra operator call is spent.

    References
    ----------
    Hestenes, Stiefel. Methods of conjugate gradients for solving linear
    systems. J. Res. NBS 1952.  Shewchuk. An introduction to the conjugate
    gradient method without the agonizing pain. 1994.
    """
    if not (tol > 0):
        raise ConfigError(f"pcg: tol must be > 0, got {tol}.")
    if int(max_iter) < 0:
        raise ConfigError(f"pcg: max_iter must be >= 0, got {max_iter}.")
    xp = namespace(b)
    B, vector = _as_matrix(b, b)
    if not bool(xp.all(xp.isfinite(B))):
        raise InputError("pcg: right-hand side contains NaN or Inf; clean the targets.")
    bnorm = _col_norm(xp, B)
    scale = xp.where(bnorm > 0, bnorm, 1.0)
    if x0 is None:
        X = xp.zeros_like(B)
        R = copy_array(B)
    else:
        X = copy_array(_as_matrix(x0, B)[0])
        if X.shape != B.shape:
            raise InputError(f"pcg: x0 has shape {X.shape}, expected {B.shape}.")
        R = B - matvec(X)
    rel = _col_norm(xp, R) / scale
    history = [_max(xp, rel)]
    col_hist = [to_host(copy_array(rel))]
    active = rel > tol
    level = logging.INFO if int(verbose) > 0 else logging.DEBUG
    every = 1 if int(verbose) != 1 else 10
    logger.log(level, "%s: n=%d, %d right-hand side(s), tol=%.3g, max_iter=%d, "
               "preconditioner=%s, start residual %.3e", label, B.shape[0], B.shape[1], tol,
               int(max_iter), "yes" if precond is not None else "none", history[0])
    Zp = precond(R) if precond is not None else R
    P = copy_array(Zp)
    rz = _col_dot(xp, R, Zp)
    op_scale = 0.0
    it = 0
    while it < int(max_iter) and bool(xp.any(active)):
        AP = asarray(matvec(P), like=B, dtype=xp.float64)
        pap = _col_dot(xp, P, AP)
        pp = _col_dot(xp, P, P)
        rayleigh = pap / xp.where(pp > 0, pp, 1.0)
        op_scale = max(op_scale, _max(xp, xp.where(active, xp.abs(rayleigh), 0.0)))
        if bool(xp.any(active & (pap <= 0))):
            worst = float(xp.min(xp.where(active, rayleigh, float("inf"))))
            relative = worst / op_scale if op_scale > 0 else float("-inf")
            raise ConfigError(
                f"{label}: the operator is not positive definite: at iteration {it + 1} a search "
                f"direction p has pᵀAp/‖p‖² = {worst:.3g}, i.e. {relative:.3g} relative to the "
                f"operator's scale (largest |pᵀAp|/‖p‖² seen: {op_scale:.3g}), so it has an "
                "eigenvalue at or below that value. Use a positive semi-definite "
                "approximation or a regularisation alpha larger than that."
            )
        # frozen columns (already converged) take a zero step
        step = xp.where(active, rz / xp.where(pap > 0, pap, 1.0), 0.0)
        X += P * step
        R -= AP * step
        it += 1
        rel = _col_norm(xp, R) / scale
        history.append(_max(xp, rel))
        col_hist.append(to_host(copy_array(rel)))
        active = active & (rel > tol)
        if it % every == 0 or int(verbose) == 0:
            logger.log(level, "%s: iteration %d, relative residual %.3e", label, it, history[-1])
        if not bool(xp.any(active)):
            break
        Zp = precond(R) if precond is not None else R
        rz_new = _col_dot(xp, R, Zp)
        beta = xp.where(active, rz_new / xp.where(rz != 0, rz, 1.0), 0.0)
        P = Zp + P * beta
        rz = rz_new
    logger.log(level, "%s: %s after %d iteration(s), relative residual %.3e (tol %.3g)", label,
               "converged" if not bool(xp.any(active)) else "stopped without converging", it,
               history[-1], tol)
    x = X[:, 0] if vector else X
    return CGResult(x=x, n_iter=it, residuals=np.asarray(history),
                    converged=bool(not xp.any(active)), column_residuals=np.asarray(col_hist))


def cg_iteration_bound(kappa: float, tol: float) -> int:
    """Iterations after which CG's relative residual is guaranteed below ``tol``.

    From ``‖r_k‖/‖r_0‖ ≤ √κ · 2((√κ − 1)/(√κ + 1))^k`` (energy-norm bound
    converted to the 2-norm), so ``k ≥ ½ √κ · ln(2√κ / tol)`` suffices.

    Parameters
    ----------
    kappa : float
        Condition number (≥ 1) of the (preconditioned) operator.
    tol : float
        Relative residual target.
    """
    kappa = max(float(kappa), 1.0)
    return int(np.ceil(0.5 * np.sqrt(kappa) * np.log(2.0 * np.sqrt(kappa) / tol)))
