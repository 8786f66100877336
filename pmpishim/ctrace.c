/* C-level MPI tracer: the runtime of the traced wrappers that
 * pmpishim/build.py generates into the PMPI shim (after ccount.c).
 *
 * A call the shim classifies as made below Python (caller neither mpi4py
 * nor the MPI library) is recorded, while tracing is on, as one event in
 * the raw trace's record layout (contracts/raw_trace.py RECORD) in the
 * rank's raw/rNNNNNN.cev, with its variable-size parts as JSON side
 * records in raw/rNNNNNN.cside.  The merge interleaves these events with
 * the rank's Python-level ones in return order: one event stream.
 *
 * Ids live in name spaces of their own, so that nothing here needs the
 * Python tracer's counters: communicators created in C from RR_COMM_BASE,
 * requests made in C from RR_REQ_BASE, call sites (one per return address:
 * the calling library and the offset in it) from 0 in this file's own
 * side records.  Communicators the Python tracer registered are told to
 * the shim (rr_comm_known) with their trace id and key, so a C call on a
 * communicator made in Python carries the same id.
 *
 * Thread-safe: one mutex around the buffers and tables; the timing spans
 * are per thread.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#define RR_FLAG_ANY_SOURCE 1
#define RR_FLAG_ANY_TAG 2
#define RR_FLAG_NONE 8
#define RR_FLAG_BELOW_PYTHON 256      /* contracts/raw_trace.FLAG_BELOW_PYTHON */
#define RR_COMM_BASE (1LL << 30)
#define RR_REQ_BASE (1LL << 40)
#define RR_SHORT 20e-6                /* spans shorter than this count as all-CPU */
#define RR_FLUSH_SECONDS 0.25

typedef struct {
    int64_t op, comm, peer, tag, sbytes, rbytes, req, site, rpeer, rtag, newcomm, flags, polls;
    int64_t faults;                   /* -1: not counted below Python */
    double t_start, t_end, cpu_start, cpu_end, poll_cpu, poll_gap;
} rr_record;

/* rr_tracing: declared in ccount.c (the counter asks it) */
static pthread_mutex_t rr_mu = PTHREAD_MUTEX_INITIALIZER;
static int rr_fd = -1;
static FILE *rr_side = NULL;
static double rr_origin = 0, rr_last_flush = 0;
#define RR_BUF 4096
static rr_record rr_buf[RR_BUF];
static int rr_used = 0;
static int64_t rr_nevents = 0;
static int rr_write_failed = 0;
static int64_t rr_polls = 0;
static double rr_poll_t0, rr_poll_c0, rr_poll_last;

static inline double rr_wall(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static inline double rr_cpu(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* ---- timing: a call's span, the CPU clock read only around long ones */
typedef struct { double t, c; } rr_span;
static __thread double rr_last_end = 0, rr_last_cpu = 0;

static inline void rr_enter(rr_span *s)
{
    s->t = rr_wall();
    s->c = (s->t - rr_last_end < RR_SHORT) ? rr_last_cpu + (s->t - rr_last_end) : rr_cpu();
}

static void rr_put(const rr_span *s, void *ret, int64_t op, int64_t comm, int64_t peer,
                   int64_t tag, int64_t sb, int64_t rb, int64_t req, int64_t rpeer, int64_t rtag,
                   int64_t newcomm, int64_t flags, const char *extra);

/* ---- JSON side records ------------------------------------------------ */
static void rr_json_string(FILE *f, const char *s)
{
    fputc('"', f);
    for (; s && *s; s++) {
        unsigned char ch = (unsigned char)*s;
        if (ch == '"' || ch == '\\')
            fprintf(f, "\\%c", ch);
        else if (ch < 0x20)
            fprintf(f, "\\u%04x", ch);
        else
            fputc(ch, f);
    }
    fputc('"', f);
}

static void rr_json_ints(FILE *f, const int *v, int n)
{
    fputc('[', f);
    for (int i = 0; i < n; i++)
        fprintf(f, i ? ",%d" : "%d", v[i]);
    fputc(']', f);
}

/* ---- writing ------------------------------------------------------------ */
static void rr_flush_locked(void)
{
    if (rr_side && fflush(rr_side) != 0)     /* side records first: events refer to them */
        rr_write_failed = errno ? errno : EIO;
    const char *p = (const char *)rr_buf;
    size_t left = (size_t)rr_used * sizeof(rr_record);
    while (left > 0 && rr_fd >= 0 && !rr_write_failed) {
        ssize_t w = write(rr_fd, p, left);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            rr_write_failed = errno;
            break;
        }
        p += w;
        left -= (size_t)w;
    }
    rr_used = 0;
    rr_last_flush = rr_wall();
}

/* ---- call sites: the calling library and the offset in it -------------- */
#define RR_SITES 4096
static struct { void *ret; int64_t site; } rr_sites[RR_SITES];
static int64_t rr_nsites = 0;

static int64_t rr_site_locked(void *ret)
{
    uintptr_t h = ((uintptr_t)ret >> 2) * 2654435761u;
    for (unsigned probe = 0; probe < RR_SITES; probe++) {
        unsigned i = (unsigned)(h + probe) % RR_SITES;
        if (rr_sites[i].ret == ret)
            return rr_sites[i].site;
        if (rr_sites[i].ret == NULL) {
            Dl_info info;
            const char *file = "?", *fn = "?";
            uintptr_t off = (uintptr_t)ret;
            if (dladdr(ret, &info)) {
                if (info.dli_fname)
                    file = info.dli_fname;
                if (info.dli_sname)
                    fn = info.dli_sname;
                off = (uintptr_t)ret - (uintptr_t)info.dli_fbase;
            }
            int64_t site = rr_nsites++;
            rr_sites[i].ret = ret;
            rr_sites[i].site = site;
            if (rr_side) {
                fprintf(rr_side, "[[\"s\",%lld,", (long long)site);
                rr_json_string(rr_side, file);
                fprintf(rr_side, ",%llu,", (unsigned long long)off);
                rr_json_string(rr_side, fn);
                fputs("]]\n", rr_side);
            }
            return site;
        }
    }
    return -1;                                /* table full: no site */
}

/* ---- communicators ------------------------------------------------------ */
typedef struct {
    uint64_t handle;
    int64_t idx;
    char key[40];
    int known;          /* members looked up */
    int n;              /* peers: the members (the remote group of an intercomm) */
    int *peers;         /* as world ranks */
    int me;             /* this process's world rank */
    int live;
} rr_comm_t;

#define RR_COMMS 4096
static rr_comm_t rr_comms[RR_COMMS];
static int rr_ncomms = 0;
static int64_t rr_next_comm = RR_COMM_BASE;
static rr_comm_t rr_no_comm = {0, -1, "", 1, 0, NULL, -1, 0};
static MPI_Group rr_world_group = MPI_GROUP_NULL;

static uint64_t rr_handle_of_comm(MPI_Comm c)
{
    uint64_t h = 0;
    memcpy(&h, &c, sizeof c < sizeof h ? sizeof c : sizeof h);
    return h;
}

static int *rr_world_ranks(MPI_Group g, int *n)
{
    if (rr_world_group == MPI_GROUP_NULL)
        PMPI_Comm_group(MPI_COMM_WORLD, &rr_world_group);
    PMPI_Group_size(g, n);
    int *in = malloc(sizeof(int) * (size_t)(*n ? *n : 1));
    int *out = malloc(sizeof(int) * (size_t)(*n ? *n : 1));
    for (int i = 0; i < *n; i++)
        in[i] = i;
    PMPI_Group_translate_ranks(g, *n, in, rr_world_group, out);
    free(in);
    return out;
}

/* Members (world ranks) of ``c``, the peers its ranks name and its remote
 * group: filled into ``e``; returns the members (caller frees) and their count. */
static int *rr_fill_members(rr_comm_t *e, MPI_Comm c, int *nmembers, int **remote, int *nremote)
{
    MPI_Group g;
    int inter = 0, me;
    PMPI_Comm_group(c, &g);
    int *members = rr_world_ranks(g, nmembers);
    PMPI_Group_free(&g);
    PMPI_Comm_rank(c, &me);
    e->me = members[me];
    *remote = NULL;
    *nremote = 0;
    PMPI_Comm_test_inter(c, &inter);
    if (inter) {
        PMPI_Comm_remote_group(c, &g);
        *remote = rr_world_ranks(g, nremote);
        PMPI_Group_free(&g);
        e->n = *nremote;
        e->peers = malloc(sizeof(int) * (size_t)(*nremote ? *nremote : 1));
        memcpy(e->peers, *remote, sizeof(int) * (size_t)*nremote);
    } else {
        e->n = *nmembers;
        e->peers = malloc(sizeof(int) * (size_t)(*nmembers ? *nmembers : 1));
        memcpy(e->peers, members, sizeof(int) * (size_t)*nmembers);
    }
    e->known = 1;
    return members;
}

static rr_comm_t *rr_find_locked(uint64_t h)
{
    for (int i = rr_ncomms - 1; i >= 0; i--)
        if (rr_comms[i].live && rr_comms[i].handle == h)
            return &rr_comms[i];
    return NULL;
}

static rr_comm_t *rr_slot_locked(void)
{
    for (int i = 0; i < rr_ncomms; i++)
        if (!rr_comms[i].live)
            return &rr_comms[i];
    return rr_ncomms < RR_COMMS ? &rr_comms[rr_ncomms++] : NULL;
}

/* FNV-1a, 64 bits: the key of a communicator made in C */
static uint64_t rr_fnv(uint64_t h, const void *p, size_t n)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * 1099511628211ULL;
    return h;
}

#define RR_BASES 1024
static struct { uint64_t base; int count; } rr_bases[RR_BASES];

/* How many communicators this rank made before from the same parent, in
 * the same way, with the same members: the same on every member, as
 * creation is collective. */
static int rr_nth_locked(uint64_t base)
{
    for (unsigned probe = 0; probe < RR_BASES; probe++) {
        unsigned i = (unsigned)((base + probe) % RR_BASES);
        if (rr_bases[i].count == 0 || rr_bases[i].base == base) {
            rr_bases[i].base = base;
            return rr_bases[i].count++;
        }
    }
    return 0;
}

/* Register a communicator first seen in C: its id, key and side record.
 * ``parent`` NULL: one the tracer never saw made (a library's own). */
static rr_comm_t *rr_register_locked(MPI_Comm c, const rr_comm_t *parent, const char *how,
                                     const char *topo_json)
{
    rr_comm_t *stale = rr_find_locked(rr_handle_of_comm(c));
    if (stale)
        stale->live = 0;                      /* freed without our seeing it */
    rr_comm_t *e = rr_slot_locked();
    if (!e)
        return &rr_no_comm;
    free(e->peers);
    memset(e, 0, sizeof *e);
    e->handle = rr_handle_of_comm(c);
    e->idx = rr_next_comm++;
    e->live = 1;
    int nm, nr, *remote;
    int *members = rr_fill_members(e, c, &nm, &remote, &nr);
    uint64_t h = rr_fnv(1469598103934665603ULL, "C-level|", 8);
    if (remote) {
        /* both sides of an intercomm agree on the key: not the parent (each
         * side has its own), both groups in one order */
        int *lo = members, *hi = remote, nlo = nm, nhi = nr;
        if (nr < nm || (nr == nm && memcmp(remote, members, sizeof(int) * (size_t)nm) < 0)) {
            lo = remote; hi = members; nlo = nr; nhi = nm;
        }
        h = rr_fnv(h, how, strlen(how));
        h = rr_fnv(h, lo, sizeof(int) * (size_t)nlo);
        h = rr_fnv(h, hi, sizeof(int) * (size_t)nhi);
    } else {
        const char *pkey = parent ? parent->key : "none";
        h = rr_fnv(h, pkey, strlen(pkey));
        h = rr_fnv(h, how, strlen(how));
        h = rr_fnv(h, members, sizeof(int) * (size_t)nm);
    }
    int nth = rr_nth_locked(h);
    h = rr_fnv(h, &nth, sizeof nth);
    snprintf(e->key, sizeof e->key, "c%016llx", (unsigned long long)h);
    if (rr_side) {
        fprintf(rr_side, "[[\"c\",%lld,\"%s\",\"%s\",", (long long)e->idx, e->key,
                remote ? "Intercomm" : (topo_json ? "Cartcomm" : "Intracomm"));
        rr_json_ints(rr_side, members, nm);
        fputc(',', rr_side);
        if (remote)
            rr_json_ints(rr_side, remote, nr);
        else
            fputs("null", rr_side);
        fprintf(rr_side, ",%lld,", (long long)(parent ? parent->idx : -1));
        rr_json_string(rr_side, how);
        fprintf(rr_side, ",%s]]\n", topo_json ? topo_json : "null");
    }
    free(members);
    free(remote);
    return e;
}

/* The trace's record of communicator ``c`` (registered on first sight). */
static rr_comm_t *rr_comm_locked(MPI_Comm c)
{
    if (c == MPI_COMM_NULL)
        return &rr_no_comm;
    rr_comm_t *e = rr_find_locked(rr_handle_of_comm(c));
    if (!e)
        return rr_register_locked(c, NULL, "unknown", NULL);
    if (!e->known) {
        int nm, nr, *remote;
        free(rr_fill_members(e, c, &nm, &remote, &nr));
        free(remote);
    }
    return e;
}

static rr_comm_t *rr_comm(MPI_Comm c)
{
    pthread_mutex_lock(&rr_mu);
    rr_comm_t *e = rr_comm_locked(c);
    pthread_mutex_unlock(&rr_mu);
    return e;
}

static inline int64_t rr_peer(const rr_comm_t *e, int r)
{
    return (r >= 0 && r < e->n) ? e->peers[r] : -1;
}

static inline int64_t rr_root(const rr_comm_t *e, int root)
{
    if (root == MPI_ROOT)
        return e->me;
    return rr_peer(e, root);
}

static inline int rr_is_root(const rr_comm_t *e, int root)
{
    return root == MPI_ROOT || (root >= 0 && root < e->n && e->peers[root] == e->me);
}

/* Called by the Python tracer for each communicator it registers. */
void rr_comm_known(uint64_t handle, int64_t idx, const char *key)
{
    pthread_mutex_lock(&rr_mu);
    rr_comm_t *e = rr_find_locked(handle);
    if (!e)
        e = rr_slot_locked();
    if (e) {
        free(e->peers);
        memset(e, 0, sizeof *e);
        e->handle = handle;
        e->idx = idx;
        snprintf(e->key, sizeof e->key, "%s", key);
        e->live = 1;
    }
    pthread_mutex_unlock(&rr_mu);
}

/* A communicator freed (from Python or C): its handle may come back. */
void rr_comm_forget(uint64_t handle)
{
    pthread_mutex_lock(&rr_mu);
    rr_comm_t *e = rr_find_locked(handle);
    if (e)
        e->live = 0;
    pthread_mutex_unlock(&rr_mu);
}

/* ---- requests made in C ------------------------------------------------- */
typedef struct {
    uint64_t handle;
    int64_t id;
    int recv;           /* a wildcard receive: what matched is fixed up at completion
                         * (the others' source, tag and size are the posted ones, as
                         * the Python tracer records them) */
    const rr_comm_t *comm;
    int used;
} rr_req_t;

#define RR_REQS 65536
static rr_req_t rr_reqs[RR_REQS];
static int64_t rr_next_req = RR_REQ_BASE;

static uint64_t rr_handle_of_req(MPI_Request r)
{
    uint64_t h = 0;
    memcpy(&h, &r, sizeof r < sizeof h ? sizeof r : sizeof h);
    return h;
}

static int64_t rr_req_new(MPI_Request r, int recv, const rr_comm_t *comm)
{
    if (r == MPI_REQUEST_NULL)
        return -1;
    uint64_t h = rr_handle_of_req(r);
    pthread_mutex_lock(&rr_mu);
    int64_t id = rr_next_req++;
    size_t i = (size_t)((h * 11400714819323198485ULL) >> 48) % RR_REQS;
    /* A handle may be pending twice: MPICH hands every send that completed
     * at once the same handle.  Each gets an entry of its own, found in the
     * order made (linear probing keeps it; so does the deletion below). */
    for (size_t probe = 0; probe < RR_REQS; probe++, i = (i + 1) % RR_REQS)
        if (!rr_reqs[i].used) {
            rr_reqs[i] = (rr_req_t){h, id, recv, comm, 1};
            break;
        }
    pthread_mutex_unlock(&rr_mu);
    return id;
}

/* Persistent requests (Send_init/Recv_init family): what each start
 * begins, and the id of the one under way, which its completion takes. */
typedef struct {
    uint64_t handle;
    int64_t starts, peer, tag, sb, rb, flags, active;
    const rr_comm_t *comm;
    int used;
} rr_pers_t;

#define RR_PERS 4096
static rr_pers_t rr_pers[RR_PERS];
static int rr_npers = 0;          /* entries ever used: every completion looks here first */

static rr_pers_t *rr_pers_find_locked(uint64_t h)
{
    for (int i = 0; i < rr_npers; i++)
        if (rr_pers[i].used && rr_pers[i].handle == h)
            return &rr_pers[i];
    return NULL;
}

static void rr_pers_new(MPI_Request r, int64_t starts, const rr_comm_t *comm, int64_t peer,
                        int64_t tag, int64_t sb, int64_t rb, int64_t flags)
{
    if (r == MPI_REQUEST_NULL)
        return;
    uint64_t h = rr_handle_of_req(r);
    pthread_mutex_lock(&rr_mu);
    rr_pers_t *p = rr_pers_find_locked(h);          /* a freed one's handle, made again */
    for (int i = 0; !p && i < rr_npers; i++)        /* a freed one's entry */
        if (!rr_pers[i].used)
            p = &rr_pers[i];
    if (!p && rr_npers < RR_PERS)
        p = &rr_pers[rr_npers++];
    if (p)
        *p = (rr_pers_t){h, starts, peer, tag, sb, rb, flags, -1, comm, 1};
    pthread_mutex_unlock(&rr_mu);
}

/* A persistent request started: its start event, with a new id. */
static void rr_start(const rr_span *sp, void *ret, MPI_Request r)
{
    pthread_mutex_lock(&rr_mu);
    rr_pers_t *p = r == MPI_REQUEST_NULL ? NULL : rr_pers_find_locked(rr_handle_of_req(r));
    if (!p) {
        pthread_mutex_unlock(&rr_mu);
        return;
    }
    int64_t id = p->active = rr_next_req++;
    rr_pers_t info = *p;
    pthread_mutex_unlock(&rr_mu);
    char extra[64];
    snprintf(extra, sizeof extra, "[\"p\",%lld,null]", (long long)info.starts);
    rr_put(sp, ret, RR_OP_START, info.comm->idx, info.peer, info.tag, info.sb, info.rb, id, -1,
           -1, -1, info.flags, extra);
}

/* Look a request up (the oldest entry of its handle); ``take``: it
 * completed, remove it (backward-shift deletion keeps the linear probing
 * intact). */
static rr_req_t rr_req_find(MPI_Request r, int take)
{
    rr_req_t none = {0, -1, 0, NULL, 0};
    if (r == MPI_REQUEST_NULL)
        return none;
    uint64_t h = rr_handle_of_req(r);
    pthread_mutex_lock(&rr_mu);
    rr_pers_t *p = rr_pers_find_locked(h);
    if (p && p->active >= 0) {                   /* a started persistent request */
        rr_req_t found = {h, p->active, (p->flags & (RR_FLAG_ANY_SOURCE | RR_FLAG_ANY_TAG)) != 0,
                          p->comm, 1};
        if (take)
            p->active = -1;
        pthread_mutex_unlock(&rr_mu);
        return found;
    }
    size_t i = (size_t)((h * 11400714819323198485ULL) >> 48) % RR_REQS;
    for (size_t probe = 0; probe < RR_REQS && rr_reqs[i].used; probe++, i = (i + 1) % RR_REQS) {
        if (rr_reqs[i].handle != h)
            continue;
        rr_req_t found = rr_reqs[i];
        if (take) {
            size_t hole = i, j = i;
            rr_reqs[hole].used = 0;
            for (;;) {
                j = (j + 1) % RR_REQS;
                if (!rr_reqs[j].used)
                    break;
                size_t home = (size_t)((rr_reqs[j].handle * 11400714819323198485ULL) >> 48)
                              % RR_REQS;
                /* move j into the hole unless its home lies cyclically in (hole, j] */
                int stays = hole <= j ? (home > hole && home <= j) : (home > hole || home <= j);
                if (!stays) {
                    rr_reqs[hole] = rr_reqs[j];
                    rr_reqs[j].used = 0;
                    hole = j;
                }
            }
        }
        pthread_mutex_unlock(&rr_mu);
        return found;
    }
    pthread_mutex_unlock(&rr_mu);
    return none;
}

/* ---- events ------------------------------------------------------------- */
/* Bytes of ``count`` elements of ``t`` (the type's size as MPI_Count: a
 * large derived type's does not fit an int). */
static int64_t rr_bytes(int64_t count, MPI_Datatype t)
{
    MPI_Count size = 0;
    if (count <= 0 || t == MPI_DATATYPE_NULL || PMPI_Type_size_c(t, &size) != MPI_SUCCESS)
        return 0;
    return count * (int64_t)size;
}

static int64_t rr_sum_bytes_int(const int *counts, int n, MPI_Datatype t)
{
    int64_t total = 0;
    for (int i = 0; counts && i < n; i++)
        total += rr_bytes(counts[i], t);
    return total;
}

static int64_t rr_sum_bytes_count(const MPI_Count *counts, int n, MPI_Datatype t)
{
    int64_t total = 0;
    for (int i = 0; counts && i < n; i++)
        total += rr_bytes(counts[i], t);
    return total;
}

/* the large-count (_c) functions take MPI_Count arrays */
#define rr_sum_bytes(c, n, t) _Generic((c), const MPI_Count *: rr_sum_bytes_count, \
                                       MPI_Count *: rr_sum_bytes_count, \
                                       default: rr_sum_bytes_int)(c, n, t)

static int rr_wild(int source, int tag)
{
    return (source == MPI_ANY_SOURCE ? RR_FLAG_ANY_SOURCE : 0) |
           (tag == MPI_ANY_TAG ? RR_FLAG_ANY_TAG : 0);
}

/* What a completed receive or probe matched: world source, tag, bytes. */
static void rr_matched(const rr_comm_t *e, const MPI_Status *st, int64_t *src, int64_t *tag,
                       int64_t *n)
{
    int count = 0;
    *src = rr_peer(e, st->MPI_SOURCE);
    *tag = st->MPI_TAG;
    PMPI_Get_count(st, MPI_BYTE, &count);
    *n = count == MPI_UNDEFINED || count < 0 ? 0 : count;
}

/* The fix-up of a receive request at completion (what it matched). */
static void rr_fixup(const rr_req_t *q, const MPI_Status *st)
{
    if (q->id < 0 || !q->recv || !q->comm)
        return;
    int64_t src, tag, n;
    rr_matched(q->comm, st, &src, &tag, &n);
    pthread_mutex_lock(&rr_mu);
    if (rr_side)
        fprintf(rr_side, "[[\"f\",%lld,%lld,%lld,%lld]]\n", (long long)q->id, (long long)src,
                (long long)tag, (long long)n);
    pthread_mutex_unlock(&rr_mu);
}

/* Record one call.  ``extra``: the JSON of the event's extra side record
 * (a request list, per-peer counts) or NULL.  A poll that found nothing
 * (RR_FLAG_NONE) is folded into the next event, as the Python tracer does. */
static void rr_put(const rr_span *s, void *ret, int64_t op, int64_t comm, int64_t peer,
                   int64_t tag, int64_t sb, int64_t rb, int64_t req, int64_t rpeer, int64_t rtag,
                   int64_t newcomm, int64_t flags, const char *extra)
{
    double t = rr_wall(), t0 = s->t, c0 = s->c;
    double c = (t - t0 < RR_SHORT) ? c0 + (t - t0) : rr_cpu();
    rr_last_end = t;
    rr_last_cpu = c;
    pthread_mutex_lock(&rr_mu);
    if (!rr_tracing || rr_fd < 0) {
        pthread_mutex_unlock(&rr_mu);
        return;
    }
    if (flags & RR_FLAG_NONE) {
        if (rr_polls++ == 0) {
            rr_poll_t0 = t0;
            rr_poll_c0 = c0;
        }
        rr_poll_last = t0;
        pthread_mutex_unlock(&rr_mu);
        return;
    }
    int64_t site = rr_site_locked(ret);
    if (extra && rr_side)
        fprintf(rr_side, "[[\"x\",%lld,%s]]\n", (long long)rr_nevents, extra);
    rr_record *r = &rr_buf[rr_used++];
    r->op = op; r->comm = comm; r->peer = peer; r->tag = tag;
    r->sbytes = sb; r->rbytes = rb; r->req = req; r->site = site;
    r->rpeer = rpeer; r->rtag = rtag; r->newcomm = newcomm;
    r->flags = flags | RR_FLAG_BELOW_PYTHON;
    r->polls = rr_polls;
    r->faults = -1;
    r->poll_cpu = r->poll_gap = 0.0;
    if (rr_polls) {
        r->poll_cpu = c0 > rr_poll_c0 ? c0 - rr_poll_c0 : 0.0;
        r->poll_gap = t0 > rr_poll_last ? t0 - rr_poll_last : 0.0;
        t0 = rr_poll_t0;
        c0 = rr_poll_c0;
        rr_polls = 0;
    }
    r->t_start = t0 - rr_origin;
    r->t_end = t - rr_origin;
    r->cpu_start = c0;
    r->cpu_end = c;
    rr_nevents++;
    if (rr_used >= RR_BUF || t - rr_last_flush > RR_FLUSH_SECONDS) {
        rr_flush_locked();
        rr_last_end = rr_wall();           /* writing is the tracer's time */
        rr_last_cpu = rr_cpu();
    }
    pthread_mutex_unlock(&rr_mu);
}

/* A JSON list of completed request ids ("r" extra), or NULL if none;
 * caller frees.  Formatted by hand: snprintf per id cost a Waitall of two
 * requests most of a microsecond. */
static char *rr_ids_json(const int64_t *ids, int n)
{
    char *out = malloc(16 + (size_t)n * 22), *w = out;
    int any = 0;
    memcpy(w, "[\"r\",[", 6);
    w += 6;
    for (int i = 0; i < n; i++) {
        if (ids[i] < 0)
            continue;
        if (any)
            *w++ = ',';
        char digits[24];
        int k = 0;
        uint64_t v = (uint64_t)ids[i];
        do {
            digits[k++] = (char)('0' + v % 10);
            v /= 10;
        } while (v);
        while (k)
            *w++ = digits[--k];
        any = 1;
    }
    memcpy(w, "]]", 3);
    if (!any) {
        free(out);
        return NULL;
    }
    return out;
}

/* Per-peer byte counts of a v-collective ("c" extra): either side may be
 * NULL (null in JSON); caller frees. */
static char *rr_counts_json_count(const MPI_Count *sc, MPI_Datatype st, const MPI_Count *rc,
                                  MPI_Datatype rt, int n)
{
    size_t cap = 32 + (size_t)n * 44, len = 0;
    char *out = malloc(cap);
    len += (size_t)snprintf(out, cap, "[\"c\",");
    for (int side = 0; side < 2; side++) {
        const MPI_Count *v = side ? rc : sc;
        MPI_Datatype t = side ? rt : st;
        if (!v) {
            len += (size_t)snprintf(out + len, cap - len, "null");
        } else {
            len += (size_t)snprintf(out + len, cap - len, "[");
            for (int i = 0; i < n; i++)
                len += (size_t)snprintf(out + len, cap - len, i ? ",%lld" : "%lld",
                                        (long long)rr_bytes(v[i], t));
            len += (size_t)snprintf(out + len, cap - len, "]");
        }
        len += (size_t)snprintf(out + len, cap - len, side ? "]" : ",");
    }
    return out;
}

static char *rr_counts_json_int(const int *sc, MPI_Datatype st, const int *rc, MPI_Datatype rt,
                                int n)
{
    MPI_Count *a = sc ? malloc(sizeof(MPI_Count) * (size_t)(n > 0 ? n : 1)) : NULL;
    MPI_Count *b = rc ? malloc(sizeof(MPI_Count) * (size_t)(n > 0 ? n : 1)) : NULL;
    for (int i = 0; i < n; i++) {
        if (a)
            a[i] = sc[i];
        if (b)
            b[i] = rc[i];
    }
    char *out = rr_counts_json_count(a, st, b, rt, n);
    free(a);
    free(b);
    return out;
}

/* dispatched on whichever side is not NULL (a conditional with a null
 * pointer constant has the other operand's type) */
#define rr_counts_json(sc, st, rc, rt, n) \
    _Generic((1 ? (sc) : (rc)), const MPI_Count *: rr_counts_json_count, \
             MPI_Count *: rr_counts_json_count, default: rr_counts_json_int)(sc, st, rc, rt, n)

/* The statuses to hand MPI where the caller passed none: a completion must
 * read what its receives matched. */
static MPI_Status *rr_statuses(MPI_Status *given, int n, MPI_Status *local, int nlocal)
{
    if (given != MPI_STATUSES_IGNORE)
        return given;
    return n <= nlocal ? local : malloc(sizeof(MPI_Status) * (size_t)n);
}

static void rr_statuses_done(MPI_Status *used, MPI_Status *given, MPI_Status *local)
{
    if (used != given && used != local)
        free(used);
}

/* ---- control from the Python tracer --------------------------------------- */

/* Start tracing into the rank's raw files; 0 or an errno. */
int rr_trace_start(const char *events_path, const char *side_path, double origin)
{
    pthread_mutex_lock(&rr_mu);
    int fd = open(events_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    FILE *side = fd >= 0 ? fopen(side_path, "we") : NULL;
    if (fd < 0 || !side) {
        int e = errno ? errno : EIO;
        if (fd >= 0)
            close(fd);
        pthread_mutex_unlock(&rr_mu);
        return e;
    }
    rr_fd = fd;
    rr_side = side;
    rr_origin = origin;
    rr_used = 0;
    rr_nevents = 0;
    rr_polls = 0;
    rr_write_failed = 0;
    rr_last_flush = rr_wall();
    rr_tracing = 1;
    pthread_mutex_unlock(&rr_mu);
    return 0;
}

/* Write what is buffered (the watcher thread calls this too). */
void rr_trace_flush(void)
{
    pthread_mutex_lock(&rr_mu);
    if (rr_tracing)
        rr_flush_locked();
    pthread_mutex_unlock(&rr_mu);
}

/* Stop tracing; returns 0 or the errno of a failed write. */
int rr_trace_stop(void)
{
    pthread_mutex_lock(&rr_mu);
    if (rr_tracing) {
        rr_flush_locked();
        rr_tracing = 0;
        if (rr_side && fclose(rr_side) != 0 && !rr_write_failed)
            rr_write_failed = errno ? errno : EIO;
        if (rr_fd >= 0 && close(rr_fd) != 0 && !rr_write_failed)
            rr_write_failed = errno;
        rr_side = NULL;
        rr_fd = -1;
    }
    int e = rr_write_failed;
    pthread_mutex_unlock(&rr_mu);
    return e;
}

/* Events recorded so far. */
int64_t rr_trace_count(void)
{
    return rr_nevents;
}

/* The topology side record of a Cartesian communicator made in C: its
 * neighbours (for each dimension the one below, then the one above, as
 * world ranks, -1 for none), dims, periods and coordinates; caller frees. */
static char *rr_cart_json(MPI_Comm c)
{
    int nd = 0, n = 0, me = 0;
    PMPI_Cartdim_get(c, &nd);
    int *dims = calloc((size_t)nd + 1, sizeof(int)), *periods = calloc((size_t)nd + 1, sizeof(int));
    int *coords = calloc((size_t)nd + 1, sizeof(int)), *near = calloc(2 * (size_t)nd + 1, sizeof(int));
    PMPI_Comm_rank(c, &me);
    PMPI_Cart_get(c, nd, dims, periods, coords);
    MPI_Group g;
    PMPI_Comm_group(c, &g);
    int *world = rr_world_ranks(g, &n);
    PMPI_Group_free(&g);
    for (int d = 0; d < nd; d++) {
        int below = MPI_PROC_NULL, above = MPI_PROC_NULL;
        PMPI_Cart_shift(c, d, 1, &below, &above);
        near[2 * d] = below >= 0 && below < n ? world[below] : -1;
        near[2 * d + 1] = above >= 0 && above < n ? world[above] : -1;
    }
    size_t cap = 128 + (size_t)nd * 80;
    char *out = malloc(cap);
    size_t len = 0;
    const char *names[] = {"sources", "destinations"};
    len += (size_t)snprintf(out + len, cap - len, "{");
    for (int k = 0; k < 2; k++) {
        len += (size_t)snprintf(out + len, cap - len, "\"%s\":[", names[k]);
        for (int i = 0; i < 2 * nd; i++)
            len += (size_t)snprintf(out + len, cap - len, i ? ",%d" : "%d", near[i]);
        len += (size_t)snprintf(out + len, cap - len, "],");
    }
    int *lists[] = {dims, periods, coords};
    const char *keys[] = {"dims", "periods", "coords"};
    for (int k = 0; k < 3; k++) {
        len += (size_t)snprintf(out + len, cap - len, "\"%s\":[", keys[k]);
        for (int i = 0; i < nd; i++) {
            if (k == 1)
                len += (size_t)snprintf(out + len, cap - len, i ? ",%s" : "%s",
                                        lists[k][i] ? "true" : "false");
            else
                len += (size_t)snprintf(out + len, cap - len, i ? ",%d" : "%d", lists[k][i]);
        }
        len += (size_t)snprintf(out + len, cap - len, k < 2 ? "]," : "]}");
    }
    free(dims); free(periods); free(coords); free(near); free(world);
    return out;
}

/* ---- a compiled program traced without Python ---------------------------
 * `instrument trace -o DIR ./a.out` preloads this shim into the program
 * with REPREPLAY_NATIVE_TRACE=DIR: tracing then starts when the program
 * initialises MPI and stops at its MPI_Finalize, writing what the Python
 * tracer writes for a rank (its status file, its events, its call counts);
 * the launcher merges.  Without that variable these wrappers only pass on. */
static char rr_native_dir[4096];
static int rr_native_rank = -1;
int repreplay_ccount_dump(const char *path);

static void rr_native_status(const char *status, int complete)
{
    char path[4200], host[256] = "?";
    gethostname(host, sizeof host - 1);
    snprintf(path, sizeof path, "%s/raw/r%06d.json", rr_native_dir, rr_native_rank);
    FILE *f = fopen(path, "w");
    if (!f)
        return;
    fprintf(f, "{\"rank\": %d, \"host\": ", rr_native_rank);
    rr_json_string(f, host);
    fprintf(f, ", \"pid\": %d, \"complete\": %s, \"status\": \"%s\"", (int)getpid(),
            complete ? "true" : "false", status);
    if (complete || strcmp(status, "running") != 0)
        fprintf(f, ", \"events\": %lld, \"unmodelled\": {}", (long long)rr_nevents);
    fputs("}\n", f);
    fclose(f);
}

/* creplay.c: a compiled program's calls recorded or answered (no Python) */
static void rr_native_log_start(void);
static void rr_native_log_finish(void);

/* Called when the application initialises MPI itself, from C (PETSc's
 * PetscInitialize): the Python tracer sets itself up there. */
static void (*rr_on_init)(void);

void rr_set_on_init(void (*f)(void))
{
    rr_on_init = f;
}

static void rr_initialised(void *ret)
{
    void (*f)(void) = rr_on_init;
    if (f && rr_classify(ret) != CALLER_MPI4PY) {
        rr_on_init = NULL;
        f();
    }
}

static void rr_native_start(void *ret)
{
    const char *dir = getenv("REPREPLAY_NATIVE_TRACE");
    if (!dir || !*dir || rr_native_rank >= 0)
        return;
    snprintf(rr_native_dir, sizeof rr_native_dir, "%s", dir);
    PMPI_Comm_rank(MPI_COMM_WORLD, &rr_native_rank);
    PMPI_Barrier(MPI_COMM_WORLD);              /* a common time origin for all ranks */
    double origin = rr_wall();
    char ev[4200], side[4200];
    snprintf(ev, sizeof ev, "%s/raw/r%06d.cev", dir, rr_native_rank);
    snprintf(side, sizeof side, "%s/raw/r%06d.cside", dir, rr_native_rank);
    rr_native_status("running", 0);
    if (rr_trace_start(ev, side, origin) != 0) {
        fprintf(stderr, "instrument trace: rank %d: cannot write %s\n", rr_native_rank, ev);
        PMPI_Abort(MPI_COMM_WORLD, 2);
    }
    pthread_mutex_lock(&rr_mu);
    rr_comm_t *world = rr_register_locked(MPI_COMM_WORLD, NULL, "world", NULL);
    rr_register_locked(MPI_COMM_SELF, NULL, "self", NULL);
    pthread_mutex_unlock(&rr_mu);
    rr_span sp = {origin, rr_cpu()};
    rr_put(&sp, ret, RR_OP_INIT, world->idx, -1, -1, 0, 0, -1, -1, -1, -1, 0, NULL);
}

int MPI_Init(int *argc, char ***argv)
{
    int rc = PMPI_Init(argc, argv);
    if (rc == MPI_SUCCESS) {
        rr_native_log_start();
        rr_native_start(__builtin_return_address(0));
        rr_initialised(__builtin_return_address(0));
    }
    return rc;
}

int MPI_Init_thread(int *argc, char ***argv, int required, int *provided)
{
    int rc = PMPI_Init_thread(argc, argv, required, provided);
    if (rc == MPI_SUCCESS) {
        rr_native_log_start();
        rr_native_start(__builtin_return_address(0));
        rr_initialised(__builtin_return_address(0));
    }
    return rc;
}

int MPI_Finalize(void)
{
    rr_native_log_finish();
    if (rr_native_rank >= 0 && rr_tracing) {
        rr_span sp;
        rr_enter(&sp);
        pthread_mutex_lock(&rr_mu);
        rr_comm_t *world = rr_comm_locked(MPI_COMM_WORLD);
        pthread_mutex_unlock(&rr_mu);
        rr_put(&sp, __builtin_return_address(0), RR_OP_FINALIZE, world->idx, -1, -1, 0, 0, -1,
               -1, -1, -1, 0, NULL);
        int failed = rr_trace_stop();
        char path[4200];
        snprintf(path, sizeof path, "%s/raw/ccount%d.tsv", rr_native_dir, rr_native_rank);
        repreplay_ccount_dump(path);
        rr_native_status(failed ? "failed: cannot write the trace's events" : "complete",
                         !failed);
    }
    return PMPI_Finalize();
}
