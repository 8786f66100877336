"""Where the simulator's compiled code spends its time: perf, with names
for numba's functions.

perf sees numba's machine code as anonymous memory.  This probe runs one
of bench/netsim_speed.py's workloads on the 4:1 fat tree (``sharing``:
rtt_flows, flows or queues), and after the run writes
/tmp/perf-<pid>.map, perf's file of names for such code: every function
numba compiled for netsim.engine and netsim.flows in this process, at the
address its library gives it, its size the gap to the next.  A fresh
numba cache (NUMBA_CACHE_DIR, set here) is needed: code loaded from the
cache has no module to list.  Run it, and perf beside it once the run
starts (the probe writes its pid to /tmp/perf_ready then)::

    python bench/probes/perf_numba_map.py halo+allreduce 2048 4000000 rtt_flows &
    while [ ! -f /tmp/perf_ready ]; do sleep 2; done
    perf record -F 499 -p $(cat /tmp/perf_ready) -o /tmp/perf.data
    perf report -i /tmp/perf.data --no-children --sort sym --stdio

2026-12-01, halo+allreduce at 2,048 ranks: NRT_incref and NRT_decref
(numba's reference counts) 28-32 % of the samples, the engine's loop
23-27 %, the solve's functions the rest; marking the solve's helpers and
enter/release ``inline="always"`` moved nothing out of the reference
counts; a list of links that the walk could replace did (numba counted
its references at every step): made once with room for every link, the
share fell to 22 % (bench/tables/topology_simgrid.md, "Cost").
"""
from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("NUMBA_CACHE_DIR", tempfile.mkdtemp(prefix="perf_numba_"))
HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent.parent), str(HERE.parent)]

import netsim_speed as ns  # noqa: E402

import netsim.engine  # noqa: E402
import netsim.flows  # noqa: E402
from netsim import from_dict, run  # noqa: E402


def compiled_functions(modules) -> dict[int, str]:
    """Address -> name of every function numba compiled for ``modules``'
    dispatchers in this process (their linked modules: callees too)."""
    found: dict[int, str] = {}
    for mod in modules:
        for v in vars(mod).values():
            for cres in getattr(v, "overloads", {}).values():
                lib = cres.library
                module = getattr(lib, "_final_module", None)
                if module is None:           # loaded from a cache: nothing to list
                    continue
                for f in module.functions:
                    if f.is_declaration:
                        continue
                    try:
                        at = lib.get_pointer_to_function(f.name)
                    except Exception:        # a name the linker dropped
                        continue
                    if at:
                        found[at] = f.name
    return found


def write_map(found: dict[int, str], path: str) -> None:
    """perf's map: ``START SIZE NAME`` per line, hexadecimal."""
    at = sorted(found)
    with open(path, "w") as out:
        for k, a in enumerate(at):
            size = at[k + 1] - a if k + 1 < len(at) and at[k + 1] - a < 1 << 20 else 1 << 16
            out.write(f"{a:x} {size:x} {found[a]}\n")


def tree_workload(argv: list[str]):
    """The case ``argv`` names (WORKLOAD RANKS OPS [SHARING], sharing
    rtt_flows by default) on the 4:1 fat tree: (label, schedule,
    platform), the engine compiled for it."""
    name, p, ops = argv[0], int(argv[1]), int(argv[2])
    sharing = argv[3] if len(argv) > 3 else "rtt_flows"
    net = dict(ns.PLATFORM["network"], contention=True)
    tree = {"kind": "fat_tree", "leaf_nodes": 16, "up_links": 4, "sharing": sharing}
    plat = from_dict(dict(ns.PLATFORM, network=dict(net, topology=tree)), "probe")
    gen, per_iter = ns.WORKLOADS[name]
    s = gen(p, max(1, ops // (p * per_iter(p))))
    run(s, plat)                             # compiled for these types, not timed
    return f"{name} p={p} {sharing}", s, plat


def main() -> None:
    label, s, plat = tree_workload(sys.argv[1:])
    Path("/tmp/perf_ready").write_text(str(os.getpid()))
    t0 = time.perf_counter()
    res = run(s, plat)
    print(f"{label}: events {res.events}, engine {res.seconds:.2f} s, whole "
          f"{time.perf_counter() - t0:.2f} s", flush=True)
    found = compiled_functions((netsim.engine, netsim.flows))
    path = f"/tmp/perf-{os.getpid()}.map"
    write_map(found, path)
    print(f"{len(found)} functions -> {path}")


if __name__ == "__main__":
    main()
