"""The eigen-spectrum plot: a PNG with matplotlib (optional), an inline SVG without it."""

from __future__ import annotations

import html
import io
import math

import numpy as np

from distsketch.workflow.report_data import plot_values

__all__ = ["NO_MATPLOTLIB", "spectrum_png", "spectrum_svg"]

#: why a report has no PNG when matplotlib is missing
NO_MATPLOTLIB = ("matplotlib is not installed (it is optional: pip install distsketch[plot]); "
                 "report.html draws the spectrum without it")


def _dropped_note(dropped: int) -> str:
    return (f"{dropped} value(s) not shown: zero, negative or below 1e-14 × the largest"
            if dropped else "")


def spectrum_png(values: np.ndarray) -> tuple[bytes | None, str]:
    """The spectrum as PNG bytes (the values :func:`plot_values` keeps), or None and the reason."""
    index, shown, dropped = plot_values(values)
    if shown.size == 0:
        return None, "no positive eigenvalue to draw on a log scale"
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None, NO_MATPLOTLIB
    fig, ax = plt.subplots(figsize=(6, 3.5))
    fig.subplots_adjust(left=0.14, right=0.97, bottom=0.15, top=0.88)
    ax.semilogy(index, shown, marker=".")
    ax.set_xlabel("index")
    ax.set_ylabel("eigenvalue")
    ax.set_title("kernel eigen-spectrum estimate" + (f"\n({_dropped_note(dropped)})"
                                                     if dropped else ""), fontsize=9)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100)
    plt.close(fig)
    return buf.getvalue(), ""


def spectrum_svg(values: np.ndarray, width: int = 600, height: int = 320) -> str:
    """The spectrum as an inline SVG (log-scale y axis, all text escaped), or "" when empty."""
    index, shown, dropped = plot_values(values)
    if shown.size == 0:
        return ""
    left, right, top, bottom = 70, 15, 30, 40
    lo = math.floor(math.log10(shown.min()))
    hi = math.ceil(math.log10(shown.max()))
    if hi == lo:
        hi += 1
    x_max = max(int(index.max()), 2)

    def px(i: float) -> float:
        return left + (i - 1) / (x_max - 1) * (width - left - right)

    def py(v: float) -> float:
        return top + (hi - math.log10(v)) / (hi - lo) * (height - top - bottom)

    parts = [f'<svg width="{width}" height="{height}" '
             f'viewBox="0 0 {width} {height}" role="img" aria-label="eigen-spectrum">',
             f'<rect x="{left}" y="{top}" width="{width - left - right}" '
             f'height="{height - top - bottom}" fill="none" stroke="#888"/>']
    step = max(1, (hi - lo) // 8)
    for e in range(lo, hi + 1, step):
        y = py(10.0**e)
        parts.append(f'<line x1="{left}" y1="{y:.1f}" x2="{width - right}" y2="{y:.1f}" '
                     'stroke="#ddd"/>')
        parts.append(f'<text x="{left - 6}" y="{y + 4:.1f}" font-size="11" '
                     f'text-anchor="end">1e{e}</text>')
    for i in sorted({1, x_max, *np.linspace(1, x_max, 5).round().astype(int).tolist()}):
        parts.append(f'<text x="{px(i):.1f}" y="{height - bottom + 16}" font-size="11" '
                     f'text-anchor="middle">{i}</text>')
    points = " ".join(f"{px(i):.1f},{py(v):.1f}" for i, v in zip(index, shown))
    parts.append(f'<polyline points="{points}" fill="none" stroke="#1f77b4"/>')
    parts += [f'<circle cx="{px(i):.1f}" cy="{py(v):.1f}" r="2" fill="#1f77b4"/>'
              for i, v in zip(index, shown)]
    title = "kernel eigen-spectrum estimate"
    if dropped:
        title += f" ({_dropped_note(dropped)})"
    parts.append(f'<text x="{width / 2:.0f}" y="18" font-size="12" text-anchor="middle">'
                 f"{html.escape(title)}</text>")
    parts.append(f'<text x="{width / 2:.0f}" y="{height - 6}" font-size="11" '
                 'text-anchor="middle">index</text>')
    parts.append(f'<text x="14" y="{height / 2:.0f}" font-size="11" text-anchor="middle" '
                 f'transform="rotate(-90 14 {height / 2:.0f})">eigenvalue</text>')
    parts.append("</svg>")
    return "\n".join(parts)
