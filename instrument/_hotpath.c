/* The tracer's hot path: time stamps, call-site lookup and the event buffer.
 *
 * Python wrappers call enter() before and leave(...) after each MPI call.
 * Doing this in C keeps the added cost per call well under the 2 us goal
 * (pure Python needed about 4 us: frame access and struct packing dominate).
 *
 * Records have the layout of writer.RECORD ("<14q6d"); the buffer is written
 * to the rank's .ev file descriptor by flush(), after calling the Python
 * callback that writes pending side records (sites, extras) first, so that
 * an event never refers to a site a crash could leave unwritten.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <frameobject.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>
#include <errno.h>

typedef struct {
    int64_t op, comm, peer, tag, sbytes, rbytes, req, site, rpeer, rtag, newcomm, flags, polls;
    int64_t faults;
    double t_start, t_end, cpu_start, cpu_end, poll_cpu, poll_gap;
} record_t;

#define FLAG_NONE 8             /* writer.FLAG_NONE: a poll that found nothing */
#define NSLOTS 256              /* pending calls (nesting, threads) */
#define SHORT 20e-6             /* spans shorter than this count as all-CPU */
#define SITE_BITS 14
#define SITE_CAP (1 << SITE_BITS)

static record_t *buf = NULL;
static Py_ssize_t cap = 0, used = 0;
static int64_t nevents = 0;
static int fd = -1;
static double origin = 0, last_end = 0, last_cpu = 0, last_flush = 0, flush_every = 1.0;
static double slot_t[NSLOTS], slot_c[NSLOTS];
/* the process's minor page faults at the last call's end, at the last
 * written event's end, and at each pending call's entry: a span's faults
 * are the memory the application touched for the first time, or again
 * after malloc gave it back to the kernel (replay/expand.py charges the
 * ones a replay does not meet) */
static int64_t last_flt = 0, ev_flt = 0, slot_f[NSLOTS];
/* the run of empty polls since the last recorded event: how many, the
 * wall and CPU clocks at the start of the first, the wall clock at the
 * start of the last */
static int64_t polls = 0;
static double poll_t0 = 0, poll_c0 = 0, poll_last = 0;
static unsigned next_slot = 0;
/* whether the application is inside an MPI call (between enter and its
 * record): a flush from another thread then times none of its computation */
static int inside = 0;
static PyObject *on_flush = NULL;     /* callable(): write side records */
static PyObject *on_site = NULL;      /* callable(code, lineno) -> site id */
static PyObject *side_list = NULL;    /* list that gets ("x", event index, extra) */
static PyObject *x_tag = NULL;        /* the string "x" */

/* call-site table: open addressing on (code pointer, instruction offset) */
static struct { void *code; int lasti; int64_t site; } sites[SITE_CAP];

static inline double wall(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static inline int64_t minor_faults(void) {
    struct rusage u;
    getrusage(RUSAGE_SELF, &u);
    return (int64_t)u.ru_minflt;
}

static inline double cpu(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int64_t site_of(int depth) {
    PyFrameObject *f = PyEval_GetFrame();   /* borrowed: the wrapper's frame */
    if (f == NULL) return -1;
    Py_INCREF(f);
    for (int i = 0; i < depth; i++) {
        PyFrameObject *back = PyFrame_GetBack(f);
        Py_DECREF(f);
        if (back == NULL) return -1;
        f = back;
    }
    PyCodeObject *code = PyFrame_GetCode(f);
    int lasti = PyFrame_GetLasti(f);
    uintptr_t h = ((uintptr_t)code >> 4) * 2654435761u ^ (uintptr_t)lasti * 40503u;
    int64_t site = -1;
    for (unsigned probe = 0; probe < SITE_CAP; probe++) {
        unsigned i = (unsigned)(h + probe) & (SITE_CAP - 1);
        if (sites[i].code == code && sites[i].lasti == lasti) { site = sites[i].site; break; }
        if (sites[i].code == NULL) {
            PyObject *r = PyObject_CallFunction(on_site, "Oi", (PyObject *)code,
                                                PyFrame_GetLineNumber(f));
            if (r == NULL) { site = -2; break; }
            site = PyLong_AsLongLong(r);
            Py_DECREF(r);
            Py_INCREF(code);                 /* keep the key's code alive */
            sites[i].code = code; sites[i].lasti = lasti; sites[i].site = site;
            break;
        }
    }
    Py_DECREF(code);
    Py_DECREF(f);
    return site;
}

/* raised when the trace cannot be written (disk full, quota): a
   BaseException, so that an application's `except Exception` cannot hide it */
static PyObject *WriteError = NULL;

static int do_flush(void) {
    if (on_flush) {
        PyObject *r = PyObject_CallNoArgs(on_flush);
        if (r == NULL) return -1;
        Py_DECREF(r);
    }
    const char *p = (const char *)buf;
    size_t left = (size_t)used * sizeof(record_t);
    while (left > 0 && fd >= 0) {
        ssize_t w = write(fd, p, left);
        if (w < 0) {
            if (errno == EINTR) continue;
            PyErr_Format(WriteError, "cannot write the trace's events: %s", strerror(errno));
            used = 0;                        /* what is lost is lost: do not retry */
            return -1;
        }
        p += w; left -= (size_t)w;
    }
    used = 0;
    last_flush = wall();
    return 0;
}

static int64_t req_counter = 0;      /* request ids of this rank */
/* the last written event's end (wall since the origin, CPU), and how many
 * calls began before it: calls of several threads that overlapped */
static double prev_end = 0, prev_cpu = 0;
static int64_t overlapped_calls = 0;

/* new_req() -> the next request id */
static PyObject *new_req(PyObject *self, PyObject *unused) {
    return PyLong_FromLongLong(req_counter++);
}

/* enter() -> slot: time stamps of a call's entry, kept in a C slot */
static PyObject *enter(PyObject *self, PyObject *unused) {
    double t = wall(), c;
    int64_t f;
    /* a span this short has no time to fault many pages: no system calls */
    if (t - last_end < SHORT) { c = last_cpu + (t - last_end); f = last_flt; }
    else { c = cpu(); f = minor_faults(); }
    unsigned s = next_slot++ % NSLOTS;
    slot_t[s] = t; slot_c[s] = c; slot_f[s] = f;
    inside = 1;
    return PyLong_FromUnsignedLong(s);
}

/* Record one call.  A poll that found nothing (flags & FLAG_NONE) is not
 * written: a run of them is folded into the next event, which then starts
 * where the first poll started (its duration is the wait) and carries the
 * count, the CPU time spent polling and the last polling interval.
 * Waiting by polling is thus one event whatever the number of polls, and
 * costs no site lookup per poll. */
static inline int record(unsigned s, int64_t *v, int depth, PyObject *extra) {
    double t = wall(), t0 = slot_t[s], c0 = slot_c[s], c;
    int64_t f0 = slot_f[s];
    if (t - t0 < SHORT) { c = c0 + (t - t0); last_flt = f0; }
    else { c = cpu(); last_flt = minor_faults(); }
    last_end = t; last_cpu = c;
    inside = 0;
    if (v[10] & FLAG_NONE) {
        if (polls++ == 0) { poll_t0 = t0; poll_c0 = c0; }
        poll_last = t0;
        return 0;
    }
    int64_t site = site_of(depth);
    if (site == -2) return -1;
    if (extra != NULL && extra != Py_None) {
        /* ("x", event index, extra) straight onto the side list: a Python
         * callback here would cost more than the rest of the event */
        PyObject *idx = PyLong_FromLongLong(nevents);
        PyObject *t = idx ? PyTuple_Pack(3, x_tag, idx, extra) : NULL;
        Py_XDECREF(idx);
        if (t == NULL || PyList_Append(side_list, t) < 0) { Py_XDECREF(t); return -1; }
        Py_DECREF(t);
    }
    record_t *r = &buf[used++];
    r->op = v[0]; r->comm = v[1]; r->peer = v[2]; r->tag = v[3];
    r->sbytes = v[4]; r->rbytes = v[5]; r->req = v[6]; r->site = site;
    r->rpeer = v[7]; r->rtag = v[8]; r->newcomm = v[9]; r->flags = v[10];
    r->polls = polls;
    /* from the last event's end to this call's entry, folded polls included */
    r->faults = f0 > ev_flt ? f0 - ev_flt : 0;
    ev_flt = last_flt;
    r->poll_cpu = r->poll_gap = 0.0;
    if (polls) {
        r->poll_cpu = c0 > poll_c0 ? c0 - poll_c0 : 0.0;
        /* the polling interval when the wait ended: how late it could notice */
        r->poll_gap = t0 > poll_last ? t0 - poll_last : 0.0;
        t0 = poll_t0; c0 = poll_c0; polls = 0;
    }
    /* The trace is one sequence per rank, in return order.  A call that
     * another thread began while the rank's previous call was running
     * starts, in the trace, where that call returned: the time it waited
     * until then is the other call's. */
    if (t0 - origin < prev_end) { t0 = prev_end + origin; overlapped_calls++; }
    if (c0 < prev_cpu) c0 = prev_cpu;
    if (c < c0) c = c0;
    r->t_start = t0 - origin; r->t_end = t - origin; r->cpu_start = c0; r->cpu_end = c;
    prev_end = r->t_end; prev_cpu = c;
    nevents++;
    if (used >= cap || t - last_flush > flush_every) {
        int rc = do_flush();
        /* writing is the tracer's time, not the application's: the next
         * computation span starts after it */
        last_end = wall(); last_cpu = cpu();
        last_flt = ev_flt = minor_faults();
        return rc;
    }
    return 0;
}

/* A call after the trace was closed (an application's atexit handler, a
   library's late send): it went to MPI as usual, untraced; counted, and
   any request it made gets id -1. */
static int64_t late_calls = 0;
static PyObject *late_call(void) {
    late_calls++;
    return PyLong_FromLong(-1);
}

static PyObject *late(PyObject *self, PyObject *unused) {
    return PyLong_FromLongLong(late_calls);
}

static PyObject *overlapped(PyObject *self, PyObject *unused) {
    return PyLong_FromLongLong(overlapped_calls);
}

/* leave(slot, op, comm, peer, tag, sbytes, rbytes, req): the common event */
static PyObject *leave(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 8) { PyErr_SetString(PyExc_TypeError, "leave takes 8 arguments"); return NULL; }
    if (buf == NULL) return late_call();
    int64_t v[11] = {0, 0, 0, 0, 0, 0, 0, -1, -1, -1, 0};
    unsigned s = (unsigned)PyLong_AsUnsignedLong(args[0]);
    for (int i = 0; i < 7; i++) v[i] = PyLong_AsLongLong(args[i + 1]);
    if (PyErr_Occurred()) return NULL;
    /* req -2: the call made a request; number it here and return the id */
    int fresh = v[6] == -2;
    if (fresh) v[6] = req_counter++;
    if (record(s % NSLOTS, v, 1, NULL) < 0) return NULL;
    if (fresh) return PyLong_FromLongLong(v[6]);
    Py_RETURN_NONE;
}

/* leave_ex(slot, op, comm, peer, tag, sbytes, rbytes, req, rpeer, rtag,
 *          newcomm, flags, extra, depth): every field, an extra side record
 * and the frame depth of the application's call site */
static PyObject *leave_ex(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 14) { PyErr_SetString(PyExc_TypeError, "leave_ex takes 14 arguments"); return NULL; }
    if (buf == NULL) return late_call();
    int64_t v[11];
    unsigned s = (unsigned)PyLong_AsUnsignedLong(args[0]);
    for (int i = 0; i < 11; i++) v[i] = PyLong_AsLongLong(args[i + 1]);
    int depth = (int)PyLong_AsLong(args[13]);
    if (PyErr_Occurred()) return NULL;
    int fresh = v[6] == -2;
    if (fresh) v[6] = req_counter++;
    if (record(s % NSLOTS, v, depth, args[12]) < 0) return NULL;
    if (fresh) return PyLong_FromLongLong(v[6]);
    Py_RETURN_NONE;
}

static void unmap_buf(void) {
    if (buf != NULL)
        munmap(buf, (size_t)cap * sizeof(record_t));
    buf = NULL;
}

/* start(fd, origin, capacity, flush_seconds, on_flush, on_site, side_list) */
static PyObject *start(PyObject *self, PyObject *args) {
    Py_ssize_t capacity;
    PyObject *a, *b, *c;
    if (!PyArg_ParseTuple(args, "idndOOO!", &fd, &origin, &capacity, &flush_every, &a, &b,
                          &PyList_Type, &c))
        return NULL;
    if (x_tag == NULL && (x_tag = PyUnicode_InternFromString("x")) == NULL) return NULL;
    unmap_buf();
    /* mapped, not allocated: a block of the tracer's own on the
     * application's heap moves where its temporaries fall, and with them
     * whether glibc trims the heap at every step (bench/RESULTS.md) */
    void *m = mmap(NULL, (size_t)capacity * sizeof(record_t), PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) return PyErr_NoMemory();
    buf = m;
    cap = capacity; used = 0; nevents = 0; polls = 0;
    prev_end = prev_cpu = 0; overlapped_calls = 0;
    last_end = last_flush = wall();
    last_cpu = cpu();
    last_flt = ev_flt = minor_faults();
    Py_XSETREF(on_flush, Py_NewRef(a));
    Py_XSETREF(on_site, Py_NewRef(b));
    Py_XSETREF(side_list, Py_NewRef(c));
    memset(sites, 0, sizeof(sites));
    Py_RETURN_NONE;
}

static PyObject *flush(PyObject *self, PyObject *unused) {
    if (buf != NULL && do_flush() < 0) return NULL;
    Py_RETURN_NONE;
}

static PyObject *count(PyObject *self, PyObject *unused) {
    return PyLong_FromLongLong(nevents);
}

/* held_in_call() -> whether events wait in the buffer while the
   application is inside an MPI call (blocked in it, most likely) */
static PyObject *held_in_call(PyObject *self, PyObject *unused) {
    return PyBool_FromLong(buf != NULL && inside && used > 0);
}

static PyObject *now(PyObject *self, PyObject *unused) {
    return PyFloat_FromDouble(wall());
}

static PyObject *stop(PyObject *self, PyObject *unused) {
    if (buf != NULL && do_flush() < 0) return NULL;
    unmap_buf();
    fd = -1;
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"enter", enter, METH_NOARGS, "Time stamps at entry of an MPI call; returns a slot."},
    {"leave", (PyCFunction)(void (*)(void))leave, METH_FASTCALL,
     "leave(slot, op, comm, peer, tag, sbytes, rbytes, req): record an event; "
     "req -2 numbers a new request and returns its id."},
    {"leave_ex", (PyCFunction)(void (*)(void))leave_ex, METH_FASTCALL,
     "leave_ex(slot, op, comm, peer, tag, sbytes, rbytes, req, rpeer, rtag, newcomm, "
     "flags, extra, depth): record an event with every field."},
    {"start", start, METH_VARARGS, "Start recording to a file descriptor."},
    {"flush", flush, METH_NOARGS, "Write buffered events."},
    {"stop", stop, METH_NOARGS, "Flush and stop recording."},
    {"count", count, METH_NOARGS, "Number of events recorded."},
    {"held_in_call", held_in_call, METH_NOARGS,
     "Whether buffered events wait while the application is inside an MPI call."},
    {"late", late, METH_NOARGS, "Calls made after the trace was closed (untraced)."},
    {"overlapped", overlapped, METH_NOARGS,
     "Calls begun (on another thread) before the rank's previous call returned."},
    {"now", now, METH_NOARGS, "The tracer's clock (CLOCK_MONOTONIC seconds)."},
    {"new_req", new_req, METH_NOARGS, "The next request id of this rank."},
    {NULL, NULL, 0, NULL}
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_hotpath", "The tracer's per-call hot path.", -1, methods
};

PyMODINIT_FUNC PyInit__hotpath(void) {
    PyObject *m = PyModule_Create(&module);
    if (m == NULL) return NULL;
    WriteError = PyErr_NewException("instrument._hotpath.WriteError", PyExc_BaseException, NULL);
    if (WriteError == NULL || PyModule_AddObjectRef(m, "WriteError", WriteError) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
