"""An emulated cluster target on one machine: nodes as network namespaces
joined by rate-limited links (:mod:`emulate.cluster`), and a launcher that
places MPI ranks on them over TCP (:mod:`emulate.launch`).  It lets the
method be validated where the target is not the host."""
from .cluster import Cluster, EmulateError, down, load, up
from .launch import command, placement

__all__ = ["Cluster", "EmulateError", "up", "down", "load", "command", "placement"]
