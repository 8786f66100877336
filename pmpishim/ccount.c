/* C-level MPI call counter: the fixed part of the PMPI shim that
 * pmpishim/build.py generates (the wrappers are generated from the MPI
 * library's own header and #include this file).
 *
 * Every wrapped MPI_X counts the call by who called it: the mpi4py
 * extension (the tracer sees those calls), the MPI library itself (ROMIO
 * and friends calling MPI internally: not the application's), or anything
 * else (a C extension, FFTW-MPI, ctypes: invisible to a Python-level tracer),
 * then calls PMPI_X.  The caller is told apart by dladdr() of the return
 * address, cached per address.  Counting is lock-free (atomics), so
 * multithreaded applications are counted correctly.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <mpi.h>

enum { CALLER_MPI4PY = 1, CALLER_LIBMPI = 2, CALLER_OTHER = 3 };

static int rr_n_functions(void);
static const char *rr_function_name(int i);

#define RR_MAX_FUNCTIONS 1024
static uint64_t rr_visible[RR_MAX_FUNCTIONS];
static uint64_t rr_invisible[RR_MAX_FUNCTIONS];
static uint64_t rr_traced[RR_MAX_FUNCTIONS];
static volatile int rr_tracing;           /* ctrace.c: events recorded */
/* creplay.c: calls below Python recorded into a C log, or answered from one */
enum { RR_OFF = 0, RR_RECORD = 1, RR_REPLAY = 2 };
static volatile int rr_mode = RR_OFF;

/* direct-mapped cache: (return address << 2) | caller class, 0 = empty */
#define RR_CACHE 4096
static uint64_t rr_cache[RR_CACHE];

static int rr_classify(void *ret)
{
    uintptr_t a = (uintptr_t)ret;
    size_t slot = (a >> 4) % RR_CACHE;
    uint64_t e = __atomic_load_n(&rr_cache[slot], __ATOMIC_RELAXED);
    if (e && (e >> 2) == (uint64_t)a)
        return (int)(e & 3);
    Dl_info info;
    int cls = CALLER_OTHER;
    if (dladdr(ret, &info) && info.dli_fname) {
        const char *base = strrchr(info.dli_fname, '/');
        base = base ? base + 1 : info.dli_fname;
        if (strstr(info.dli_fname, "mpi4py") && strncmp(base, "MPI.", 4) == 0)
            cls = CALLER_MPI4PY;
        else if (strncmp(base, "libmpi", 6) == 0 || strncmp(base, "libpmpi", 7) == 0)
            cls = CALLER_LIBMPI;
    }
    __atomic_store_n(&rr_cache[slot], ((uint64_t)a << 2) | (uint64_t)cls, __ATOMIC_RELAXED);
    return cls;
}

static inline void rr_count(int id, void *ret)
{
    int cls = rr_classify(ret);
    if (cls == CALLER_MPI4PY)
        __atomic_fetch_add(&rr_visible[id], 1, __ATOMIC_RELAXED);
    else if (cls == CALLER_OTHER)
        __atomic_fetch_add(&rr_invisible[id], 1, __ATOMIC_RELAXED);
}

/* Count a call of a function the tracer records: whether to record it
 * (made below Python while tracing is on). */
static inline int rr_count_traced(int id, void *ret)
{
    int cls = rr_classify(ret);
    if (cls == CALLER_MPI4PY) {
        __atomic_fetch_add(&rr_visible[id], 1, __ATOMIC_RELAXED);
    } else if (cls == CALLER_OTHER) {
        if (rr_tracing) {
            __atomic_fetch_add(&rr_traced[id], 1, __ATOMIC_RELAXED);
            return 1;
        }
        __atomic_fetch_add(&rr_invisible[id], 1, __ATOMIC_RELAXED);
    }
    return 0;
}

/* Write "function<TAB>visible<TAB>invisible<TAB>traced" for every function
 * called (invisible: made below Python and not recorded);
 * called through ctypes by the tracer before it merges.  Returns 0 or -1. */
int repreplay_ccount_dump(const char *path)
{
    FILE *f = fopen(path, "w");
    if (!f)
        return -1;
    fprintf(f, "function\tvisible\tinvisible\ttraced\n");
    for (int i = 0; i < rr_n_functions(); i++) {
        uint64_t v = __atomic_load_n(&rr_visible[i], __ATOMIC_RELAXED);
        uint64_t n = __atomic_load_n(&rr_invisible[i], __ATOMIC_RELAXED);
        uint64_t t = __atomic_load_n(&rr_traced[i], __ATOMIC_RELAXED);
        if (v || n || t)
            fprintf(f, "%s\t%llu\t%llu\t%llu\n", rr_function_name(i), (unsigned long long)v,
                    (unsigned long long)n, (unsigned long long)t);
    }
    return fclose(f) ? -1 : 0;
}
