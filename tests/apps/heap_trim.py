"""How much of 100 MB freed at the top of the heap glibc keeps (the
replay must keep what the application alone keeps: it measures the
computation with the allocator's own page faults)."""
import ctypes

from mpi4py import MPI

libc = ctypes.CDLL("libc.so.6")
libc.malloc.restype = ctypes.c_void_p
libc.free.argtypes = [ctypes.c_void_p]


def rss():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096


comm = MPI.COMM_WORLD
blocks = [libc.malloc(100_000) for _ in range(1000)]   # below the mmap threshold: the heap
for b in blocks:
    ctypes.memset(b, 1, 100_000)
before = rss()
for b in reversed(blocks):
    libc.free(b)
kept = (rss() - (before - 100_000_000)) >> 20
comm.Barrier()
# glibc's default trims all of it (a 64 MiB top pad would keep 63-64 MiB)
print(f"rank {comm.rank} heap top {'kept' if kept >= 32 else 'returned'}")
