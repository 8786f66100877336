"""Keep a representative's concurrent copies in step, as the run's ranks are.

``python -m replay --load K`` runs K copies of one representative at once,
each on a core of its own, so that the measured copy shares the node's
caches and memory bandwidth as its rank did.  In the real run the ranks
sharing a node are held together by their communication: after an
all-to-all every rank starts the same transform at the same moment and
they contend for the memory system in the same phase.  Free-running
copies drift apart instead (each one's replayed calls return at once),
and each then computes beside a different mix of the others' phases.  On
the emulated cluster (32 virtual cores, the same real runs and network)
copies held in step measured more computation than free ones: fft2d,
jacobi and cg were predicted 15, 31 and 11 % longer without the
variability model, closer to their real runs on the first two
(bench/tables/virtual_cores_n32.md).

With copies in step, every copy waits at each call that waits for another
rank in the run (blocking collectives, receives, probes and waits) until
all copies still running have reached a call of the same count: a barrier
among the copies, inside the call, so that the wait is no computation
span.  It is a barrier among the copies of one rank, not a replay of the
other ranks: it makes the copies contend as the run's ranks do, phase
against phase, and adds nothing to what they compute.

The barrier is kept by the replay's driver (:class:`Keeper`, a thread
serving a Unix socket); each copy joins it from the path in the
environment (:data:`ENV`) and blocks on the socket, so a waiting copy
burns no CPU.  A copy that ends, or that fails before it joined, no longer
counts; copies that made other calls (a non-deterministic application)
meet at barriers of the same count, not of the same call, and never wait
for ever: a copy not at the barrier is computing or has ended.  Calls made
below Python (the PMPI shim) are not held.
"""
from __future__ import annotations

import os
import selectors
import socket
import tempfile
import threading

ENV = "REPREPLAY_LOCKSTEP"

# the calls' kinds (mpimodel/kinds.py) and ops that wait for another rank
# in the run: where the copies are brought together
WAITING_KINDS = frozenset({"coll", "ocoll", "recv", "sendrecv", "probe", "mprobe"})
WAITING_OPS = frozenset({"wait", "waitall", "waitany", "waitsome", "mrecv"})


class Keeper:
    """The driver's side: the barrier of ``copies`` processes (given to
    :meth:`started` once all are started), served on a Unix socket by a
    thread."""

    def __init__(self, copies: int):
        self.copies = copies
        self._dir = tempfile.mkdtemp(prefix="repreplay-step-")
        self.path = os.path.join(self._dir, "barrier")
        self._server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._server.bind(self.path)
        self._server.listen(copies)
        self._procs: list = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, name="repreplay-lockstep",
                                        daemon=True)
        self._thread.start()

    def started(self, procs: list) -> None:
        """The copies' processes (subprocess.Popen), once all are started."""
        self._procs = list(procs)

    def close(self) -> None:
        self._stop.set()
        self._thread.join()
        self._server.close()
        try:
            os.unlink(self.path)
            os.rmdir(self._dir)
        except OSError:
            pass

    def _serve(self) -> None:
        sel = selectors.DefaultSelector()
        sel.register(self._server, selectors.EVENT_READ)
        joined: set = set()      # the copies' sockets
        waiting: set = set()
        while not self._stop.is_set():
            for key, _ in sel.select(timeout=0.2):
                s: socket.socket = key.fileobj  # type: ignore[assignment]
                if s is self._server:
                    conn, _ = self._server.accept()
                    joined.add(conn)
                    sel.register(conn, selectors.EVENT_READ)
                    continue
                if s.recv(1):
                    waiting.add(s)
                    continue
                sel.unregister(s)        # the copy ended: it no longer counts
                waiting.discard(s)
                joined.discard(s)
                s.close()
            # more copies running than joined: one has not joined yet (a
            # process started through a bind command may not be the copy
            # itself, so they are counted, not matched)
            coming = len(self._procs) < self.copies or \
                sum(p.poll() is None for p in self._procs) > len(joined)
            if waiting and len(waiting) == len(joined) and not coming:
                for s in waiting:
                    try:
                        s.sendall(b"g")
                    except OSError:
                        pass
                waiting.clear()
        for s in joined:
            s.close()
        sel.close()


class Step:
    """A copy's side: :meth:`wait` returns when every copy still running
    has reached its wait of the same count."""

    def __init__(self, path: str):
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._sock.connect(path)

    def wait(self) -> None:
        self._sock.sendall(b"w")
        if not self._sock.recv(1):
            raise ConnectionError("the replay's driver closed the copies' barrier")


def joined() -> Step | None:
    """This copy's barrier where the driver keeps one (:data:`ENV`), else None."""
    path = os.environ.get(ENV)
    return Step(path) if path else None
