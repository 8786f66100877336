"""C-level MPI call counter: MPI calls the Python-level tracer cannot see.

Some applications call MPI below Python: a C extension or FFTW-MPI handed
the raw communicator, ctypes/cffi bindings.  Their traffic is missing from
the trace, and a prediction from it would be silently wrong.  This module
builds a PMPI shim (wrappers of every communication, completion, one-sided
and file call of the MPI library at hand, generated from its own header and
compiled with its ``mpicc``), loads it before MPI through mpi4py's profiling
hook, and reads back per function how many calls came from mpi4py (the
tracer saw them) and how many from anywhere else (it did not).  Code that
looks MPI functions up on the MPI library's own handle (ctypes, cffi)
would bypass the shim; the traced process is therefore rerun with a dlsym
interposer preloaded (``ccount_dlsym.c``, LD_PRELOAD) that hands such
lookups the shim's wrappers instead.

    mpiexec -n N python -m instrument trace --count-c-calls -o DIR app.py

The shim is built once per MPI library into ``$XDG_CACHE_HOME/repreplay``
(``~/.cache/repreplay``); ranks starting together wait on a file lock while
one of them compiles.
"""
from __future__ import annotations

import ctypes
import fcntl
import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile

# no pandas here: this module is imported before the application

HERE = os.path.dirname(os.path.abspath(__file__))
LIB_NAME = "repreplay_ccount"
DLSYM_NAME = "librepreplay_dlsym.so"      # ccount_dlsym.c: calls looked up on libmpi's handle
PRELOADED = "REPREPLAY_PRELOADED"         # set once the process runs with the interposer
_shim: ctypes.CDLL | None = None   # the shim this process loaded

# the calls that move data or complete its movement: point-to-point,
# probes, persistent starts, completions, collectives (blocking,
# nonblocking, persistent, neighbourhood), one-sided, file data access
_COLL = (r"Barrier|Bcast|Reduce|Allreduce|Gather|Gatherv|Scatter|Scatterv|Allgather|"
         r"Allgatherv|Alltoall|Alltoallv|Alltoallw|Scan|Exscan|Reduce_scatter|"
         r"Reduce_scatter_block|Neighbor_allgather|Neighbor_allgatherv|Neighbor_alltoall|"
         r"Neighbor_alltoallv|Neighbor_alltoallw")
COUNTED = re.compile(
    r"^(Send|Recv|Bsend|Ssend|Rsend|Isend|Ibsend|Issend|Irsend|Irecv|Sendrecv|"
    r"Sendrecv_replace|Isendrecv|Isendrecv_replace|Probe|Iprobe|Mprobe|Improbe|Mrecv|Imrecv|"
    r"(Send|Recv|Bsend|Ssend|Rsend)_init|Psend_init|Precv_init|Start|Startall|"
    r"Wait|Waitall|Waitany|Waitsome|Test|Testall|Testany|Testsome|"
    rf"I?({_COLL})|({_COLL})_init|"
    r"Put|Get|Accumulate|Get_accumulate|Fetch_and_op|Compare_and_swap|Rput|Rget|"
    r"Raccumulate|Rget_accumulate|Win_fence|Win_start|Win_complete|Win_post|Win_wait|"
    r"Win_lock|Win_unlock|Win_lock_all|Win_unlock_all|Win_flush\w*|Win_sync|"
    r"File_(read|write|iread|iwrite)\w*)(_c)?$")


class ShimError(Exception):
    pass


def _mpicc() -> str:
    beside = os.path.join(os.path.dirname(sys.executable), "mpicc")
    found = beside if os.path.exists(beside) else shutil.which("mpicc")
    if not found:
        raise ShimError("no mpicc beside this python or on PATH: the call counter is "
                          "compiled with the MPI library's own compiler wrapper")
    return found


def _prototypes(mpicc: str) -> list[tuple[str, str]]:
    """(name, parameter list) of every PMPI_ function the MPI header declares."""
    with tempfile.TemporaryDirectory() as d:
        src = os.path.join(d, "h.c")
        with open(src, "w") as f:
            f.write("#include <mpi.h>\n")
        p = subprocess.run([mpicc, "-E", src], capture_output=True, text=True)
    if p.returncode:
        raise ShimError(f"{mpicc} -E could not read mpi.h: {p.stderr[-1000:]}")
    text = p.stdout
    out = []
    for m in re.finditer(r"\bint\s+PMPI_(\w+)\s*\(", text):
        depth, i = 1, m.end()
        while depth and i < len(text):
            depth += {"(": 1, ")": -1}.get(text[i], 0)
            i += 1
        out.append((m.group(1), " ".join(text[m.end():i - 1].split())))
    return out


def _param_names(params: str) -> list[str] | None:
    """Argument names of a C parameter list, or None if one is unnamed."""
    if params.strip() in ("", "void"):
        return []
    parts, depth, cur = [], 0, ""
    for ch in params:
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
            continue
        depth += {"(": 1, ")": -1, "[": 1, "]": -1}.get(ch, 0)
        cur += ch
    parts.append(cur)
    names = []
    for p in parts:
        p = re.sub(r"\[[^\]]*\]\s*$", "", p.strip())
        m = re.search(r"([A-Za-z_]\w*)\s*$", p)
        if not m or len(p.split()) < 2 and "*" not in p:
            return None
        names.append(m.group(1))
    return names


def wrappers(mpicc: str, wanted, body, prototypes=None) -> list[tuple[str, str]]:
    """(name, C source) of a wrapper MPI_X for every PMPI_X that the MPI
    header behind ``mpicc`` declares (``prototypes``, when the caller has
    read them already) and ``wanted(X)`` accepts, each once.
    ``body(i, X, call)`` gives the i-th wrapper's statements, ``call``
    being the PMPI_X call with the wrapper's arguments."""
    out: list = []
    seen: set = set()
    for name, params in prototypes if prototypes is not None else _prototypes(mpicc):
        if name in seen or not wanted(name):
            continue
        args = _param_names(params)
        if args is None:
            continue
        seen.add(name)
        call = f"PMPI_{name}({', '.join(args)})"
        out.append((name, f"int MPI_{name}({params})\n{{\n{body(len(out), name, call)}}}\n"))
    return out


def generate(mpicc: str) -> str:
    """The C source of the shim for the MPI library behind ``mpicc``: a
    counting wrapper for every COUNTED function, which also records the
    call as an event (ctrace.c) where pmpishim/cwrappers.py has a body
    for it and the call is made below Python while tracing is on."""
    from .cwrappers import body, traced_ops, traced_row
    from .cwrappers_log import log_bodies
    traced = traced_ops()
    prototypes = _prototypes(mpicc)
    bodies: dict[str, str] = {}
    logs: dict[str, tuple[str, str]] = {}
    for name, params in prototypes:
        row = traced_row(name, traced)
        if row is None or name in bodies or name in logs:
            continue
        b = body(name, params, row)
        if b is not None:
            bodies[name] = b
        pair = log_bodies(name, params, row)
        if pair is not None:
            logs[name] = pair

    def modes(i, name):
        """A call below Python while recording (the real call, logged) or
        replaying (answered from the log); one without bodies stops the run."""
        if name not in logs:
            return ("    if (rr_mode && rr_classify(ret) == CALLER_OTHER)\n"
                    f"        rr_unloggable({i}, ret);\n")
        rec, rep = (_indent(b, 12) for b in logs[name])
        return ("    if (rr_mode && rr_classify(ret) == CALLER_OTHER) {\n"
                f"        if (rr_mode == RR_REPLAY) {{\n{rep}        }}\n"
                f"        {{\n{rec}        }}\n    }}\n")

    def wrapper(i, name, call):
        head = "    void *ret = __builtin_return_address(0);\n" + modes(i, name)
        if name not in bodies:
            return head + f"    rr_count({i}, ret);\n    return {call};\n"
        return (head + f"    if (!rr_count_traced({i}, ret))\n        return {call};\n"
                "    rr_span sp;\n    rr_enter(&sp);\n" + bodies[name])

    made = wrappers(mpicc, lambda name: COUNTED.match(name) or name in bodies or name in logs,
                    wrapper, prototypes)
    names = ["MPI_" + name for name, _ in made]
    if len(names) > 1024:
        raise ShimError("more counted MPI functions than the shim's table holds")
    table = ",\n    ".join(f'"{n}"' for n in names)
    from mpimodel import ops
    op_table = ",\n    ".join(f'"{n}"' for n in ops.NAMES)
    return ("/* generated by pmpishim/build.py from this MPI library's mpi.h */\n"
            f"#define RR_OP_INIT {ops.CODE['init']}\n"
            f"#define RR_OP_FINALIZE {ops.CODE['finalize']}\n"
            f"#define RR_OP_START {ops.CODE['start']}\n"
            f"#define RR_OP_IRECV {ops.CODE['irecv']}\n"
            f"#define RR_OP_REQUEST_FREE {ops.CODE['request_free']}\n"
            '#include "ccount.c"\n#include "ctrace.c"\n#include "creplay.c"\n\n'
            f"static const char *rr_names[] = {{\n    {table}\n}};\n"
            f"static const char *rr_op_names[] = {{\n    {op_table}\n}};\n"
            "static const char *rp_op_name(int op)\n"
            f"{{\n    return op >= 0 && op < {len(ops.NAMES)} ? rr_op_names[op] : \"?\";\n}}\n"
            f"static int rr_n_functions(void) {{ return {len(names)}; }}\n"
            "static const char *rr_function_name(int i) { return rr_names[i]; }\n\n"
            + "\n".join(src for _, src in made))


def _indent(text: str, n: int) -> str:
    return "".join(" " * (n - 4) + ln + "\n" for ln in text.splitlines())


def cache_dir() -> str:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "repreplay")


def _compile(mpicc: str, out: str, args: list[str], what: str) -> str:
    """Compile a shared library for ``out`` under a name of this process's
    (renamed into place by the caller); returns that name."""
    tmp = f"{out}.{os.getpid()}"
    p = subprocess.run([mpicc, "-O2", "-shared", "-fPIC", "-o", tmp, *args],
                       capture_output=True, text=True)
    if p.returncode:
        raise ShimError(f"compiling {what} failed:\n{p.stderr[-2000:]}")
    return tmp


def build() -> str:
    """Build (once per MPI library) and return the directory holding the shim."""
    mpicc = _mpicc()
    source = b""
    for part in ("ccount.c", "ctrace.c", "creplay.c", "build.py", "cwrappers.py",
                 "cwrappers_log.py", "ccount_dlsym.c",
                 os.path.join("..", "mpimodel", "ops.py")):   # fixed parts, generators
        with open(os.path.join(HERE, part), "rb") as f:
            source += f.read()
    key = hashlib.sha1(source + os.path.realpath(mpicc).encode()
                       + str(os.stat(mpicc).st_mtime_ns).encode()).hexdigest()[:12]
    d = os.path.join(cache_dir(), f"ccount-{key}")
    lib = os.path.join(d, f"lib{LIB_NAME}.so")
    if os.path.exists(lib):
        return d
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)          # ranks starting together: one compiles
        if not os.path.exists(lib):
            src = os.path.join(d, "shim.c")
            with open(src, "w") as f:
                f.write(generate(mpicc))
            shim = _compile(mpicc, lib, ["-I", HERE, src, "-ldl"], "the call counter")
            # -O2 (as _compile does) makes its pass-through of RTLD_NEXT a
            # tail call, which that lookup needs
            interposer = os.path.join(d, DLSYM_NAME)
            os.replace(_compile(mpicc, interposer, [os.path.join(HERE, "ccount_dlsym.c"), "-ldl"],
                                "the dlsym interposer"), interposer)
            os.replace(shim, lib)                 # last: its presence means all is built
    return d


def preloaded_command(argv: list[str], module: str = "instrument"
                      ) -> tuple[list[str], dict] | None:
    """The command line and environment that rerun this tool, ``python -m
    MODULE`` with ``argv``, with the dlsym interposer preloaded (the
    dynamic linker reads LD_PRELOAD only when a process starts), or None if
    this process already runs with it.  Calls that code looks up on the
    MPI library's own handle (ctypes, cffi) are then counted as well."""
    if os.environ.get(PRELOADED) == "1":
        return None
    interposer = os.path.join(build(), DLSYM_NAME)
    env = dict(os.environ, **{PRELOADED: "1"})
    env["LD_PRELOAD"] = interposer + (":" + env["LD_PRELOAD"] if env.get("LD_PRELOAD") else "")
    return [sys.executable, "-m", module] + list(argv), env


def _check_interposer(d: str) -> None:
    """Stop if the preloaded interposer (built in ``d``) is not working in
    this process, and keep it out of the application's own child processes."""
    path = os.path.join(d, DLSYM_NAME)
    try:
        ready = ctypes.CDLL(path, mode=os.RTLD_NOLOAD).rr_dlsym_ready()
    except OSError:
        ready = 0
    if not ready:
        raise ShimError(f"{path} is not preloaded or did not find the C library's dlsym: "
                          "calls looked up on the MPI library's handle would go uncounted")
    kept = [p for p in os.environ.get("LD_PRELOAD", "").split(":") if p and p != path]
    if kept:
        os.environ["LD_PRELOAD"] = ":".join(kept)
    else:
        os.environ.pop("LD_PRELOAD", None)
    del os.environ[PRELOADED]


def load() -> None:
    """Build if needed and load the shim ahead of the MPI library; call
    before ``from mpi4py import MPI``."""
    if "mpi4py.MPI" in sys.modules:
        raise ShimError("the call counter must be loaded before mpi4py.MPI is imported")
    global _shim
    d = build()
    if os.environ.get(PRELOADED) == "1":
        _check_interposer(d)
    # into the global scope ahead of the MPI library, as mpi4py.profile
    # does, but without importing mpi4py: the application's own import of
    # it must stay its own (an import hook of its may wait for it)
    _shim = ctypes.CDLL(os.path.join(d, f"lib{LIB_NAME}.so"), mode=os.RTLD_NOW | os.RTLD_GLOBAL)


def dump(path: str) -> bool:
    """Write this process's counts (TSV: function, visible, invisible) to
    ``path``; False if the shim is not loaded."""
    if _shim is None:
        return False
    return _shim.repreplay_ccount_dump(path.encode()) == 0


def loaded_library() -> ctypes.CDLL | None:
    """The shim this process loaded (load()), or None."""
    return _shim
