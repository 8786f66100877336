"""gdb's half of refcount_sites.py: count who calls numba's reference counts.

Run inside gdb (``gdb -q -batch -p PID -x bench/probes/refcount_gdb.py``),
attached to refcount_sites.py while it waits.  Stops at every copy of
NRT_incref and NRT_decref listed in /tmp/refcount_funcs.txt and counts
the return address on the stack.  After 100,000 stops it lets the run go
on.  Once the run ends, it writes /tmp/refcount_sites.txt: ``COUNT KIND
FUNCTION+OFFSET`` per call site.
"""
import bisect
import collections

import gdb  # type: ignore[import-not-found]

LIMIT = 100_000
funcs = sorted((int(a, 16), int(size, 16), name)
               for a, size, name in (line.split() for line in open("/tmp/refcount_funcs.txt")))
counts: collections.Counter = collections.Counter()


class Site(gdb.Breakpoint):
    """A breakpoint that counts its callers and never stops the run."""

    def stop(self):
        counts[(self.kind, int(gdb.parse_and_eval("*(unsigned long *)$rsp")))] += 1
        if sum(counts.values()) >= LIMIT:
            for b in gdb.breakpoints() or ():
                b.enabled = False
        return False


for at, _, name in funcs:
    if name in ("NRT_incref", "NRT_decref"):
        Site(f"*0x{at:x}", internal=True).kind = name
gdb.execute("continue")

starts = [f[0] for f in funcs]
with open("/tmp/refcount_sites.txt", "w") as out:
    for (kind, ret), c in counts.most_common():
        k = bisect.bisect_right(starts, ret) - 1
        at, size, name = funcs[k] if k >= 0 else (0, 0, "?")
        where = f"{name[:60]}+{ret - at:x}" if 0 <= ret - at < size else f"?{ret:x}"
        out.write(f"{c} {kind} {where}\n")
