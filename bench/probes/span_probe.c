/* Span probe: which MPI function each call of an untraced run was, and
 * when it began and ended (wall clock and the process's CPU clock), taken
 * below Python, so that its computation spans (the time between two calls)
 * can be set beside a traced run's.  The fixed part of the PMPI shim that
 * bench/probes/span_probe.py generates; every wrapper calls rr_enter() before
 * PMPI_X and rr_leave(its index) after.
 *
 * The times go to a static table (no allocation: the application's heap is
 * what the comparison is about); calls beyond its size are counted, not
 * kept.  Nested calls (the MPI library calling MPI_ itself) keep the
 * outermost one only.
 */
#include <stdio.h>
#include <time.h>
#include <mpi.h>

#define RR_MAX_CALLS (1 << 21)
static double rr_t[RR_MAX_CALLS][5];
static long rr_n, rr_lost;
static int rr_depth;
static double rr_t0, rr_c0;

static double rr_clock(clockid_t which)
{
    struct timespec ts;
    clock_gettime(which, &ts);
    return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

static inline void rr_enter(void)
{
    if (rr_depth++ == 0) {
        rr_t0 = rr_clock(CLOCK_MONOTONIC);
        rr_c0 = rr_clock(CLOCK_PROCESS_CPUTIME_ID);
    }
}

static inline void rr_leave(int function)
{
    if (--rr_depth)
        return;
    if (rr_n < RR_MAX_CALLS) {
        rr_t[rr_n][3] = rr_clock(CLOCK_PROCESS_CPUTIME_ID);
        rr_t[rr_n][1] = rr_clock(CLOCK_MONOTONIC);
        rr_t[rr_n][0] = rr_t0;
        rr_t[rr_n][2] = rr_c0;
        rr_t[rr_n][4] = function;
        rr_n++;
    } else {
        rr_lost++;
    }
}

/* Write the calls' (begin, end, CPU clock at begin, at end, function's
 * index) as float64 rows; returns the number of
 * calls not kept (beyond the table), or -1 on a write error. */
long span_probe_dump(const char *path)
{
    FILE *f = fopen(path, "wb");
    if (!f)
        return -1;
    size_t ok = fwrite(rr_t, sizeof rr_t[0], (size_t)rr_n, f);
    if (fclose(f) || ok != (size_t)rr_n)
        return -1;
    return rr_lost;
}
