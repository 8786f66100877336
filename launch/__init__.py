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

The tools also keep out of the application's heap.  glibc's malloc
trims its heap, or keeps freed memory, according to thresholds that the
process's whole allocation history moves: a NumPy loop whose temporaries
are handed back to the kernel and faulted in again at every step runs up
to 2.5x slower, and which side a process lands on flips with anything
allocated before the application (one more module imported suffices).
So a tool lets the application initialise MPI at its own import of
``mpi4py.MPI``, as a plain run does, and does its own set-up there in a
short-lived thread (:func:`in_own_arena`): glibc gives a new thread a
malloc arena of its own, and the main arena, where the application's
heap lives, sees what it would see without the tool.
"""
from __future__ import annotations

import importlib.abc
import importlib.util
import os
import runpy
import sys
import threading
import time
import traceback

__all__ = ["split_command", "run_app", "abort_job", "in_own_arena", "AtMPIImport",
           "PINNED_MALLOC"]

# The environment that pins glibc's heap: every allocation below 32 MiB
# from the heap, never trimmed below 256 MiB, so that a process's
# allocation history no longer decides whether a loop's temporaries are
# faulted in again at every step (for measurements that must not depend
# on it: tests, bench/probes/span_probe.py --pin-malloc)
PINNED_MALLOC = {"MALLOC_MMAP_THRESHOLD_": str(32 << 20), "MALLOC_TRIM_THRESHOLD_": str(256 << 20)}


def in_own_arena(fn, *args, **kwargs):
    """``fn(*args, **kwargs)`` run in a short-lived thread: its result, or
    its exception raised here.

    What ``fn`` allocates through malloc (modules imported, libraries
    loaded, buffers) goes to that thread's own arena, not to the main
    arena that the application's heap shares (see the module's docstring).
    Where ``MALLOC_ARENA_MAX=1`` is set, every thread shares the main
    arena and this shields nothing."""
    box = {}

    def work():
        try:
            box["value"] = fn(*args, **kwargs)
        except BaseException as e:              # raised in the caller's thread
            box["error"] = e
    t = threading.Thread(target=work, name="repreplay-setup")
    t.start()
    t.join()
    if "error" in box:
        raise box["error"]
    return box.get("value")


class AtMPIImport(importlib.abc.MetaPathFinder):
    """Run a tool's ``setup(MPI)`` right after the application's own import
    of ``mpi4py.MPI``, which initialises MPI, and before the application
    gets the module.

    MPI is initialised by the application's thread where a plain run
    initialises it; ``setup`` runs :func:`in_own_arena` and its result is
    kept in ``result``; ``then(result)``, if given, runs after it in the
    application's thread (what must: signal handlers).  :meth:`install`
    before the application runs; after it, :meth:`ensure`
    runs the set-up for an application that never imported ``mpi4py.MPI``,
    and raises the set-up's error if it failed (the application then saw
    that error at its import)."""

    def __init__(self, setup, then=None):
        self.setup, self.then = setup, then
        self.done, self.result, self.error, self.module = False, None, None, None

    def find_spec(self, name, path, target=None):
        if name != "mpi4py.MPI":
            return None
        sys.meta_path.remove(self)                # once; the real finders do the rest
        spec = importlib.util.find_spec(name)
        if spec is None:                          # the application's import fails as usual
            return None
        load = spec.loader.exec_module

        def exec_module(module):
            load(module)
            # the set-up's thread imports modules that import mpi4py.MPI: they
            # must find it loaded, not wait for this import to finish
            module.__spec__._initializing = False
            if module.Is_initialized():
                self._run(module)
            else:
                self._at_init(module)
        spec.loader.exec_module = exec_module
        return spec

    def _at_init(self, module) -> None:
        """MPI not initialised at its import (``mpi4py.rc.initialize =
        False``, as Devito sets it): the set-up runs when the application
        initialises it, right after its own ``MPI.Init`` or
        ``MPI.Init_thread`` returns (MPI initialised from C instead, the
        set-up runs at :meth:`ensure`)."""
        real = {name: getattr(module, name) for name in ("Init", "Init_thread")}

        def wrapped(fn):
            def init(*args, **kwargs):
                out = fn(*args, **kwargs)
                for name, f in real.items():            # once: the real ones back
                    setattr(module, name, f)
                if not self.done:
                    self._run(module)
                return out
            return init
        for name, fn in real.items():
            setattr(module, name, wrapped(fn))

    def install(self) -> None:
        """Put the hook in place before the application runs; where
        ``mpi4py.MPI`` is imported already (a ``sitecustomize``, a ``.pth``
        file, the interpreter's start-up), run the set-up now, since MPI is
        initialised and no import of it is left to catch."""
        loaded = sys.modules.get("mpi4py.MPI")
        if loaded is not None:
            self._run(loaded)
        else:
            sys.meta_path.insert(0, self)

    def _run(self, module):
        self.done, self.module = True, module
        try:
            with _imports_unblocked():
                self.result = in_own_arena(self.setup, module)
        except BaseException as e:
            self.error = e
            raise
        if self.then is not None:
            self.then(self.result)

    def ensure(self):
        """The set-up's result; run now if the application never imported
        ``mpi4py.MPI``; its error raised again if it failed."""
        if self in sys.meta_path:
            sys.meta_path.remove(self)
        if self.error is not None:
            # a failed import is taken out of sys.modules; MPI itself is
            # initialised and the tool still needs the module
            import mpi4py
            sys.modules.setdefault("mpi4py.MPI", self.module)
            mpi4py.MPI = self.module
            raise self.error
        if not self.done:
            from mpi4py import MPI
            self._run(MPI)
        return self.result


class _imports_unblocked:
    """While the set-up thread runs, the modules this thread is importing
    (every one it is inside of, as the application imported mpi4py.MPI
    from within their import) read as loaded to other threads.

    An import of a module that is still initialising waits for its lock,
    which the importing thread holds until it is done; this thread, in
    turn, waits for the set-up thread.  Pyomo's deferred imports (as
    mpi-sppy uses them) import mpi4py.MPI from inside the import of the
    ``mpi4py`` package, and the set-up's own ``import mpi4py`` then waited
    for ever.  The set-up imports only the tool's modules, the standard
    library and mpi4py, whose package has run by the time its MPI
    submodule is imported: finding them loaded is right.  The flags are
    put back as they were afterwards."""

    def __enter__(self):
        self.flagged = []
        for m in list(sys.modules.values()):
            try:                # the module's own dict: a lazy module's
                spec = object.__getattribute__(m, "__dict__").get("__spec__")  # __getattr__
            except (AttributeError, TypeError):                                 # would import
                continue
            if getattr(spec, "_initializing", False):
                spec._initializing = False
                self.flagged.append(spec)
        return self

    def __exit__(self, *exc):
        for spec in self.flagged:
            spec._initializing = True
        return False


def parse_ranks(ranks: str) -> list[int]:
    """World ranks from ``--ranks "1,2"`` (sorted, each once)."""
    try:
        return sorted({int(x) for x in ranks.split(",") if x.strip()})
    except ValueError:
        raise ValueError(f"--ranks wants comma-separated integers, not {ranks!r}") from None


def bind_command(ap, cmd: str) -> str:
    """The absolute path of ``--bind-command CMD`` (a name on PATH or a
    path); ``ap``'s error (it exits) where there is none: refused before
    anything runs."""
    import shutil
    found = shutil.which(cmd)
    if found is None:
        ap.error(f"--bind-command {cmd}: not an executable command")
        raise SystemExit(2)                 # ap.error exits; said for the type checker
    return os.path.abspath(found)


def split_command(argv: list[str], valued=(), prog: str = "tool"):
    """Split ``[opts] (app.py | -m mod | -c cmd) [app args]`` like python does.

    ``valued``: the tool's options that take a value (the next word is that
    value, not the application).  Returns ``(opts, mode, target)`` where
    ``mode`` is ``"path"``, ``"module"``, ``"command"`` or None (no
    application given) and ``target`` the application's argv."""
    opts: list[str] = []
    i = 0
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


# the modules loaded when the application started (the tool's own and the
# interpreter's); None before
_BEFORE_APP: frozenset | None = None


def app_modules() -> list[str]:
    """The top-level modules the application loaded itself, dynamic imports
    included (all loaded ones before it starts): what a replay elsewhere
    must install."""
    before = _BEFORE_APP or frozenset()
    return sorted({m.partition(".")[0] for m in list(sys.modules)
                   if m not in before and not m.startswith("_")})


def run_app(target: list[str], mode: str, ours: tuple = ()) -> tuple[str, int]:
    """Run the application as ``__main__``; returns (status, exit code).

    The status is ``complete``, ``exited with CODE`` or ``failed: EXCEPTION:
    its message's first line`` (the traceback is printed, as python would).
    ``ours``: the tool's own exception classes (a divergence, a write
    error), raised to the caller as they are: they are not the
    application's failure, and its traceback would only hide the message."""
    global _BEFORE_APP
    status, code = "complete", 0
    sys.argv = list(target)
    _BEFORE_APP = frozenset(sys.modules)
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
        err = sys.exc_info()[1]
        said = str(err).strip().splitlines()[0][:300] if str(err).strip() else ""
        status, code = f"failed: {type(err).__name__}" + (f": {said}" if said else ""), 1
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
