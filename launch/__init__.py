"""Run the target application inside a tool's process.

Every stage that runs the user's application (trace, record, replay,
calibrate's and validate's real runs) does it the same way: split the
command line into the tool's options and the application (``app.py``,
``-m module`` or ``-c command``, as ``python`` takes them), run the
application as ``__main__`` in this process, and, when one rank fails,
abort the job so that the others are not left blocked.

Only the standard library is imported here: this module runs in every
rank before the application starts, and what it imports would change the
application's start-up cost.
"""
from __future__ import annotations

import os
import runpy
import sys
import time
import traceback

__all__ = ["split_command", "run_app", "abort_job"]


def split_command(argv: list[str], valued=(), prog: str = "tool"):
    """Split ``[opts] (app.py | -m mod | -c cmd) [app args]`` like python does.

    ``valued``: the tool's options that take a value (the next word is that
    value, not the application).  Returns ``(opts, mode, target)`` where
    ``mode`` is ``"path"``, ``"module"``, ``"command"`` or None (no
    application given) and ``target`` the application's argv."""
    opts, i = [], 0
    while i < len(argv):
        a = argv[i]
        if a in ("-m", "-c"):
            if i + 1 >= len(argv):
                raise SystemExit(f"{prog}: {a} needs an argument")
            return opts, ("module" if a == "-m" else "command"), argv[i + 1:]
        if a in valued:
            opts += argv[i:i + 2]
            i += 2
            continue
        if a.startswith("-"):
            opts.append(a)
            i += 1
            continue
        return opts, "path", argv[i:]
    return opts, None, []


def command_line(target: list[str], mode: str) -> list[str]:
    """The application's command line as a user typed it (for logs and metadata)."""
    return {"module": ["-m"], "command": ["-c"]}.get(mode, []) + list(target)


def run_app(target: list[str], mode: str, ours: tuple = ()) -> tuple[str, int]:
    """Run the application as ``__main__``; returns (status, exit code).

    The status is ``complete``, ``exited with CODE`` or ``failed: EXCEPTION:
    its message's first line`` (the traceback is printed, as python would).
    ``ours``: the tool's own exception classes (a divergence, a write
    error), raised to the caller as they are: they are not the
    application's failure, and its traceback would only hide the message."""
    status, code = "complete", 0
    sys.argv = list(target)
    try:
        if mode == "module":
            runpy.run_module(target[0], run_name="__main__", alter_sys=True)
        elif mode == "command":
            sys.argv = ["-c"] + target[1:]
            exec(compile(target[0], "<string>", "exec"), {"__name__": "__main__"})
        else:
            sys.path.insert(0, os.path.dirname(os.path.abspath(target[0])))
            runpy.run_path(target[0], run_name="__main__")
    except ours:
        raise
    except SystemExit as e:
        if e.code not in (None, 0):
            code = e.code if isinstance(e.code, int) else 1
            status = f"exited with {e.code}"
    except BaseException:
        traceback.print_exc()
        kind, err = sys.exc_info()[:2]
        said = str(err).strip().splitlines()[0][:300] if str(err).strip() else ""
        status, code = f"failed: {kind.__name__}" + (f": {said}" if said else ""), 1
    return status, code


def abort_job(world, code: int, abort) -> None:
    """Abort the job after a rank failed, without losing its traceback.

    The launcher kills every process as soon as Abort reaches it, and output
    still in the pipe to the launcher is lost; so flush, then give the
    forwarding a moment first.  ``abort``: the real ``Comm.Abort`` (a tool
    may have replaced the class's)."""
    from mpi4py import MPI
    sys.stdout.flush()
    sys.stderr.flush()
    if not MPI.Is_finalized():
        time.sleep(1.0)
        abort(world, code)
