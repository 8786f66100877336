"""Stop a tool's process that no longer advances, saying where it is stuck.

A traced or recorded rank that makes no MPI call and uses no CPU for a
long time is stuck, not slow: a deadlock (an import lock, a partner that
will never answer in a call the tracer did not see), a read from a
terminal, a sleep without end.  Nothing else would end it but the batch
system's time limit.  :func:`watch` starts a daemon thread before the
application runs; after ``seconds`` (``--watchdog``, environment
``REPREPLAY_WATCHDOG_SECONDS``; default 300, 0 turns it off) in which the
process's event count did not move and it used less than 1 % of a core,
it prints one message naming the rank, its last event, the application's
innermost Python frames and whether its main thread sleeps (and in what)
or spins, and ends the process (exit code 3); the launcher then ends the
other ranks.  A rank waiting inside an MPI call for a partner that
computes is not stopped: MPI's waits spin or yield, which uses the CPU.

Standard library only: this runs in every rank before the application.
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
IDLE_CPU = 0.01                       # below this share of a core: not running


def limit() -> float:
    """Seconds without progress before the process is stopped (0: never)."""
    try:
        return max(0.0, float(os.environ.get(ENV, DEFAULT)))
    except ValueError:
        return DEFAULT


# frames of the tool itself (running the application), not worth naming
OURS = tuple(os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), p)
             for p in ("launch", "replay", "instrument"))


def location(ident: int, frames: int = 3) -> str:
    """The innermost Python frames of the application in thread ``ident``,
    innermost first (the import system's and the tool's own frames left
    out; the outermost of the tool's where the application has none)."""
    frame = sys._current_frames().get(ident)
    if frame is None:
        return "an unknown place"
    stack = traceback.extract_stack(frame)
    mine = [f for f in stack
            if not f.filename.startswith("<frozen") and not f.filename.startswith(OURS)]
    return " <- ".join(f"{f.filename}:{f.lineno} in {f.name}"
                       for f in reversed((mine or stack)[-frames:])) or "an unknown place"


def state(native_id: int, interval: float = 0.5) -> str:
    """Whether the thread sleeps in the kernel (and in what) or uses the CPU."""
    base = f"/proc/self/task/{native_id}"

    def ticks():
        with open(f"{base}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return fields[0], int(fields[11]) + int(fields[12])   # state, utime + stime
    try:
        _, t0 = ticks()
        time.sleep(interval)
        _, t1 = ticks()
        with open(f"{base}/wchan") as f:
            wchan = f.read().strip()
    except (OSError, ValueError, IndexError):
        return "in a state this system does not show"
    if t1 - t0 >= interval * os.sysconf("SC_CLK_TCK") / 2:
        return "spinning on the CPU (busy-polling, or computing)"
    return f"sleeping in the kernel ({wchan})" if wchan not in ("", "0") else "sleeping"


def _cpu() -> float:
    """CPU seconds of the whole process so far."""
    t = os.times()
    return t.user + t.system


def watch(who: str, events, seconds: float | None = None) -> None:
    """Start the watchdog of this process: ``who`` names it in the message
    (``instrument trace: rank 3``), ``events()`` is its count of traced
    events so far (0 before the tool is set up)."""
    seconds = limit() if seconds is None else seconds
    if not seconds:
        return
    main = threading.main_thread()

    def loop():
        seen, cpu, since = events(), _cpu(), time.monotonic()
        while True:
            time.sleep(min(seconds / 4, 5.0))
            now, n, c = time.monotonic(), events(), _cpu()
            if n != seen or c - cpu > IDLE_CPU * (now - since):
                seen, cpu, since = n, c, now
                continue
            if now - since < seconds:
                continue
            where = location(main.ident)
            print(f"{who}: error: no MPI call and no computation for {now - since:.0f} s "
                  f"after {n} event(s): the application is {state(main.native_id)} at "
                  f"{where}.  A process that neither computes nor calls MPI is stuck (a "
                  f"deadlock, a read that never returns); stopped (--watchdog {seconds:.0f} "
                  f"s; 0 never stops it).", file=sys.stderr, flush=True)
            os._exit(EXIT)
    threading.Thread(target=loop, name="repreplay-watchdog", daemon=True).start()
