"""The one progress line of file ingestion."""

from __future__ import annotations

import sys
import time

__all__ = ["Progress"]


class Progress:
    """Progress line on stderr, at most twice a second."""

    def __init__(self, label: str, total: int, unit: str, enabled: bool):
        self.label = label
        self.total = max(1, int(total))
        self.unit = unit
        self.enabled = enabled
        self._last = 0.0
        self._t0 = time.perf_counter()

    def update(self, done: int, rows: int) -> None:
        if not self.enabled:
            return
        now = time.perf_counter()
        if now - self._last < 0.5:
            return
        self._last = now
        frac = min(1.0, done / self.total)
        sys.stderr.write(f"\r{self.label}: {100 * frac:5.1f}% of {self.unit}, {rows} rows, "
                         f"{now - self._t0:.1f} s")
        sys.stderr.flush()

    def close(self, rows: int) -> None:
        if self.enabled:
            sys.stderr.write(f"\r{self.label}: done, {rows} rows in "
                             f"{time.perf_counter() - self._t0:.1f} s{' ' * 20}\n")
            sys.stderr.flush()
