"""What the run reports show, independent of their format (Markdown or HTML).

Every function returns plain rows of strings and numbers; the Markdown and
HTML writers escape them for their own syntax.
"""

from __future__ import annotations

import numbers
from typing import Any

import numpy as np

__all__ = ["PLOT_FLOOR", "fit_line", "format_bytes", "peak_rows", "plan_table", "plot_values"]

#: eigenvalues below this fraction of the largest are rounding noise of a float64
#: eigendecomposition (≈ 100 ε): they are left out of the log-scale plot
PLOT_FLOOR = 1e-14

# preferred column order of a block plan; other keys follow in the order they appear
_PLAN_ORDER = ("stage", "name", "block_rows", "rows_per_block", "n_blocks", "tasks", "task_bytes",
               "projected_task_bytes", "budget", "limit", "threads", "fan_in", "depth",
               "merge_bytes", "source")
_PLAN_LABELS = {"block_rows": "rows per block", "rows_per_block": "rows per block",
                "n_blocks": "blocks", "task_bytes": "memory per task",
                "projected_task_bytes": "memory per task", "budget": "budget per task",
                "limit": "set by", "merge_bytes": "memory per merge", "fan_in": "fan-in",
                "count": "times applied"}
_MAX_PLANS = 50


def format_bytes(n: float) -> str:
    """``1536 -> '1.50 KiB'`` (the package's one size format)."""
    from distsketch.diagnostics import format_bytes as _fmt

    return _fmt(float(n))


def _number(v: Any) -> bool:
    return isinstance(v, numbers.Real) and not isinstance(v, bool)


def plot_values(values: np.ndarray, limit: int = 200) -> tuple[np.ndarray, np.ndarray, int]:
    """``(index, shown, dropped)``: the 1-based positions and values among the first ``limit``
    (descending) eigenvalues that a log-scale plot can show (positive, finite, above
    ``PLOT_FLOOR`` × the largest), and how many were left out (clipping them instead
    stretched the axis to 1e-314)."""
    v = np.asarray(values, dtype=np.float64)[:limit]
    ok = np.isfinite(v) & (v > 0)
    if ok.any():
        ok &= v >= PLOT_FLOOR * v[ok].max()
    index = np.flatnonzero(ok) + 1
    return index, v[ok], int(v.size - index.size)


def peak_rows(info: dict[str, Any]) -> list[tuple[str, int]]:
    """``(what, bytes)`` for every peak-memory measurement the run recorded (the client's, a
    ``peak_memory`` mapping and top-level ``*peak*_bytes`` keys)."""
    rows: list[tuple[str, int]] = []
    if _number(info.get("peak_memory_bytes")):
        rows.append(("client process tree", int(info["peak_memory_bytes"])))
    nested = info.get("peak_memory")
    found = list(nested.items()) if isinstance(nested, dict) else []
    found += [(k, v) for k, v in info.items()
              if k != "peak_memory_bytes" and "peak" in k and k.endswith("_bytes")]
    for key, value in found:
        if _number(value):
            label = str(key).removesuffix("_bytes").replace("_", " ").strip()
            rows.append((label, int(value)))
    return rows


def _plan_cell(key: str, value: Any) -> str:
    if value is None:
        return ""
    if _number(value) and ("bytes" in key or key == "budget"):
        return format_bytes(value)
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def plan_table(info: dict[str, Any]) -> tuple[list[str], list[list[str]], int]:
    """The runner's ``info["block_plans"]`` as a table: headers (empty without plans), rows, and
    the count of plans not shown."""
    plans = [p for p in (info.get("block_plans") or []) if isinstance(p, dict)]
    if not plans:
        return [], [], 0
    keys: list[str] = [k for k in _PLAN_ORDER if any(k in p for p in plans)]
    for p in plans:
        keys += [str(k) for k in p if str(k) not in keys]
    headers = [_PLAN_LABELS.get(k, k.replace("_", " ")) for k in keys]
    rows = [[_plan_cell(k, p.get(k)) for k in keys] for p in plans[:_MAX_PLANS]]
    return headers, rows, max(0, len(plans) - _MAX_PLANS)


def fit_line(fit: dict[str, Any]) -> str:
    """One sentence for the fit metric of a supervised run (unescaped)."""
    if not fit.get("available"):
        return f"not computed: {fit.get('reason', 'unknown')}"
    name = {"accuracy": "accuracy", "r2": "R²"}.get(str(fit.get("metric")), str(fit.get("metric")))
    if fit.get("on") == "held-out rows":
        text = (f"held-out {name}: {fit['value']:.4f} on {fit['rows']} rows (a fraction "
                f"{fit.get('holdout')} of the rows, left out of the fit)")
    else:
        text = (f"training {name}: {fit['value']:.4f} on {fit['rows']} rows (the rows the model "
                "was fitted on: an optimistic estimate of the fit on new data)")
    if fit.get("metric") == "accuracy" and fit.get("baseline") is not None:
        text += f"; the most frequent label alone scores {fit['baseline']:.4f}"
    if fit.get("warning"):
        text += f". WARNING: {fit['warning']}"
    return text
