"""Keep the allocator from perturbing computation times.

Large NumPy temporaries (MBs) are freed and re-allocated every iteration.
glibc returns freed memory at the top of the heap to the kernel once more
than a threshold is free; whether that happens can flip with any small
allocation made in between, such as the tracer's.  Measured on the uneven
example: every other iteration then page-faults 15 MB back in and its
computation takes twice the CPU time, under the tracer only.  A 64 MiB top
pad (M_TOP_PAD) makes the heap keep that slack: no trimming churn, the
same steady state as the untraced run.  The tracer and the recorder set
it; it changes no result of the application.  The replay does not: it
measures the computation on the target as the application's own
allocator behaviour makes it, page faults included (heat's KMeans.fit
ran 1.1 s for real and replayed in 0.55-0.7 s with the pad, 0.75-1.1 s
without; tests/apps/heap_trim.py).
"""
from __future__ import annotations

import ctypes
import ctypes.util

M_TOP_PAD = -2
TOP_PAD_BYTES = 64 << 20


def steady_malloc() -> bool:
    """Set glibc's M_TOP_PAD; False where the C library is not glibc."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        return bool(libc.mallopt(M_TOP_PAD, TOP_PAD_BYTES))
    except (OSError, AttributeError):
        return False
