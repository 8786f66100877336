"""What a long run under one of the tools says while it runs and at its end.

Standard library only: traced, recorded and replayed ranks import it
before the application starts.
"""
from __future__ import annotations

import os
import sys
import time


def report_late_calls(who: str, count) -> None:
    """At exit, say how many MPI calls the application made after the tool
    closed its trace or log (its atexit handlers, a library's late send):
    they went to MPI untraced.  Registered before the application runs, so
    it runs after the application's own exit handlers."""
    import atexit

    def say():
        n = count()
        if n:
            print(f"{who}: {n} MPI call(s) after the end of the application's run (exit "
                  f"handlers, late sends) went to MPI untraced", file=sys.stderr, flush=True)
    atexit.register(say)


def report_progress(who: str, count, unit: str) -> None:
    """Print ``who: count() unit so far`` every REPREPLAY_PROGRESS_SECONDS (default 10) from a
    daemon thread, so that a long run's log shows it advancing.  One rank
    reports (the others run alike), and the thread only sleeps and reads a
    counter: the application's computation is not touched."""
    import threading
    every = float(os.environ.get("REPREPLAY_PROGRESS_SECONDS", "10"))
    t0 = time.time()

    def loop():
        while True:
            time.sleep(every)
            print(f"{who}: {count()} {unit} so far, {time.time() - t0:.0f} s",
                  file=sys.stderr, flush=True)
    threading.Thread(target=loop, name="repreplay-progress", daemon=True).start()
