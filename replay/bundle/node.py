"""What a node is: its architecture, CPU, cores, software, and a short
speed probe, written into both archives so that a porting study's report
can say where the log was recorded and where it was replayed."""
from __future__ import annotations

import os
import platform
import socket
import sys
import time


def cpu_model() -> str:
    """The CPU's model name as the kernel reports it ('' where unknown)."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.split(":")[0].strip() in ("model name", "Model", "cpu model"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


def mpi_library() -> dict:
    """The MPI library mpi4py is built against, read without initialising
    MPI (the vendor decides the ABI that the PMPI shim compiles for)."""
    from mpi4py import MPI
    vendor, version = MPI.get_vendor()
    return {"vendor": vendor, "version": ".".join(map(str, version)),
            "library": MPI.Get_library_version().strip().splitlines()[0]}


def speed_probe(repeat: int = 5) -> float:
    """Seconds of a fixed interpreter-bound kernel, the median of
    ``repeat``: host and target nodes compared on the same work (a hint
    for the reader; the replay itself measures the application)."""
    def kernel():
        s = 0
        for i in range(300_000):
            s += i * i % 7
        return s
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        kernel()
        times.append(time.perf_counter() - t)
    return sorted(times)[len(times) // 2]


def describe(probe: bool = True) -> dict:
    """This node's facts (JSON-ready)."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:                      # not Linux
        cores = os.cpu_count() or 1
    out = {"hostname": socket.gethostname(), "machine": platform.machine(),
           "byteorder": sys.byteorder, "cpu": cpu_model(), "cores": cores,
           "python": platform.python_version(),
           # another build of the same version runs Python code at another speed
           "python_build": f"{sys.executable}: {platform.python_compiler()}, "
                           f"{' '.join(platform.python_build())}",
           "mpi": mpi_library()}
    if probe:
        out["speed_probe_s"] = speed_probe()
    return out
