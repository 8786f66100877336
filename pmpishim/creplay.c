/* C-level record and replay: the runtime of the record and replay bodies
 * that pmpishim/cwrappers_log.py generates into the PMPI shim (after
 * ccount.c and ctrace.c).
 *
 * Recording (``instrument record`` on a recorded rank): a call made below
 * Python is made for real, then logged in the rank's C log, LOG_DIR/
 * rank<R>.clog: the call's op and arguments (for the divergence check)
 * and what MPI answered: received bytes (packed with MPI_Pack, so derived
 * datatypes are logged as what they select), statuses, which requests a
 * completion completed, probe outcomes, the shape of every communicator
 * created.  Polls that found nothing are not logged (the replay answers
 * them empty, as the Python replay does).
 *
 * Replaying (``python -m replay``, one process, MPI a singleton): the same
 * call is answered from the log and never reaches MPI: a send goes
 * nowhere, a receive or collective unpacks the logged bytes into the
 * caller's buffers, a communicator reports the logged size, rank and
 * Cartesian shape.  Communicators are real handles here (copies of
 * MPI_COMM_SELF, so attribute caching and datatype calls of libraries
 * work on them); requests are handles MPI never made (RP_FAKE_REQ).  Each
 * answered call's entry and exit times are kept (rp_rows) for the Python
 * replay to interleave with its own.
 *
 * The log (little-endian, one per recorded rank):
 *   header  "RRCLOG01" i32 rank i32 size
 *   record  rl_head, then nx x i64 (results), then plen bytes (payload)
 *   end     a record of op -1 whose tag is 0 (complete) or 1 (failed)
 * Each record's head and results are checksummed (FNV-1a); payload sizes
 * are checked against the buffers they go to.
 */
#include <stdarg.h>
#include <sys/mman.h>
#include <sys/stat.h>

#define RL_MAGIC 0x474c4352u          /* "RCLG" */
#define RP_FAKE_REQ 0x1c000000        /* | index: no handle MPICH makes */
#define RP_MAX_FAKE_REQ (1 << 20)

typedef struct {
    uint32_t magic;
    int32_t op, peer, tag, csize, nx;
    int64_t nbytes;
    uint64_t plen;
    uint32_t sum, pad;
} rl_head;

typedef struct {
    void *buf;
    MPI_Count count;
    MPI_Datatype type;
} rr_piece;

static int rl_rank = -1;

static void rr_fatal(const char *fmt, ...) __attribute__((noreturn, format(printf, 1, 2)));

static void rr_fatal(const char *fmt, ...)
{
    /* one write: the ranks of a job share the terminal */
    char msg[2048];
    int n = snprintf(msg, sizeof msg, "%s: error: rank %d: ",
                     rr_mode == RR_REPLAY ? "replay" : "instrument record", rl_rank);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg + n, sizeof msg - (size_t)n - 1, fmt, ap);
    va_end(ap);
    size_t len = strlen(msg);
    msg[len++] = '\n';
    fflush(stderr);
    ssize_t w = write(2, msg, len);
    (void)w;                                  /* nothing left to tell if it failed */
    _exit(2);
}

/* "MPI_X (from libfoo.so)": the call as messages name it */
static const char *rr_where(void *ret, const char *fn)
{
    static __thread char out[600];
    Dl_info info;
    const char *lib = "?";
    if (dladdr(ret, &info) && info.dli_fname) {
        lib = strrchr(info.dli_fname, '/');
        lib = lib ? lib + 1 : info.dli_fname;
    }
    snprintf(out, sizeof out, "MPI_%s (called from %s)", fn, lib);
    return out;
}

/* A function the C log cannot answer, called below Python in record or
 * replay mode: stop with what and where, before anything is wrong. */
static void rr_unloggable(int id, void *ret)
{
    const char *name = rr_function_name(id);
    rr_fatal("%s was called below Python; the C-level %s cannot %s it (logged and answered "
             "are point-to-point, probes, completions, persistent requests, the collectives "
             "but neighbourhood ones and Alltoallw, communicator creation and Cartesian "
             "queries)", rr_where(ret, name + 4), rr_mode == RR_REPLAY ? "replay" : "recorder",
             rr_mode == RR_REPLAY ? "answer" : "log");
}

static uint32_t rl_fnv32(uint32_t h, const void *p, size_t n)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * 16777619u;
    return h;
}

static uint32_t rl_checksum(const rl_head *h, const int64_t *x)
{
    rl_head c = *h;
    c.sum = 0;
    uint32_t s = rl_fnv32(2166136261u, &c, sizeof c);
    return rl_fnv32(s, x, sizeof(int64_t) * (size_t)(h->nx > 0 ? h->nx : 0));
}

/* ==== recording ======================================================== */
static FILE *rl_f;
static int64_t rl_records;
static char rl_path[4096];

/* the size of ``comm`` as the divergence check compares it */
static int rl_csize(MPI_Comm comm)
{
    int n = -1;
    if (comm != MPI_COMM_NULL)
        PMPI_Comm_size(comm, &n);
    return n;
}

static void rl_write_locked(int op, int peer, int tag, int csize, int64_t nbytes,
                            const int64_t *x, int nx, const void *payload, uint64_t plen)
{
    if (!rl_f)
        return;
    rl_head h = {RL_MAGIC, op, peer, tag, csize, nx, nbytes, plen, 0, 0};
    h.sum = rl_checksum(&h, x);
    if (fwrite(&h, sizeof h, 1, rl_f) != 1 ||
        (nx && fwrite(x, sizeof(int64_t), (size_t)nx, rl_f) != (size_t)nx) ||
        (plen && fwrite(payload, 1, plen, rl_f) != plen))
        rr_fatal("%s: cannot write the C-level message log (%s)", rl_path,
                 strerror(errno ? errno : EIO));
    rl_records++;
}

static void rl_write(int op, int peer, int tag, int csize, int64_t nbytes, const int64_t *x,
                     int nx, const void *payload, uint64_t plen)
{
    pthread_mutex_lock(&rr_mu);
    rl_write_locked(op, peer, tag, csize, nbytes, x, nx, payload, plen);
    pthread_mutex_unlock(&rr_mu);
}

/* The packed bytes of ``pieces``; caller frees. */
static char *rl_pack(const rr_piece *pieces, int n, uint64_t *len)
{
    MPI_Count cap = 0, one;
    for (int i = 0; i < n; i++) {
        if (pieces[i].count <= 0 || pieces[i].buf == NULL)
            continue;
        PMPI_Pack_size_c(pieces[i].count, pieces[i].type, MPI_COMM_SELF, &one);
        cap += one;
    }
    char *out = malloc((size_t)(cap > 0 ? cap : 1));
    MPI_Count pos = 0;
    for (int i = 0; i < n; i++)
        if (pieces[i].count > 0 && pieces[i].buf != NULL)
            PMPI_Pack_c(pieces[i].buf, pieces[i].count, pieces[i].type, out, cap, &pos,
                        MPI_COMM_SELF);
    *len = (uint64_t)pos;
    return out;
}

/* A status as logged: source (in the communicator), tag, bytes. */
static void rl_status(const MPI_Status *st, int64_t *x)
{
    int count = 0;
    x[0] = st->MPI_SOURCE;
    x[1] = st->MPI_TAG;
    PMPI_Get_count(st, MPI_BYTE, &count);
    x[2] = count == MPI_UNDEFINED ? -1 : count;
}

/* The elements a receive of ``type`` got: what is packed. */
static MPI_Count rl_received(const MPI_Status *st, MPI_Count posted, MPI_Datatype type)
{
    MPI_Count n = 0;
    if (PMPI_Get_count_c(st, type, &n) != MPI_SUCCESS || n == MPI_UNDEFINED || n < 0 ||
        n > posted)
        return posted;
    return n;
}

/* pending requests of this rank whose completion delivers data: receives
 * and nonblocking collectives (their output pieces), persistent receives
 * (kept until freed) */
typedef struct {
    uint64_t handle;
    rr_piece *pieces;
    int n, used, persistent, recv;
} rl_req_t;

#define RL_REQS 65536
static rl_req_t rl_reqs[RL_REQS];
static int rl_nreqs;                    /* slots ever used */

static rl_req_t *rl_req_find_locked(uint64_t h)
{
    for (int i = rl_nreqs - 1; i >= 0; i--)
        if (rl_reqs[i].used && rl_reqs[i].handle == h)
            return &rl_reqs[i];
    return NULL;
}

static void rl_req_add(MPI_Request r, const rr_piece *pieces, int n, int persistent, int recv)
{
    if (r == MPI_REQUEST_NULL)
        return;
    pthread_mutex_lock(&rr_mu);
    rl_req_t *e = NULL;
    for (int i = rl_nreqs - 1; i >= 0 && !e; i--)
        if (!rl_reqs[i].used)
            e = &rl_reqs[i];
    if (!e && rl_nreqs < RL_REQS)
        e = &rl_reqs[rl_nreqs++];
    if (!e) {
        pthread_mutex_unlock(&rr_mu);
        rr_fatal("more than %d receives pending below Python", RL_REQS);
    }
    e->handle = rr_handle_of_req(r);
    e->pieces = malloc(sizeof(rr_piece) * (size_t)(n > 0 ? n : 1));
    memcpy(e->pieces, pieces, sizeof(rr_piece) * (size_t)n);
    e->n = n;
    e->used = 1;
    e->persistent = persistent;
    e->recv = recv;
    pthread_mutex_unlock(&rr_mu);
}

static void rl_req_drop_locked(rl_req_t *e)
{
    free(e->pieces);
    e->pieces = NULL;
    e->used = 0;
}

/* Blocking point-to-point and collectives: the call's record, with what it
 * received (``pieces``, packed) and its status (``st``, or NULL). */
static void rl_call(int op, int peer, int tag, MPI_Comm comm, int64_t nbytes,
                    const rr_piece *pieces, int n, const MPI_Status *st)
{
    int64_t x[3];
    int nx = 0;
    rr_piece got = {0};
    if (st) {
        rl_status(st, x);
        nx = 3;
        if (n == 1) {                         /* a receive: what arrived of what was posted */
            got = pieces[0];
            got.count = rl_received(st, got.count, got.type);
            pieces = &got;
        }
    }
    uint64_t plen = 0;
    char *p = n ? rl_pack(pieces, n, &plen) : NULL;
    rl_write(op, peer, tag, rl_csize(comm), nbytes, x, nx, p, plen);
    free(p);
}

/* A nonblocking call or persistent init: its record, and what its
 * completion will deliver. */
static void rl_post(int op, int peer, int tag, MPI_Comm comm, int64_t nbytes, MPI_Request r,
                    const rr_piece *pieces, int n, int persistent, int recv)
{
    rl_write(op, peer, tag, rl_csize(comm), nbytes, NULL, 0, NULL, 0);
    if (n || persistent)
        rl_req_add(r, pieces, n, persistent, recv);
}

/* A probe that found a message (one that found none is not logged). */
static void rl_probe(int op, int peer, int tag, MPI_Comm comm, const MPI_Status *st)
{
    int64_t x[3];
    rl_status(st, x);
    rl_write(op, peer, tag, rl_csize(comm), 0, x, 3, NULL, 0);
}

/* A completion call that completed something: for each completed request
 * (its index among ``handles``, the handles before the call) its status
 * and what it delivered. */
static void rl_complete(int op, int n, const MPI_Request *handles, const int *done, int k,
                        const MPI_Status *statuses)
{
    int64_t *x = malloc(sizeof(int64_t) * (size_t)(1 + 5 * k));
    char **parts = malloc(sizeof(char *) * (size_t)(k > 0 ? k : 1));
    uint64_t total = 0;
    x[0] = k;
    pthread_mutex_lock(&rr_mu);
    for (int j = 0; j < k; j++) {
        int i = done[j];
        int64_t *y = x + 1 + 5 * j;
        y[0] = i;
        y[1] = y[2] = y[3] = -1;
        y[4] = 0;
        parts[j] = NULL;
        rl_req_t *e = handles[i] == MPI_REQUEST_NULL ? NULL
                      : rl_req_find_locked(rr_handle_of_req(handles[i]));
        if (!e)
            continue;
        rl_status(&statuses[j], y + 1);
        if (e->n) {
            rr_piece got = e->pieces[0];
            const rr_piece *ps = e->pieces;
            if (e->recv && e->n == 1) {
                got.count = rl_received(&statuses[j], got.count, got.type);
                ps = &got;
            }
            uint64_t len = 0;
            parts[j] = rl_pack(ps, e->n, &len);
            y[4] = (int64_t)len;
            total += len;
        }
        if (!e->persistent)
            rl_req_drop_locked(e);
    }
    char *payload = malloc(total ? total : 1), *w = payload;
    for (int j = 0; j < k; j++) {
        if (parts[j])
            memcpy(w, parts[j], (size_t)x[1 + 5 * j + 4]);
        w += x[1 + 5 * j + 4];
        free(parts[j]);
    }
    rl_write_locked(op, -1, -1, -1, n, x, 1 + 5 * k, payload, total);
    pthread_mutex_unlock(&rr_mu);
    free(payload);
    free(parts);
    free(x);
}

/* A communicator created: its shape (null; size, rank; Cartesian dims,
 * periods, coordinates; its members as world ranks). */
static void rl_create(int op, MPI_Comm parent, MPI_Comm made)
{
    int64_t small[4 + 3 * 16 + 64], *x = small;
    int nx = 1;
    x[0] = made == MPI_COMM_NULL;
    if (made != MPI_COMM_NULL) {
        int size, rank, topo = MPI_UNDEFINED, nd = 0, inter = 0;
        PMPI_Comm_test_inter(made, &inter);
        if (inter)
            rr_fatal("an intercommunicator made below Python (the C log keeps intra ones)");
        PMPI_Comm_size(made, &size);
        PMPI_Comm_rank(made, &rank);
        PMPI_Topo_test(made, &topo);
        if (topo == MPI_CART)
            PMPI_Cartdim_get(made, &nd);
        if (nd > 16)
            rr_fatal("a Cartesian communicator of %d dimensions (the C log keeps 16)", nd);
        if (4 + 3 * nd + size > (int)(sizeof small / sizeof small[0]))
            x = malloc(sizeof(int64_t) * (size_t)(4 + 3 * nd + size));
        x[0] = 0;
        x[1] = size;
        x[2] = rank;
        x[3] = nd;
        if (nd) {
            int dims[16], periods[16], coords[16];
            PMPI_Cart_get(made, nd, dims, periods, coords);
            for (int d = 0; d < nd; d++) {
                x[4 + d] = dims[d];
                x[4 + nd + d] = periods[d];
                x[4 + 2 * nd + d] = coords[d];
            }
        }
        /* the members as world ranks: groups made from it are answered */
        MPI_Group g;
        int n = 0;
        PMPI_Comm_group(made, &g);
        int *world = rr_world_ranks(g, &n);
        PMPI_Group_free(&g);
        for (int i = 0; i < size; i++)
            x[4 + 3 * nd + i] = world[i];
        free(world);
        nx = 4 + 3 * nd + size;
    }
    rl_write(op, -1, -1, rl_csize(parent), 0, x, nx, NULL, 0);
    if (x != small)
        free(x);
}

/* A persistent request started (its completion delivers what its init
 * registered). */
static void rl_start(void)
{
    rl_write(RR_OP_START, -1, -1, -1, 0, NULL, 0, NULL, 0);
}

/* A persistent request freed: its entry goes. */
static void rl_request_free(MPI_Request r)
{
    if (r == MPI_REQUEST_NULL)
        return;
    pthread_mutex_lock(&rr_mu);
    rl_req_t *e = rl_req_find_locked(rr_handle_of_req(r));
    if (e && e->persistent)
        rl_req_drop_locked(e);
    pthread_mutex_unlock(&rr_mu);
}

/* Start recording this rank's calls below Python into ``path``; 0 or an errno. */
int rl_record_start(const char *path, int rank, int size)
{
    FILE *f = fopen(path, "we");
    if (!f)
        return errno ? errno : EIO;
    snprintf(rl_path, sizeof rl_path, "%s", path);
    int32_t h[2] = {rank, size};
    if (fwrite("RRCLOG01", 8, 1, f) != 1 || fwrite(h, sizeof h, 1, f) != 1) {
        fclose(f);
        return EIO;
    }
    rl_rank = rank;
    rl_f = f;
    rl_records = 0;
    rr_mode = RR_RECORD;
    return 0;
}

/* Stop recording: the end record; returns the records written, or -1 if
 * the log could not be completed. */
int64_t rl_record_stop(int complete)
{
    pthread_mutex_lock(&rr_mu);
    int64_t n = -1;
    if (rl_f) {
        rr_mode = RR_OFF;
        if (rl_records == 0) {
            /* nothing was called below Python: the caller removes the file,
             * whatever became of it (a full disk is the message log's to say) */
            fclose(rl_f);
            n = 0;
        } else {
            int64_t calls = rl_records;
            rl_write_locked(-1, -1, complete ? 0 : 1, -1, 0, NULL, 0, NULL, 0);
            n = fclose(rl_f) == 0 ? calls : -1;   /* a failed write stopped the run */
        }
        rl_f = NULL;
    }
    pthread_mutex_unlock(&rr_mu);
    return n;
}

/* ==== replaying ========================================================= */
static const char *rp_map;
static size_t rp_len, rp_pos;
static int64_t rp_index;                  /* records read */
static char rp_path[4096];

typedef struct {
    int op;
    double t0, t1, c0, c1;
    int64_t polls;
    double poll_cpu;
} rp_row_t;

static rp_row_t *rp_rows_buf;
static int64_t rp_nrows, rp_cap;
static int64_t rp_polls;
static double rp_poll_t0, rp_poll_c0;

/* communicators the replay knows: a handle and the logged shape */
typedef struct {
    uint64_t handle;
    int size, rank, nd, used;
    int dims[16], periods[16], coords[16];
    int *members;       /* world ranks, ``size`` of them */
} rp_comm_t;

#define RP_COMMS 4096
static rp_comm_t rp_comms[RP_COMMS];
static int rp_ncomms;

static rp_comm_t *rp_comm_find(MPI_Comm c)
{
    uint64_t h = rr_handle_of_comm(c);
    for (int i = rp_ncomms - 1; i >= 0; i--)
        if (rp_comms[i].used && rp_comms[i].handle == h)
            return &rp_comms[i];
    return NULL;
}

static rp_comm_t *rp_comm_new(uint64_t h)
{
    rp_comm_t *e = NULL;
    for (int i = 0; i < rp_ncomms && !e; i++)
        if (!rp_comms[i].used || rp_comms[i].handle == h)
            e = &rp_comms[i];
    if (!e && rp_ncomms < RP_COMMS)
        e = &rp_comms[rp_ncomms++];
    if (!e)
        rr_fatal("more than %d communicators", RP_COMMS);
    free(e->members);
    memset(e, 0, sizeof *e);
    e->handle = h;
    e->used = 1;
    return e;
}

/* ``e``'s members: ``members`` (world ranks), or where none are known the
 * world's first ``size`` ranks */
static void rp_comm_members(rp_comm_t *e, const int *members)
{
    e->members = malloc(sizeof(int) * (size_t)(e->size > 0 ? e->size : 1));
    for (int i = 0; i < e->size; i++)
        e->members[i] = members ? members[i] : i;
}

/* Called by the Python replay for each communicator it hands the
 * application (a real handle standing for a logged one). */
void rp_comm_known(uint64_t handle, int size, int rank, int nd, const int *dims,
                   const int *periods, const int *coords, const int *members)
{
    pthread_mutex_lock(&rr_mu);
    rp_comm_t *e = rp_comm_new(handle);
    e->size = size;
    e->rank = rank;
    rp_comm_members(e, members);
    e->nd = nd > 16 ? 16 : nd;
    for (int d = 0; d < e->nd; d++) {
        e->dims[d] = dims[d];
        e->periods[d] = periods[d];
        e->coords[d] = coords[d];
    }
    pthread_mutex_unlock(&rr_mu);
}

static rp_comm_t *rp_comm(MPI_Comm c, void *ret, const char *fn)
{
    rp_comm_t *e = rp_comm_find(c);
    if (!e)
        rr_fatal("%s on a communicator the replay does not know (one made by a call the C "
                 "log does not answer, or MPI_COMM_NULL)", rr_where(ret, fn));
    return e;
}

static void rp_damaged(const char *what)
{
    rr_fatal("%s: C-level record %lld: %s: the log is damaged or incomplete", rp_path,
             (long long)rp_index, what);
}

/* The record at the cursor (not consumed), or NULL at the end record. */
static const rl_head *rp_peek(const int64_t **x, const char **payload)
{
    if (rp_pos + sizeof(rl_head) > rp_len)
        rp_damaged("truncated");
    const rl_head *h = (const rl_head *)(rp_map + rp_pos);
    if (h->magic != RL_MAGIC || h->nx < 0)
        rp_damaged("no record here");
    size_t need = sizeof(rl_head) + sizeof(int64_t) * (size_t)h->nx + h->plen;
    if (rp_pos + need > rp_len)
        rp_damaged("truncated");
    *x = (const int64_t *)(rp_map + rp_pos + sizeof(rl_head));
    if (rl_checksum(h, *x) != h->sum)
        rp_damaged("checksum mismatch");
    *payload = rp_map + rp_pos + sizeof(rl_head) + sizeof(int64_t) * (size_t)h->nx;
    return h->op < 0 ? NULL : h;
}

static void rp_consume(const rl_head *h)
{
    rp_pos += sizeof(rl_head) + sizeof(int64_t) * (size_t)h->nx + h->plen;
    rp_index++;
}

static const char *rp_op_name(int op);

/* After the application's end (exit handlers: PETSc finalises there),
 * calls past the log's end are answered with nothing, as the Python
 * replay answers its late calls: the recorder had stopped logging. */
static int rp_finished;
static int64_t rp_late;
static rl_head rp_late_head;
static const int64_t rp_late_x[3] = {MPI_PROC_NULL, MPI_ANY_TAG, 0};

static void rp_late_note(void)
{
    fprintf(stderr, "replay: note: rank %d: %lld call(s) below Python after the application's "
            "end (its exit handlers), past the log's, answered with nothing\n", rl_rank,
            (long long)rp_late);
}

static int rp_at_late_end(void)
{
    return rp_finished && rp_pos + sizeof(rl_head) <= rp_len &&
           ((const rl_head *)(rp_map + rp_pos))->op < 0;
}

/* The next record, which must be this call (op; peer, tag, bytes and the
 * communicator's size where given, -2 for "not compared"). */
static const rl_head *rp_next(void *ret, const char *fn, int op, int peer, int tag, int csize,
                              int64_t nbytes, const int64_t **x, const char **payload)
{
    const rl_head *h = rp_peek(x, payload);
    if (!h && rp_finished) {
        if (rp_late++ == 0)
            atexit(rp_late_note);
        rp_late_head = (rl_head){RL_MAGIC, op, peer, tag, csize, 3, nbytes, 0, 0, 0};
        *x = rp_late_x;
        *payload = "";
        return &rp_late_head;
    }
    if (!h)
        rr_fatal("C-level call %lld, %s: the log ended here (the recorded run made no more "
                 "calls below Python)", (long long)rp_index, rr_where(ret, fn));
    if (h->op != op)
        rr_fatal("C-level call %lld: the log recorded %s but the application called %s.  "
                 "Likely cause: the run is not deterministic in a way the log does not "
                 "capture, or got other arguments or input than when recorded",
                 (long long)rp_index, rp_op_name(h->op), rr_where(ret, fn));
    if ((peer != -2 && h->peer != peer) || (tag != -2 && h->tag != tag) ||
        (csize != -2 && h->csize != csize) || (nbytes != -2 && h->nbytes != nbytes))
        rr_fatal("C-level call %lld, %s: the log recorded peer %d, tag %d, %lld bytes on a "
                 "communicator of %d ranks, but the application passed peer %d, tag %d, %lld "
                 "bytes on one of %d.  Likely cause: other arguments or input than when "
                 "recorded", (long long)rp_index, rr_where(ret, fn), h->peer, h->tag,
                 (long long)h->nbytes, h->csize, peer, tag, (long long)nbytes, csize);
    rp_consume(h);
    return h;
}

/* The application's replay is over: calls from now on past the log's end
 * are its exit handlers'. */
void rp_replay_finished(void)
{
    rp_finished = 1;
}

/* Unpack logged bytes into ``pieces``. */
static void rp_unpack(void *ret, const char *fn, const char *payload, uint64_t plen,
                      const rr_piece *pieces, int n, int partial)
{
    MPI_Count pos = 0;
    for (int i = 0; i < n && (uint64_t)pos < plen; i++) {
        if (pieces[i].count <= 0 || pieces[i].buf == NULL)
            continue;
        MPI_Count cap = 0;
        PMPI_Pack_size_c(pieces[i].count, pieces[i].type, MPI_COMM_SELF, &cap);
        MPI_Count count = pieces[i].count;
        if (partial && (uint64_t)(pos + cap) > plen) {
            /* a receive got fewer elements than posted */
            MPI_Count one = 0;
            PMPI_Pack_size_c(1, pieces[i].type, MPI_COMM_SELF, &one);
            count = one > 0 ? (MPI_Count)(plen - (uint64_t)pos) / one : 0;
        }
        if (PMPI_Unpack_c(payload, (MPI_Count)plen, &pos, pieces[i].buf, count,
                          pieces[i].type, MPI_COMM_SELF) != MPI_SUCCESS)
            rr_fatal("C-level call %lld, %s: the logged bytes do not fit the buffer",
                     (long long)rp_index, rr_where(ret, fn));
    }
    if ((uint64_t)pos != plen)
        rr_fatal("C-level call %lld, %s: the log holds %llu bytes but the buffers take %lld",
                 (long long)rp_index, rr_where(ret, fn), (unsigned long long)plen,
                 (long long)pos);
}

static void rp_set_status(MPI_Status *st, const int64_t *y)
{
    if (st == MPI_STATUS_IGNORE || st == NULL)
        return;
    st->MPI_SOURCE = (int)y[0];
    st->MPI_TAG = (int)y[1];
    st->MPI_ERROR = MPI_SUCCESS;
    PMPI_Status_set_elements_x(st, MPI_BYTE, y[2] < 0 ? 0 : y[2]);
    PMPI_Status_set_cancelled(st, 0);
}

/* fake requests: what their completion delivers */
typedef struct {
    rr_piece *pieces;
    int n, used, persistent, recv;
} rp_req_t;

static rp_req_t *rp_reqs;
static int rp_nreqs, rp_reqs_cap;

static MPI_Request rp_req_new(const rr_piece *pieces, int n, int persistent, int recv)
{
    int i = 0;
    for (i = 0; i < rp_nreqs && rp_reqs[i].used; i++)
        ;
    if (i == rp_nreqs) {
        if (rp_nreqs == rp_reqs_cap) {
            if (rp_reqs_cap >= RP_MAX_FAKE_REQ)
                rr_fatal("more than %d requests pending below Python", RP_MAX_FAKE_REQ);
            rp_reqs_cap = rp_reqs_cap ? 2 * rp_reqs_cap : 256;
            rp_reqs = realloc(rp_reqs, sizeof(rp_req_t) * (size_t)rp_reqs_cap);
        }
        rp_nreqs++;
    }
    rp_req_t *e = &rp_reqs[i];
    e->pieces = malloc(sizeof(rr_piece) * (size_t)(n > 0 ? n : 1));
    memcpy(e->pieces, pieces, sizeof(rr_piece) * (size_t)n);
    e->n = n;
    e->used = 1;
    e->persistent = persistent;
    e->recv = recv;
    MPI_Request r;
    int v = RP_FAKE_REQ | i;
    memset(&r, 0, sizeof r);
    memcpy(&r, &v, sizeof v < sizeof r ? sizeof v : sizeof r);
    return r;
}

static rp_req_t *rp_req(MPI_Request r)
{
    if (r == MPI_REQUEST_NULL)
        return NULL;
    int v = 0;
    memcpy(&v, &r, sizeof v < sizeof r ? sizeof v : sizeof r);
    int i = v & ~RP_FAKE_REQ;
    if ((v & RP_FAKE_REQ) != RP_FAKE_REQ || i < 0 || i >= rp_nreqs || !rp_reqs[i].used)
        return NULL;
    return &rp_reqs[i];
}

static void rp_req_done(MPI_Request *r)
{
    rp_req_t *e = rp_req(*r);
    if (!e)
        return;
    if (e->persistent)                       /* inactive until started again */
        return;
    free(e->pieces);
    e->used = 0;
    *r = MPI_REQUEST_NULL;
}

/* ---- the answered call's row ------------------------------------------ */
static inline void rp_enter(rr_span *s)
{
    s->t = rr_wall();
    s->c = rr_cpu();
}

static void rp_row(const rr_span *s, int op, int empty)
{
    double t = rr_wall(), c = rr_cpu();
    pthread_mutex_lock(&rr_mu);
    if (empty) {
        if (rp_polls++ == 0) {
            rp_poll_t0 = s->t;
            rp_poll_c0 = s->c;
        }
        pthread_mutex_unlock(&rr_mu);
        return;
    }
    if (rp_nrows == rp_cap) {
        rp_cap = rp_cap ? 2 * rp_cap : 4096;
        rp_rows_buf = realloc(rp_rows_buf, sizeof(rp_row_t) * (size_t)rp_cap);
    }
    rp_row_t *r = &rp_rows_buf[rp_nrows++];
    r->op = op;
    r->t0 = rp_polls ? rp_poll_t0 : s->t;
    r->c0 = rp_polls ? rp_poll_c0 : s->c;
    r->poll_cpu = rp_polls ? s->c - rp_poll_c0 : 0.0;
    r->polls = rp_polls;
    r->t1 = t;
    r->c1 = c;
    rp_polls = 0;
    pthread_mutex_unlock(&rr_mu);
}

/* The rows of the calls answered so far (entry and exit times, folded
 * polls): read by the Python replay after the application. */
int64_t rp_rows(const rp_row_t **rows)
{
    *rows = rp_rows_buf;
    return rp_nrows;
}

/* ---- the answers, one per kind ----------------------------------------- */
static int rp_send(void *ret, const char *fn, int op, MPI_Count count, MPI_Datatype type,
                   int peer, int tag, MPI_Comm comm, MPI_Request *request, int persistent)
{
    rr_span sp;
    rp_enter(&sp);
    const int64_t *x;
    const char *p;
    rp_comm_t *ce = rp_comm(comm, ret, fn);
    rp_next(ret, fn, op, peer, tag, ce->size, rr_bytes(count, type), &x, &p);
    if (request)
        *request = rp_req_new(NULL, 0, persistent, 0);
    rp_row(&sp, op, 0);
    return MPI_SUCCESS;
}

static int rp_recv(void *ret, const char *fn, int op, void *buf, MPI_Count count,
                   MPI_Datatype type, int peer, int tag, MPI_Comm comm, MPI_Status *status)
{
    rr_span sp;
    rp_enter(&sp);
    const int64_t *x;
    const char *p;
    rp_comm_t *ce = rp_comm(comm, ret, fn);
    const rl_head *h = rp_next(ret, fn, op, peer, tag, ce->size, rr_bytes(count, type),
                               &x, &p);
    if (h->nx < 3)
        rp_damaged("a receive without its status");
    rr_piece pc = {buf, count, type};
    rp_unpack(ret, fn, p, h->plen, &pc, 1, 1);
    rp_set_status(status, x);
    rp_row(&sp, op, 0);
    return MPI_SUCCESS;
}

static int rp_sendrecv(void *ret, const char *fn, int op, MPI_Count scount, MPI_Datatype stype,
                       int dest, int stag, void *buf, MPI_Count count, MPI_Datatype type,
                       int source, int rtag, MPI_Comm comm, MPI_Status *status)
{
    rr_span sp;
    rp_enter(&sp);
    const int64_t *x;
    const char *p;
    (void)source;
    (void)rtag;
    rp_comm_t *ce = rp_comm(comm, ret, fn);
    const rl_head *h = rp_next(ret, fn, op, dest, stag, ce->size, rr_bytes(scount, stype),
                               &x, &p);
    if (h->nx < 3)
        rp_damaged("a receive without its status");
    rr_piece pc = {buf, count, type};
    rp_unpack(ret, fn, p, h->plen, &pc, 1, 1);
    rp_set_status(status, x);
    rp_row(&sp, op, 0);
    return MPI_SUCCESS;
}

static int rp_irecv(void *ret, const char *fn, int op, void *buf, MPI_Count count,
                    MPI_Datatype type, int peer, int tag, MPI_Comm comm, MPI_Request *request,
                    int persistent)
{
    rr_span sp;
    rp_enter(&sp);
    const int64_t *x;
    const char *p;
    rp_comm_t *ce = rp_comm(comm, ret, fn);
    rp_next(ret, fn, op, peer, tag, ce->size, rr_bytes(count, type), &x, &p);
    rr_piece pc = {buf, count, type};
    *request = rp_req_new(&pc, 1, persistent, 1);
    rp_row(&sp, op, 0);
    return MPI_SUCCESS;
}

static int rp_probe(void *ret, const char *fn, int op, int peer, int tag, MPI_Comm comm,
                    int *flag, MPI_Status *status)
{
    rr_span sp;
    rp_enter(&sp);
    const int64_t *x;
    const char *p;
    rp_comm_t *ce = rp_comm(comm, ret, fn);
    if (flag) {                               /* Iprobe: found only where the log says so */
        const rl_head *h = rp_peek(&x, &p);
        if (!h || h->op != op || h->peer != peer || h->tag != tag || h->csize != ce->size) {
            *flag = 0;
            rp_row(&sp, op, 1);
            return MPI_SUCCESS;
        }
        *flag = 1;
    }
    const rl_head *h = rp_next(ret, fn, op, peer, tag, ce->size, -2, &x, &p);
    if (h->nx < 3)
        rp_damaged("a probe without its status");
    rp_set_status(status, x);
    rp_row(&sp, op, 0);
    return MPI_SUCCESS;
}

static int rp_coll(void *ret, const char *fn, int op, int root, int64_t nbytes, MPI_Comm comm,
                   const rr_piece *pieces, int n, MPI_Request *request, int persistent)
{
    rr_span sp;
    rp_enter(&sp);
    const int64_t *x;
    const char *p;
    rp_comm_t *ce = rp_comm(comm, ret, fn);
    const rl_head *h = rp_next(ret, fn, op, root, -1, ce->size, nbytes, &x, &p);
    if (request)
        *request = rp_req_new(pieces, n, persistent, 0);
    else
        rp_unpack(ret, fn, p, h->plen, pieces, n, 0);
    rp_row(&sp, op, 0);
    return MPI_SUCCESS;
}

/* Completions.  ``kind``: 0 one (Wait/Test), 1 all, 2 any, 3 some;
 * ``test``: a poll (answered empty where the log has no record of it). */
static int rp_complete(void *ret, const char *fn, int op, int kind, int test, int n,
                       MPI_Request *reqs, int *flag, int *indx, int *outcount, int *indices,
                       MPI_Status *statuses)
{
    rr_span sp;
    rp_enter(&sp);
    const int64_t *x;
    const char *p;
    int empty = 0;
    if (rp_at_late_end()) {
        int k = 0;
        if (rp_late++ == 0)
            atexit(rp_late_note);
        for (int i = 0; i < n; i++) {
            if (reqs[i] == MPI_REQUEST_NULL)
                continue;
            if (indices)
                indices[k] = i;
            if (indx && k == 0)
                *indx = i;
            k++;
            rp_req_done(&reqs[i]);
        }
        if (flag)
            *flag = 1;
        if (outcount)
            *outcount = k ? k : MPI_UNDEFINED;
        if (indx && k == 0)
            *indx = MPI_UNDEFINED;
        rp_row(&sp, op, 0);
        return MPI_SUCCESS;
    }
    if (test || kind == 3) {
        const rl_head *h = rp_peek(&x, &p);
        empty = !h || h->op != op || h->nbytes != n;
    }
    if (empty) {
        if (flag)
            *flag = 0;
        if (indx)
            *indx = MPI_UNDEFINED;
        if (outcount)
            *outcount = 0;
        rp_row(&sp, op, 1);
        return MPI_SUCCESS;
    }
    const rl_head *h = rp_next(ret, fn, op, -2, -2, -2, n, &x, &p);
    int k = h->nx >= 1 ? (int)x[0] : -1;
    if (k < 0 || h->nx < 1 + 5 * k)
        rp_damaged("a completion without its requests");
    uint64_t off = 0;
    for (int j = 0; j < k; j++) {
        const int64_t *y = x + 1 + 5 * j;
        int i = (int)y[0];
        if (i < 0 || i >= n || off + (uint64_t)y[4] > h->plen)
            rp_damaged("a completion of a request that is not there");
        rp_req_t *e = rp_req(reqs[i]);
        if (!e && reqs[i] != MPI_REQUEST_NULL)
            rr_fatal("C-level call %lld, %s: request %d is none the replay made", (long long)
                     (rp_index - 1), rr_where(ret, fn), i);
        if (e && y[4])
            rp_unpack(ret, fn, p + off, (uint64_t)y[4], e->pieces, e->n, e->recv);
        off += (uint64_t)y[4];
        if (statuses != MPI_STATUSES_IGNORE && statuses != NULL && y[1] != -1) {
            MPI_Status *st = kind == 1 ? &statuses[i] : kind == 3 ? &statuses[j] : statuses;
            rp_set_status(st, y + 1);
        }
        if (kind == 3)
            indices[j] = i;
        if (kind == 2)
            *indx = i;
        rp_req_done(&reqs[i]);
    }
    if (flag)
        *flag = 1;
    if (outcount)           /* a logged Waitsome/Testsome of none: all were null */
        *outcount = k == 0 ? MPI_UNDEFINED : k;
    if (indx && k == 0)
        *indx = MPI_UNDEFINED;
    rp_row(&sp, op, kind == 3 && k == 0);   /* folded, as the tracer folds it */
    return MPI_SUCCESS;
}

/* A communicator made in a replay: a copy of MPI_COMM_SELF in ``made``,
 * known to stand for one of ``size`` ranks where this rank is ``rank``. */
static rp_comm_t *rp_stand_in(MPI_Comm *made, int size, int rank)
{
    PMPI_Comm_dup(MPI_COMM_SELF, made);
    rp_comm_t *e = rp_comm_new(rr_handle_of_comm(*made));
    e->size = size;
    e->rank = rank;
    return e;
}

static int rp_create(void *ret, const char *fn, int op, MPI_Comm parent, MPI_Comm *made)
{
    rr_span sp;
    rp_enter(&sp);
    const int64_t *x;
    const char *p;
    rp_comm_t *pe = rp_comm(parent, ret, fn);
    if (rp_at_late_end()) {                   /* a copy of the parent's shape */
        if (rp_late++ == 0)
            atexit(rp_late_note);
        rp_comm_t *e = rp_stand_in(made, pe->size, pe->rank);
        rp_comm_members(e, pe->members);
        rp_row(&sp, op, 0);
        return MPI_SUCCESS;
    }
    const rl_head *h = rp_next(ret, fn, op, -2, -2, pe->size, -2, &x, &p);
    if (h->nx < 1 || (!x[0] && (h->nx < 4 || x[3] > 16 || x[3] < 0 || x[1] < 1 ||
                                h->nx < 4 + 3 * x[3] + x[1])))
        rp_damaged("a communicator's creation without its shape");
    if (x[0]) {
        *made = MPI_COMM_NULL;
    } else {
        pthread_mutex_lock(&rr_mu);
        rp_comm_t *e = rp_stand_in(made, (int)x[1], (int)x[2]);
        e->nd = (int)x[3];
        for (int d = 0; d < e->nd; d++) {
            e->dims[d] = (int)x[4 + d];
            e->periods[d] = (int)x[4 + e->nd + d];
            e->coords[d] = (int)x[4 + 2 * e->nd + d];
        }
        e->members = malloc(sizeof(int) * (size_t)e->size);
        for (int i = 0; i < e->size; i++)
            e->members[i] = (int)x[4 + 3 * e->nd + i];
        pthread_mutex_unlock(&rr_mu);
    }
    rp_row(&sp, op, 0);
    return MPI_SUCCESS;
}

static int rp_comm_free(void *ret, const char *fn, int op, MPI_Comm *comm)
{
    rr_span sp;
    rp_enter(&sp);
    rp_comm_t *e = rp_comm(*comm, ret, fn);
    if (*comm != MPI_COMM_WORLD && *comm != MPI_COMM_SELF) {
        e->used = 0;
        PMPI_Comm_free(comm);
    }
    rp_row(&sp, op, 0);
    return MPI_SUCCESS;
}

static int rp_start(void *ret, const char *fn, MPI_Request *r)
{
    rr_span sp;
    rp_enter(&sp);
    const int64_t *x;
    const char *p;
    rp_req_t *e = rp_req(*r);
    if (!e || !e->persistent)
        rr_fatal("%s of a request the replay did not make persistent", rr_where(ret, fn));
    rp_next(ret, fn, RR_OP_START, -2, -2, -2, -2, &x, &p);
    rp_row(&sp, RR_OP_START, 0);
    return MPI_SUCCESS;
}

/* Start answering this rank's calls below Python from ``path``; 0 or an errno. */
int rp_replay_start(const char *path, int rank, int size)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return errno;
    struct stat st;
    if (fstat(fd, &st) != 0) {
        close(fd);
        return errno;
    }
    rp_len = (size_t)st.st_size;
    rp_map = rp_len ? mmap(NULL, rp_len, PROT_READ, MAP_PRIVATE, fd, 0) : NULL;
    close(fd);
    snprintf(rp_path, sizeof rp_path, "%s", path);
    rl_rank = rank;
    if (rp_len < 16 || rp_map == MAP_FAILED || memcmp(rp_map, "RRCLOG01", 8) != 0)
        return EINVAL;
    int32_t h[2];
    memcpy(h, rp_map + 8, sizeof h);
    if (h[0] != rank || h[1] != size)
        return EINVAL;
    /* walk it once: complete, every record whole */
    rp_pos = 16;
    const int64_t *x;
    const char *p;
    for (;;) {
        const rl_head *r = rp_peek(&x, &p);
        if (!r) {
            const rl_head *end = (const rl_head *)(rp_map + rp_pos);
            if (end->tag != 0)
                return EINVAL;
            break;
        }
        rp_consume(r);
    }
    rp_pos = 16;
    rp_index = 0;
    pthread_mutex_lock(&rr_mu);
    rp_comm_t *w = rp_comm_new(rr_handle_of_comm(MPI_COMM_WORLD));
    w->size = size;
    w->rank = rank;
    rp_comm_members(w, NULL);
    rp_comm_t *s = rp_comm_new(rr_handle_of_comm(MPI_COMM_SELF));
    s->size = 1;
    rp_comm_members(s, &rank);
    pthread_mutex_unlock(&rr_mu);
    rr_mode = RR_REPLAY;
    return 0;
}

/* Records of the log not yet answered (0 when the application made every
 * logged call). */
int64_t rp_replay_left(void)
{
    int64_t left = 0;
    size_t pos = rp_pos;
    const int64_t *x;
    const char *p;
    for (const rl_head *h; (h = rp_peek(&x, &p)); left++)
        rp_consume(h);
    rp_pos = pos;
    rp_index -= left;
    return left;
}


/* ---- a compiled program recorded or replayed without Python --------------
 * `instrument record ... ./a.out` preloads the shim into the program with
 * REPREPLAY_NATIVE_RECORD naming the C log of a rank it records (unset on
 * the others); `replay ... ./a.out` with REPREPLAY_NATIVE_REPLAY naming
 * the rank's C log, REPREPLAY_NATIVE_RANK and _SIZE saying which rank of
 * how many it stands for, and REPREPLAY_NATIVE_ROWS the file its rows
 * (rp_row_t, from MPI_Init to MPI_Finalize, as the trace's events) go to
 * at MPI_Finalize.  Every call of the program is below Python. */
static int rr_native_recording, rr_native_replaying;

static void rr_native_log_start(void)
{
    const char *rec = getenv("REPREPLAY_NATIVE_RECORD");
    const char *rep = getenv("REPREPLAY_NATIVE_REPLAY");
    if (rec && *rec) {
        int rank = 0, size = 1;
        PMPI_Comm_rank(MPI_COMM_WORLD, &rank);
        PMPI_Comm_size(MPI_COMM_WORLD, &size);
        if (rl_record_start(rec, rank, size) != 0) {
            fprintf(stderr, "instrument record: error: rank %d: cannot write %s\n", rank, rec);
            PMPI_Abort(MPI_COMM_WORLD, 2);
        }
        rr_native_recording = 1;
    } else if (rep && *rep) {
        const char *r = getenv("REPREPLAY_NATIVE_RANK"), *n = getenv("REPREPLAY_NATIVE_SIZE");
        int rank = r ? atoi(r) : 0, size = n ? atoi(n) : 1;
        rr_span sp;
        rp_enter(&sp);
        if (rp_replay_start(rep, rank, size) != 0) {
            rl_rank = rank;
            rr_mode = RR_REPLAY;              /* its messages say "replay" */
            rr_fatal("%s: not a complete C log of rank %d of %d; record the run again", rep,
                     rank, size);
        }
        rr_native_replaying = 1;
        rp_row(&sp, RR_OP_INIT, 0);
    }
}

static void rr_native_log_finish(void)
{
    if (rr_native_recording) {
        rr_native_recording = 0;
        if (rl_record_stop(1) < 0)
            rr_fatal("%s: could not be written completely", rl_path);
        return;
    }
    if (!rr_native_replaying)
        return;
    rr_span sp;
    rp_enter(&sp);
    int64_t left = rp_replay_left();
    if (left)
        rr_fatal("the program ended with %lld logged call(s) not made (it took another path "
                 "than when recorded)", (long long)left);
    rp_row(&sp, RR_OP_FINALIZE, 0);
    rr_mode = RR_OFF;
    const char *path = getenv("REPREPLAY_NATIVE_ROWS");
    FILE *f = path ? fopen(path, "we") : NULL;
    if (!f || fwrite(rp_rows_buf, sizeof(rp_row_t), (size_t)rp_nrows, f) != (size_t)rp_nrows ||
        fclose(f) != 0)
        rr_fatal("%s: cannot write the replay's rows", path ? path : "REPREPLAY_NATIVE_ROWS");
}

/* ---- helpers of the generated bodies ------------------------------------ */
/* size and rank of ``c`` as the application sees it (the logged ones in a replay) */
static int rr_csize_of(MPI_Comm c)
{
    int n = 0;
    if (rr_mode == RR_REPLAY) {
        rp_comm_t *e = rp_comm_find(c);
        return e ? e->size : 0;
    }
    PMPI_Comm_size(c, &n);
    return n;
}

static int rr_rank_of(MPI_Comm c)
{
    int r = 0;
    if (rr_mode == RR_REPLAY) {
        rp_comm_t *e = rp_comm_find(c);
        return e ? e->rank : -1;
    }
    PMPI_Comm_rank(c, &r);
    return r;
}

static int64_t rr_pieces_bytes(const rr_piece *p, int n)
{
    int64_t total = 0;
    for (int i = 0; i < n; i++)
        total += rr_bytes(p[i].count, p[i].type);
    return total;
}

/* the blocks of a v-collective's buffer, one per member; caller frees */
static rr_piece *rr_blocks_c(void *buf, const MPI_Count *counts, const MPI_Aint *displs,
                             MPI_Datatype t, int n)
{
    MPI_Aint lb = 0, extent = 0;
    PMPI_Type_get_extent(t, &lb, &extent);
    rr_piece *p = malloc(sizeof(rr_piece) * (size_t)(n > 0 ? n : 1));
    for (int i = 0; i < n; i++)
        p[i] = (rr_piece){(char *)buf + displs[i] * extent, counts[i], t};
    return p;
}

static rr_piece *rr_blocks_i(void *buf, const int *counts, const int *displs, MPI_Datatype t,
                             int n)
{
    MPI_Aint lb = 0, extent = 0;
    PMPI_Type_get_extent(t, &lb, &extent);
    rr_piece *p = malloc(sizeof(rr_piece) * (size_t)(n > 0 ? n : 1));
    for (int i = 0; i < n; i++)
        p[i] = (rr_piece){(char *)buf + (MPI_Aint)displs[i] * extent, counts[i], t};
    return p;
}

#define rr_blocks(b, c, d, t, n) _Generic((c), const MPI_Count *: rr_blocks_c, \
                                          MPI_Count *: rr_blocks_c, \
                                          default: rr_blocks_i)(b, c, d, t, n)

/* A request freed: a persistent one's entry is free again, a pending
 * one's forgotten.  Replaying, answered without a record (the Python replay
 * answers request_free itself too); tracing, recorded as the Python tracer
 * records request_free (with the id of what was under way, -1 if none). */
int MPI_Request_free(MPI_Request *request)
{
    void *ret = __builtin_return_address(0);
    if (rr_mode == RR_REPLAY && rr_classify(ret) == CALLER_OTHER) {
        rr_span rsp;
        rp_enter(&rsp);
        rp_req_t *e = rp_req(*request);
        if (e) {
            free(e->pieces);
            e->used = 0;
        }
        *request = MPI_REQUEST_NULL;
        rp_row(&rsp, RR_OP_REQUEST_FREE, 0);
        return MPI_SUCCESS;
    }
    if (rr_mode == RR_RECORD && rr_classify(ret) == CALLER_OTHER && request)
        rl_request_free(*request);
    int traced = rr_tracing && rr_classify(ret) == CALLER_OTHER;
    rr_span sp;
    if (traced)
        rr_enter(&sp);
    int64_t id = -1;
    if (request && *request != MPI_REQUEST_NULL) {
        pthread_mutex_lock(&rr_mu);
        rr_pers_t *p = rr_pers_find_locked(rr_handle_of_req(*request));
        if (p) {
            id = p->active;
            p->used = 0;
        }
        pthread_mutex_unlock(&rr_mu);
        if (!p)
            id = rr_req_find(*request, 1).id;
    }
    int rc = PMPI_Request_free(request);
    if (traced)
        rr_put(&sp, ret, RR_OP_REQUEST_FREE, -1, -1, -1, 0, 0, id, -1, -1, -1, 0, NULL);
    return rc;
}


/* ---- queries answered from the logged shape (below Python, replaying) - */
#define RP_QUERY(ret, comm, fn) \
    rp_comm_t *qe = NULL; \
    if (rr_mode == RR_REPLAY && rr_classify(ret) == CALLER_OTHER) \
        qe = rp_comm(comm, ret, fn)

int MPI_Comm_size(MPI_Comm comm, int *size)
{
    RP_QUERY(__builtin_return_address(0), comm, "Comm_size");
    if (!qe)
        return PMPI_Comm_size(comm, size);
    *size = qe->size;
    return MPI_SUCCESS;
}

int MPI_Comm_rank(MPI_Comm comm, int *rank)
{
    RP_QUERY(__builtin_return_address(0), comm, "Comm_rank");
    if (!qe)
        return PMPI_Comm_rank(comm, rank);
    *rank = qe->rank;
    return MPI_SUCCESS;
}

int MPI_Topo_test(MPI_Comm comm, int *status)
{
    RP_QUERY(__builtin_return_address(0), comm, "Topo_test");
    if (!qe)
        return PMPI_Topo_test(comm, status);
    *status = qe->nd ? MPI_CART : MPI_UNDEFINED;
    return MPI_SUCCESS;
}

int MPI_Cartdim_get(MPI_Comm comm, int *ndims)
{
    RP_QUERY(__builtin_return_address(0), comm, "Cartdim_get");
    if (!qe)
        return PMPI_Cartdim_get(comm, ndims);
    *ndims = qe->nd;
    return MPI_SUCCESS;
}

int MPI_Cart_get(MPI_Comm comm, int maxdims, int dims[], int periods[], int coords[])
{
    RP_QUERY(__builtin_return_address(0), comm, "Cart_get");
    if (!qe)
        return PMPI_Cart_get(comm, maxdims, dims, periods, coords);
    for (int d = 0; d < qe->nd && d < maxdims; d++) {
        dims[d] = qe->dims[d];
        periods[d] = qe->periods[d];
        coords[d] = qe->coords[d];
    }
    return MPI_SUCCESS;
}

/* row-major rank of Cartesian coordinates, periodic dimensions wrapped;
 * -1 off a non-periodic edge */
static int rp_cart_rank(const rp_comm_t *e, const int *coords)
{
    int r = 0;
    for (int d = 0; d < e->nd; d++) {
        int c = coords[d], n = e->dims[d];
        if (c < 0 || c >= n) {
            if (!e->periods[d])
                return -1;
            c = ((c % n) + n) % n;
        }
        r = r * n + c;
    }
    return r;
}

int MPI_Cart_rank(MPI_Comm comm, const int coords[], int *rank)
{
    RP_QUERY(__builtin_return_address(0), comm, "Cart_rank");
    if (!qe)
        return PMPI_Cart_rank(comm, coords, rank);
    *rank = rp_cart_rank(qe, coords);
    return *rank < 0 ? MPI_ERR_ARG : MPI_SUCCESS;
}

int MPI_Cart_coords(MPI_Comm comm, int rank, int maxdims, int coords[])
{
    RP_QUERY(__builtin_return_address(0), comm, "Cart_coords");
    if (!qe)
        return PMPI_Cart_coords(comm, rank, maxdims, coords);
    for (int d = qe->nd - 1; d >= 0; d--) {
        if (d < maxdims)
            coords[d] = rank % qe->dims[d];
        rank /= qe->dims[d];
    }
    return MPI_SUCCESS;
}

int MPI_Cart_shift(MPI_Comm comm, int direction, int disp, int *source, int *dest)
{
    RP_QUERY(__builtin_return_address(0), comm, "Cart_shift");
    if (!qe)
        return PMPI_Cart_shift(comm, direction, disp, source, dest);
    int c[16];
    memcpy(c, qe->coords, sizeof c);
    c[direction] = qe->coords[direction] + disp;
    *dest = rp_cart_rank(qe, c);
    c[direction] = qe->coords[direction] - disp;
    *source = rp_cart_rank(qe, c);
    if (*dest < 0)
        *dest = MPI_PROC_NULL;
    if (*source < 0)
        *source = MPI_PROC_NULL;
    return MPI_SUCCESS;
}

/* ---- groups of the communicators the replay knows ------------------------
 * MPI_Comm_group on such a communicator (below Python, replaying) gives a
 * group of its logged members: a handle MPI never made (RP_FAKE_GROUP),
 * answered by the group calls below.  PETSc translates ranks between the
 * groups of its communicators to tell its own rank apart: the real group
 * of a replay's one-process communicator would name the wrong one. */
#define RP_FAKE_GROUP 0x1d000000
typedef struct {
    int n, me, used;
    int *members;        /* world ranks */
} rp_group_t;

static rp_group_t *rp_groups;
static int rp_ngroups, rp_groups_cap;

static MPI_Group rp_group_new(const int *members, int n)
{
    int i;
    for (i = 0; i < rp_ngroups && rp_groups[i].used; i++)
        ;
    if (i == rp_ngroups) {
        if (rp_ngroups == rp_groups_cap) {
            rp_groups_cap = rp_groups_cap ? 2 * rp_groups_cap : 64;
            rp_groups = realloc(rp_groups, sizeof(rp_group_t) * (size_t)rp_groups_cap);
        }
        rp_ngroups++;
    }
    rp_group_t *g = &rp_groups[i];
    g->n = n;
    g->used = 1;
    g->me = MPI_UNDEFINED;
    g->members = malloc(sizeof(int) * (size_t)(n > 0 ? n : 1));
    for (int k = 0; k < n; k++) {
        g->members[k] = members[k];
        if (members[k] == rl_rank)
            g->me = k;
    }
    MPI_Group h;
    int v = RP_FAKE_GROUP | i;
    memset(&h, 0, sizeof h);
    memcpy(&h, &v, sizeof v < sizeof h ? sizeof v : sizeof h);
    return h;
}

static rp_group_t rp_empty_group = {0, MPI_UNDEFINED, 1, NULL};

/* the fake group of ``h`` (MPI_GROUP_EMPTY as one of none), or NULL */
static rp_group_t *rp_group(MPI_Group h)
{
    if (h == MPI_GROUP_EMPTY)
        return &rp_empty_group;
    int v = 0;
    memcpy(&v, &h, sizeof v < sizeof h ? sizeof v : sizeof h);
    int i = v & ~RP_FAKE_GROUP;
    if ((v & RP_FAKE_GROUP) != RP_FAKE_GROUP || i < 0 || i >= rp_ngroups || !rp_groups[i].used)
        return NULL;
    return &rp_groups[i];
}

/* replaying, called below Python, on fake groups (or a known communicator) */
static inline int rp_answers(void *ret)
{
    return rr_mode == RR_REPLAY && rr_classify(ret) == CALLER_OTHER;
}

int MPI_Comm_group(MPI_Comm comm, MPI_Group *group)
{
    void *ret = __builtin_return_address(0);
    if (!rp_answers(ret))
        return PMPI_Comm_group(comm, group);
    rp_comm_t *e = rp_comm(comm, ret, "Comm_group");
    *group = rp_group_new(e->members, e->size);
    return MPI_SUCCESS;
}

int MPI_Group_size(MPI_Group group, int *size)
{
    rp_group_t *g = rp_answers(__builtin_return_address(0)) ? rp_group(group) : NULL;
    if (!g)
        return PMPI_Group_size(group, size);
    *size = g->n;
    return MPI_SUCCESS;
}

int MPI_Group_rank(MPI_Group group, int *rank)
{
    rp_group_t *g = rp_answers(__builtin_return_address(0)) ? rp_group(group) : NULL;
    if (!g)
        return PMPI_Group_rank(group, rank);
    *rank = g->me;
    return MPI_SUCCESS;
}

int MPI_Group_free(MPI_Group *group)
{
    rp_group_t *g = rp_answers(__builtin_return_address(0)) ? rp_group(*group) : NULL;
    if (!g)
        return PMPI_Group_free(group);
    if (g != &rp_empty_group) {
        free(g->members);
        g->members = NULL;
        g->used = 0;
    }
    *group = MPI_GROUP_NULL;
    return MPI_SUCCESS;
}

static int rp_group_index(const rp_group_t *g, int world)
{
    for (int k = 0; k < g->n; k++)
        if (g->members[k] == world)
            return k;
    return MPI_UNDEFINED;
}

int MPI_Group_translate_ranks(MPI_Group group1, int n, const int ranks1[], MPI_Group group2,
                              int ranks2[])
{
    void *ret = __builtin_return_address(0);
    rp_group_t *a = rp_answers(ret) ? rp_group(group1) : NULL;
    rp_group_t *b = rp_answers(ret) ? rp_group(group2) : NULL;
    if (!a && !b)
        return PMPI_Group_translate_ranks(group1, n, ranks1, group2, ranks2);
    if (!a || !b)
        rr_fatal("%s between a group of the replay and one of MPI's",
                 rr_where(ret, "Group_translate_ranks"));
    for (int i = 0; i < n; i++)
        ranks2[i] = ranks1[i] == MPI_PROC_NULL ? MPI_PROC_NULL
                    : ranks1[i] >= 0 && ranks1[i] < a->n ? rp_group_index(b, a->members[ranks1[i]])
                    : MPI_UNDEFINED;
    return MPI_SUCCESS;
}

int MPI_Group_compare(MPI_Group group1, MPI_Group group2, int *result)
{
    void *ret = __builtin_return_address(0);
    rp_group_t *a = rp_answers(ret) ? rp_group(group1) : NULL;
    rp_group_t *b = rp_answers(ret) ? rp_group(group2) : NULL;
    if (!a && !b)
        return PMPI_Group_compare(group1, group2, result);
    if (!a || !b || a->n != b->n) {
        *result = MPI_UNEQUAL;
        return MPI_SUCCESS;
    }
    int same = 1, similar = 1;
    for (int i = 0; i < a->n; i++) {
        same &= a->members[i] == b->members[i];
        similar &= rp_group_index(b, a->members[i]) != MPI_UNDEFINED;
    }
    *result = same ? MPI_IDENT : similar ? MPI_SIMILAR : MPI_UNEQUAL;
    return MPI_SUCCESS;
}

/* Group_incl (keep == 1) and Group_excl (keep == 0) of fake groups */
static int rp_group_select(MPI_Group group, int n, const int ranks[], MPI_Group *out, int keep)
{
    rp_group_t *g = rp_group(group);
    int *m = malloc(sizeof(int) * (size_t)(g->n + n + 1)), k = 0;
    if (keep) {
        for (int i = 0; i < n; i++)
            m[k++] = g->members[ranks[i]];
    } else {
        for (int j = 0; j < g->n; j++) {
            int drop = 0;
            for (int i = 0; i < n && !drop; i++)
                drop = ranks[i] == j;
            if (!drop)
                m[k++] = g->members[j];
        }
    }
    *out = rp_group_new(m, k);
    free(m);
    return MPI_SUCCESS;
}

int MPI_Group_incl(MPI_Group group, int n, const int ranks[], MPI_Group *newgroup)
{
    if (!rp_answers(__builtin_return_address(0)) || !rp_group(group))
        return PMPI_Group_incl(group, n, ranks, newgroup);
    return rp_group_select(group, n, ranks, newgroup, 1);
}

int MPI_Group_excl(MPI_Group group, int n, const int ranks[], MPI_Group *newgroup)
{
    if (!rp_answers(__builtin_return_address(0)) || !rp_group(group))
        return PMPI_Group_excl(group, n, ranks, newgroup);
    return rp_group_select(group, n, ranks, newgroup, 0);
}

int MPI_Comm_compare(MPI_Comm comm1, MPI_Comm comm2, int *result)
{
    void *ret = __builtin_return_address(0);
    if (!rp_answers(ret))
        return PMPI_Comm_compare(comm1, comm2, result);
    rp_comm_t *a = rp_comm(comm1, ret, "Comm_compare"), *b = rp_comm(comm2, ret, "Comm_compare");
    int same = a->size == b->size;
    for (int i = 0; same && i < a->size; i++)
        same = a->members[i] == b->members[i];
    *result = a == b ? MPI_IDENT : same ? MPI_CONGRUENT : MPI_UNEQUAL;
    return MPI_SUCCESS;
}

/* union (op 0), intersection (1), difference (2) of fake groups, in MPI's
 * order: the first group's members kept, then (union) the second's new ones */
static int rp_group_combine(void *ret, const char *fn, MPI_Group g1, MPI_Group g2,
                            MPI_Group *out, int op)
{
    rp_group_t *a = rp_group(g1), *b = rp_group(g2);
    if (!a || !b)
        rr_fatal("%s between a group of the replay and one of MPI's", rr_where(ret, fn));
    int *m = malloc(sizeof(int) * (size_t)(a->n + b->n + 1)), k = 0;
    for (int i = 0; i < a->n; i++) {
        int in_b = rp_group_index(b, a->members[i]) != MPI_UNDEFINED;
        if (op == 0 || (op == 1 && in_b) || (op == 2 && !in_b))
            m[k++] = a->members[i];
    }
    for (int i = 0; op == 0 && i < b->n; i++)
        if (rp_group_index(a, b->members[i]) == MPI_UNDEFINED)
            m[k++] = b->members[i];
    *out = rp_group_new(m, k);
    free(m);
    return MPI_SUCCESS;
}

int MPI_Group_union(MPI_Group group1, MPI_Group group2, MPI_Group *newgroup)
{
    void *ret = __builtin_return_address(0);
    if (!rp_answers(ret) || (!rp_group(group1) && !rp_group(group2)))
        return PMPI_Group_union(group1, group2, newgroup);
    return rp_group_combine(ret, "Group_union", group1, group2, newgroup, 0);
}

int MPI_Group_intersection(MPI_Group group1, MPI_Group group2, MPI_Group *newgroup)
{
    void *ret = __builtin_return_address(0);
    if (!rp_answers(ret) || (!rp_group(group1) && !rp_group(group2)))
        return PMPI_Group_intersection(group1, group2, newgroup);
    return rp_group_combine(ret, "Group_intersection", group1, group2, newgroup, 1);
}

int MPI_Group_difference(MPI_Group group1, MPI_Group group2, MPI_Group *newgroup)
{
    void *ret = __builtin_return_address(0);
    if (!rp_answers(ret) || (!rp_group(group1) && !rp_group(group2)))
        return PMPI_Group_difference(group1, group2, newgroup);
    return rp_group_combine(ret, "Group_difference", group1, group2, newgroup, 2);
}

/* the ranks a list of (first, last, stride) triplets names, in order */
static int *rp_range_ranks(int n, int ranges[][3], int *count)
{
    int cap = 16, k = 0, *r = malloc(sizeof(int) * (size_t)cap);
    for (int i = 0; i < n; i++) {
        int first = ranges[i][0], last = ranges[i][1], stride = ranges[i][2];
        for (int x = first; stride > 0 ? x <= last : x >= last; x += stride) {
            if (k == cap)
                r = realloc(r, sizeof(int) * (size_t)(cap *= 2));
            r[k++] = x;
            if (stride == 0)
                break;
        }
    }
    *count = k;
    return r;
}

int MPI_Group_range_incl(MPI_Group group, int n, int ranges[][3], MPI_Group *newgroup)
{
    if (!rp_answers(__builtin_return_address(0)) || !rp_group(group))
        return PMPI_Group_range_incl(group, n, ranges, newgroup);
    int k, *r = rp_range_ranks(n, ranges, &k);
    int rc = rp_group_select(group, k, r, newgroup, 1);
    free(r);
    return rc;
}

int MPI_Group_range_excl(MPI_Group group, int n, int ranges[][3], MPI_Group *newgroup)
{
    if (!rp_answers(__builtin_return_address(0)) || !rp_group(group))
        return PMPI_Group_range_excl(group, n, ranges, newgroup);
    int k, *r = rp_range_ranks(n, ranges, &k);
    int rc = rp_group_select(group, k, r, newgroup, 0);
    free(r);
    return rc;
}
