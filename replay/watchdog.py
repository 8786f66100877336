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
the kernel or spins.
"""
from __future__ import annotations

import os
import sys
import threading
import time
import traceback

ENV = "REPREPLAY_WATCHDOG_SECONDS"
DEFAULT = 300.0
EXIT = 3                              # the process's exit code when stopped


def limit() -> float:
    """Seconds without a replayed call before the replay is stopped (0: never)."""
    try:
        return max(0.0, float(os.environ.get(ENV, DEFAULT)))
    except ValueError:
        return DEFAULT


# frames of the tool itself (running the application), not worth naming
OURS = tuple(os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), p)
             for p in ("launch", "replay", "instrument"))


def _location(ident: int, frames: int = 3) -> str:
    """The innermost Python frames of the application in thread ``ident``,
    innermost first."""
    frame = sys._current_frames().get(ident)
    if frame is None:
        return "an unknown place"
    stack = [f for f in traceback.extract_stack(frame)
             if not f.filename.startswith("<frozen") and not f.filename.startswith(OURS)]
    return " <- ".join(f"{f.filename}:{f.lineno} in {f.name}"
                       for f in reversed(stack[-frames:])) or "an unknown place"


def _state(native_id: int, interval: float = 0.5) -> str:
    """Whether the thread sleeps in the kernel (and in what) or uses the CPU."""
    base = f"/proc/self/task/{native_id}"

    def ticks():
        with open(f"{base}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return fields[0], int(fields[11]) + int(fields[12])   # state, utime + stime
    try:
        state, t0 = ticks()
        time.sleep(interval)
        state, t1 = ticks()
        with open(f"{base}/wchan") as f:
            wchan = f.read().strip()
    except (OSError, ValueError, IndexError):
        return "in a state this system does not show"
    if t1 - t0 >= interval * os.sysconf("SC_CLK_TCK") / 2:
        return "spinning on the CPU (busy-polling, or computing)"
    return f"sleeping in the kernel ({wchan})" if wchan not in ("", "0") else "sleeping"


def watch(rank: int, replayer, seconds: float | None = None) -> None:
    """Start the watchdog of this replayed ``rank`` (a daemon thread that
    only sleeps and reads ``replayer.last_event``, ``seq`` and ``polls``).
    Polls answered empty are no progress: a loop polling for what the log
    never answers is stopped too."""
    seconds = limit() if seconds is None else seconds
    if not seconds:
        return
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
                  "extension), those calls are invisible to the tracer and cannot be "
                  "replayed (`instrument trace --count-c-calls` counts what it can); if it "
                  f"computes that long between MPI calls, raise --watchdog (now "
                  f"{seconds:.0f} s).", file=sys.stderr, flush=True)
            os._exit(EXIT)
    threading.Thread(target=loop, name="repreplay-watchdog", daemon=True).start()
