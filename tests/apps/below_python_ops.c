/* The same communication as below_python_ops.py's Python half, made in C:
 * the tracer must record both halves alike.  Returns a checksum of every
 * buffer received, which the Python half computes the same way. */
#include <mpi.h>
#include <stdlib.h>

static double sum(const double *v, int n)
{
    double s = 0;
    for (int i = 0; i < n; i++)
        s += v[i];
    return s;
}

double exchange(int world_handle, int n)
{
    MPI_Comm world = (MPI_Comm)world_handle, dup, cart;
    int p, me, left, right, flag = 0;
    MPI_Comm_dup(world, &dup);
    MPI_Comm_size(dup, &p);
    int dims[1] = {p}, periods[1] = {1};
    MPI_Cart_create(dup, 1, dims, periods, 0, &cart);
    MPI_Comm_rank(cart, &me);
    MPI_Cart_shift(cart, 0, 1, &left, &right);
    double *a = malloc(sizeof(double) * (size_t)n * p), *b = malloc(sizeof(double) * (size_t)n * p);
    for (int i = 0; i < n * p; i++)
        a[i] = me + 0.5 * i;
    double check = 0;
    MPI_Request r[2];
    MPI_Status st;

    MPI_Irecv(b, n, MPI_DOUBLE, MPI_ANY_SOURCE, 5, cart, &r[0]);
    MPI_Isend(a, n, MPI_DOUBLE, right, 5, cart, &r[1]);
    MPI_Waitall(2, r, MPI_STATUSES_IGNORE);
    check += sum(b, n);
    MPI_Sendrecv(a, n, MPI_DOUBLE, right, 6, b, n, MPI_DOUBLE, left, 6, cart, &st);
    check += sum(b, n);
    MPI_Bcast(a, n, MPI_DOUBLE, 0, cart);
    check += sum(a, n);
    MPI_Reduce(a, b, n, MPI_DOUBLE, MPI_SUM, p - 1, cart);
    if (me == p - 1)
        check += sum(b, n);

    int *counts = malloc(sizeof(int) * p), *displs = malloc(sizeof(int) * p);
    int *mine = malloc(sizeof(int) * p), *mydispls = malloc(sizeof(int) * p);
    for (int i = 0, d = 0; i < p; i++) {
        counts[i] = i + 1;
        displs[i] = d;
        d += i + 1;
        mine[i] = me + 1;
        mydispls[i] = i * (me + 1);
    }
    MPI_Gatherv(a, me + 1, MPI_DOUBLE, b, counts, displs, MPI_DOUBLE, 0, cart);
    if (me == 0)
        check += sum(b, p * (p + 1) / 2);
    MPI_Allgatherv(a, me + 1, MPI_DOUBLE, b, counts, displs, MPI_DOUBLE, cart);
    check += sum(b, p * (p + 1) / 2);
    /* to peer i: i + 1 values; from each: me + 1 */
    MPI_Alltoallv(a, counts, displs, MPI_DOUBLE, b, mine, mydispls, MPI_DOUBLE, cart);
    check += sum(b, p * (me + 1));

    MPI_Iallreduce(a, b, n, MPI_DOUBLE, MPI_SUM, cart, &r[0]);
    MPI_Wait(&r[0], MPI_STATUS_IGNORE);
    check += sum(b, n);

    /* a receive waited for by polling */
    MPI_Irecv(b, n, MPI_DOUBLE, left, 9, cart, &r[0]);
    MPI_Barrier(cart);
    MPI_Send(a, n, MPI_DOUBLE, right, 9, cart);
    while (!flag)
        MPI_Test(&r[0], &flag, MPI_STATUS_IGNORE);
    check += sum(b, n);

    /* a message probed for, then received */
    MPI_Isend(a, 2 * n, MPI_DOUBLE, right, 10, cart, &r[1]);
    MPI_Probe(MPI_ANY_SOURCE, 10, cart, &st);
    MPI_Recv(b, 2 * n, MPI_DOUBLE, st.MPI_SOURCE, 10, cart, MPI_STATUS_IGNORE);
    MPI_Wait(&r[1], MPI_STATUS_IGNORE);
    check += sum(b, 2 * n);

    /* persistent requests, started twice, then freed */
    MPI_Request pr[2];
    MPI_Recv_init(b, n, MPI_DOUBLE, left, 11, cart, &pr[0]);
    MPI_Send_init(a, n, MPI_DOUBLE, right, 11, cart, &pr[1]);
    for (int k = 0; k < 2; k++) {
        MPI_Startall(2, pr);
        MPI_Waitall(2, pr, MPI_STATUSES_IGNORE);
        check += sum(b, n);
    }
    MPI_Request_free(&pr[0]);
    MPI_Request_free(&pr[1]);

    /* a large-count call (MPI 4), as PETSc makes them */
    MPI_Allreduce_c(a, b, (MPI_Count)n, MPI_DOUBLE, MPI_SUM, cart);
    check += sum(b, n);

    MPI_Comm_free(&cart);
    MPI_Comm_free(&dup);
    free(a); free(b); free(counts); free(displs); free(mine); free(mydispls);
    return check;
}

/* A call the tracer only counts (no traced body): it stays invisible. */
void untraced(int world_handle)
{
    MPI_Comm world = (MPI_Comm)world_handle;
    int p;
    MPI_Comm_size(world, &p);
    int *one = malloc(sizeof(int) * p), *zero = calloc(p, sizeof(int));
    MPI_Datatype *types = malloc(sizeof(MPI_Datatype) * p);
    for (int i = 0; i < p; i++) {
        one[i] = 1;
        types[i] = MPI_INT;
    }
    int *s = calloc(p, sizeof(int)), *r = calloc(p, sizeof(int));
    int *d = malloc(sizeof(int) * p);
    for (int i = 0; i < p; i++)
        d[i] = i * (int)sizeof(int);
    MPI_Alltoallw(s, one, d, types, r, one, d, types, world);
    free(one); free(zero); free(types); free(s); free(r); free(d);
}
