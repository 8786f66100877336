"""How much of 100 MB freed at the top of the heap glibc keeps, and where
it puts a fresh 160 kB block (the replay must keep what the application
alone keeps, and the trace must see the application's own computation:
both depend on the allocator's state, which anything allocating or freeing
inside the process can change)."""
import ctypes

from mpi4py import MPI

libc = ctypes.CDLL("libc.so.6")
libc.malloc.restype = ctypes.c_void_p
libc.malloc.argtypes = [ctypes.c_size_t]
libc.free.argtypes = [ctypes.c_void_p]


def rss():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096


def in_heap(address: int) -> bool:
    """Whether ``address`` lies in the heap (else in a mapping of its own)."""
    with open("/proc/self/maps") as f:
        for line in f:
            lo, hi = (int(x, 16) for x in line.split()[0].split("-"))
            if lo <= address < hi:
                return line.rstrip().endswith("[heap]")
    return False


comm = MPI.COMM_WORLD
# above glibc's initial mmap threshold (128 KiB), which freeing a larger
# mapped block raises: where it lands says what the process freed before
places = []
for _ in range(3):
    b = libc.malloc(160_000)
    places.append("heap" if in_heap(b) else "mapped")
    libc.free(b)
    comm.Barrier()
# below the mmap threshold: the heap.  Their addresses go into an array
# made beforehand: a list growing between them would put its own storage
# between two blocks, where it stops the heap's top from being trimmed
# (or not, depending on the holes the process's history left)
blocks = (ctypes.c_void_p * 1000)()
for i in range(1000):
    blocks[i] = libc.malloc(100_000)
for b in blocks:
    ctypes.memset(b, 1, 100_000)
before = rss()
for i in range(999, -1, -1):
    libc.free(blocks[i])
kept = (rss() - (before - 100_000_000)) >> 20
comm.Barrier()
# glibc's default trims all of it (a 64 MiB top pad would keep 63-64 MiB)
print(f"rank {comm.rank} heap top {'kept' if kept >= 32 else 'returned'}, "
      f"160 kB blocks {' '.join(places)}")
