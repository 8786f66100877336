"""Byte sizes of mpi4py buffer specifications, without copying data.

mpi4py accepts a buffer alone (anything exposing the buffer protocol), or
a list/tuple: ``[data, datatype]``, ``[data, count, datatype]``,
``[data, (count, displ), datatype]``, and for the v/w collectives
``[data, counts]``, ``[data, (counts, displs), datatype]``,
``[data, counts, displs, datatype]`` or ``[data, (counts, displs), datatypes]``.
Datatypes may be given as ``MPI.Datatype`` objects or typecode strings.
"""
from __future__ import annotations

from mpi4py import MPI

_typedict = MPI._typedict
_SPECIAL = (None, MPI.IN_PLACE, MPI.BOTTOM)


def _dtsize(dt) -> int:
    if isinstance(dt, str):
        dt = _typedict[dt]
    return dt.Get_size()


def _raw(data) -> int:
    try:
        return data.nbytes
    except AttributeError:
        pass
    if data in _SPECIAL:
        return 0
    return memoryview(data).nbytes


def noncontiguous(spec) -> bool:
    """Whether a buffer spec names a derived datatype with holes (subarray,
    vector...): MPI packs and unpacks such data, at memory speed, on top of
    moving it.  mpi4py-fft's Alltoallw redistributions are all like that."""
    if not isinstance(spec, (list, tuple)) or len(spec) < 2:
        return False
    dts = spec[-1]
    for dt in (dts if isinstance(dts, (list, tuple)) else (dts,)):
        if isinstance(dt, MPI.Datatype) and not dt.is_predefined and \
                dt.Get_true_extent()[1] != dt.Get_size():
            return True
    return False


def nbytes(spec) -> int:
    """Total bytes described by a buffer spec (0 for None/IN_PLACE/BOTTOM)."""
    try:
        return spec.nbytes           # numpy arrays, memoryviews: the fast path
    except AttributeError:
        pass
    if spec is None or spec is MPI.IN_PLACE or spec is MPI.BOTTOM:
        return 0
    if isinstance(spec, (list, tuple)):
        counts = per_peer(spec)
        if counts is not None:
            return sum(counts)
        data = spec[0]
        if len(spec) == 2:
            # [data, datatype]: whole elements of that type in the buffer
            dt = spec[1]
            if isinstance(dt, str):
                dt = _typedict[dt]
            ext = dt.Get_extent()[1]
            return (_raw(data) // ext) * dt.Get_size() if ext else 0
        if len(spec) == 3:
            count = spec[1]
            if isinstance(count, tuple):
                count = count[0]
            return int(count) * _dtsize(spec[2])
        return _raw(data)
    if isinstance(spec, (bytes, bytearray)):
        return len(spec)
    return memoryview(spec).nbytes


# the collectives (stems) whose receive / send buffer holds one block per
# process: there mpi4py reads the count of [data, count, datatype] as the
# count of one block
BLOCKED_RECV = ("alltoall", "allgather", "gather")
BLOCKED_SEND = ("alltoall", "scatter")


def blocked_nbytes(spec, blocks: int) -> int:
    """Bytes of a buffer split into ``blocks`` equal blocks, one per process
    (alltoall's buffers, the gathered and scattered sides): mpi4py reads the
    count of ``[data, count, datatype]`` there as the count of one block."""
    if isinstance(spec, (list, tuple)) and len(spec) == 3 and per_peer(spec) is None:
        return nbytes(spec) * blocks
    return nbytes(spec)


def per_peer(spec, size: int | None = None):
    """Per-peer byte counts of a v/w buffer spec, or None if it has none."""
    if not isinstance(spec, (list, tuple)) or len(spec) < 2:
        return None
    second = spec[1]
    if len(spec) == 2:
        if isinstance(second, (MPI.Datatype, str)):
            return None
        # [data, counts] or [data, (counts, displs)]: datatype from the data
        counts = second[0] if isinstance(second, tuple) and len(second) == 2 \
            and not isinstance(second[0], int) else second
        if isinstance(counts, int):
            return None
        itemsize = getattr(spec[0], "itemsize", 1)
        return [int(c) * itemsize for c in counts]
    if len(spec) == 3:
        counts = second[0] if isinstance(second, tuple) else second
        if isinstance(counts, int) or counts is None:
            return None
        dts = spec[2]
        if isinstance(dts, (list, tuple)):
            return [int(c) * _dtsize(d) for c, d in zip(counts, dts)]
        s = _dtsize(dts)
        return [int(c) * s for c in counts]
    if len(spec) == 4:
        counts, dts = second, spec[3]
        if isinstance(counts, int):
            return None
        if isinstance(dts, (list, tuple)):
            return [int(c) * _dtsize(d) for c, d in zip(counts, dts)]
        s = _dtsize(dts)
        return [int(c) * s for c in counts]
    return None


class PickleCounter:
    """Counts the bytes mpi4py pickles and unpickles for lower-case methods.

    Installed as ``MPI.pickle``'s dumps/loads: same functions, same protocol,
    so what the application sends is byte-identical.
    """

    def __init__(self):
        import pickle
        self.dumped = 0
        self.loaded = 0
        self.first = -1          # size of the first pickle since reset (-1: none)
        self._dumps = pickle.dumps
        self._loads = pickle.loads

    def dumps(self, obj, protocol=None, **kw):
        data = self._dumps(obj, protocol, **kw)
        if self.first < 0:
            self.first = len(data)
        self.dumped += len(data)
        return data

    def loads(self, data, **kw):
        self.loaded += memoryview(data).nbytes
        return self._loads(data, **kw)

    def install(self):
        p = MPI.pickle
        protocol, threshold = p.PROTOCOL, p.THRESHOLD
        p.__init__(self.dumps, self.loads, protocol, threshold)

    def take(self):
        """(dumped, loaded) bytes since the previous take."""
        taken = self.dumped, self.loaded
        self.dumped = self.loaded = 0
        return taken
