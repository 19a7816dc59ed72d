"""Print an OpenBLAS kernel this CPU can run that is not the one OpenBLAS picks.

Bitwise assertions hold only where both sides take the same path; one that
compares two memory layouts or two BLAS call shapes passes under one kernel
and fails under another (SkylakeX against Haswell, say).  CI reruns the tests
with ``OPENBLAS_CORETYPE`` set to the name printed here, so such a test fails
in CI and not on a user's machine.  Prints nothing when no second kernel fits.
"""

from __future__ import annotations

import pathlib

import numpy  # noqa: F401  (loads NumPy's OpenBLAS so threadpoolctl sees it)
from threadpoolctl import threadpool_info


def main() -> None:
    try:
        flags = set(pathlib.Path("/proc/cpuinfo").read_text().split())
    except OSError:
        return
    default = {i.get("architecture") for i in threadpool_info() if i["internal_api"] == "openblas"}
    avx512 = {"avx512f", "avx512dq", "avx512bw", "avx512vl"} <= flags
    if default & {"SkylakeX", "Cooperlake", "SapphireRapids"}:
        print("Haswell")  # an AVX-512 kernel by default: the AVX2 one differs most
    elif avx512:
        print("SkylakeX")
    elif {"avx2", "fma"} <= flags and "Haswell" not in default:
        print("Haswell")
    elif "avx" in flags and "Sandybridge" not in default:
        print("Sandybridge")

if __name__ == "__main__":
    main()
