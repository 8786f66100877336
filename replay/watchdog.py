"""Stop a replay that no longer advances, saying where it is stuck.

A replayed rank never waits for another process: every MPI call the
tracer saw is answered from the log at once.  So a replay that makes no
call for a long time is computing, or it is blocked where the replay
cannot answer: typically in an MPI call made below Python (ctypes, cffi,
a C extension), which the tracer never saw and which, in the replay's
one-process world, waits for a peer that does not exist.  Rather than
hang, the watchdog stops the process after REPREPLAY_WATCHDOG_SECONDS
(``replay --watchdog``; default 300, 0 turns it off) without a replayed
call, with one message naming the rank, the last event replayed, the
application's innermost Python frames and whether the thread sleeps in
the kernel or spins.  On a virtual core of share F (an emulated cluster's:
emulate.cores) the limit is in the core's own time, 1/F wall seconds
each: a computation between two calls takes 1/F as long there.
"""
from __future__ import annotations

import os
import sys
import threading
import time

from emulate.cores import own_core

# the limit, its variable and how a stuck thread is described are the same
# as for trace and record
from launch.watchdog import DEFAULT, ENV, EXIT, limit  # noqa: F401  (re-exported)
from launch.watchdog import location as _location
from launch.watchdog import state as _state


def watch(rank: int, replayer, seconds: float | None = None) -> None:
    """Start the watchdog of this replayed ``rank`` (a daemon thread that
    only sleeps and reads ``replayer.last_event``, ``seq`` and ``polls``).
    Polls answered empty are no progress: a loop polling for what the log
    never answers is stopped too."""
    seconds = limit() if seconds is None else seconds
    if not seconds:
        return
    seconds /= own_core()[0]           # the core's time: 1/F wall seconds each
    main = threading.main_thread()

    def loop():
        while True:
            idle = time.perf_counter() - replayer.last_event
            if idle < seconds:
                time.sleep(min(seconds - idle, 5.0) + 0.01)
                continue
            where = _location(main.ident)
            if replayer.polls:
                print(f"replay: error: rank {rank}: {replayer.polls} polls answered empty for "
                      f"{idle:.0f} s after event {replayer.seq - 1} (the trace's seq), at "
                      f"{where}: the application waits by polling for something its log "
                      f"never answers (the recorded run's next call is another one: a poll of "
                      f"other requests or arguments, a non-deterministic run?).",
                      file=sys.stderr, flush=True)
                os._exit(EXIT)
            state = _state(main.native_id)
            print(f"replay: error: rank {rank}: no MPI call replayed for {idle:.0f} s after "
                  f"event {replayer.seq - 1} (the trace's seq); the application is {state} "
                  f"at {where}.  If that calls MPI below Python (ctypes, cffi, a C "
                  "extension) and the run was recorded without the PMPI shim "
                  "(--no-c-calls, or no mpicc found), record it again with the shim "
                  "(`instrument record --c-calls`), whose C log answers them; if it "
                  f"computes that long between MPI calls, raise --watchdog (now "
                  f"{seconds:.0f} s of wall time).", file=sys.stderr, flush=True)
            os._exit(EXIT)
    threading.Thread(target=loop, name="repreplay-watchdog", daemon=True).start()
