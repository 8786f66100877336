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

/* Group calls on the world's group (local: no events), as PETSc makes to
 * tell its own rank apart: a digest of their answers, which a replay must
 * give back from the logged communicator, not from its one-process world. */
long long groups(int world_handle)
{
    MPI_Comm world = (MPI_Comm)world_handle;
    MPI_Group g, self, a, b, u, in, diff, ri, re;
    int n, me, mine, zero = 0, first[1] = {0};
    MPI_Comm_group(world, &g);
    MPI_Comm_group(MPI_COMM_SELF, &self);
    MPI_Group_size(g, &n);
    MPI_Group_rank(g, &me);
    MPI_Group_translate_ranks(self, 1, &zero, g, &mine);
    MPI_Group_incl(g, 1, first, &a);
    MPI_Group_excl(g, 1, first, &b);
    MPI_Group_union(b, a, &u);
    MPI_Group_intersection(u, b, &in);
    MPI_Group_difference(u, b, &diff);
    int range[1][3] = {{n - 1, 0, -2}};
    MPI_Group_range_incl(g, 1, range, &ri);
    MPI_Group_range_excl(g, 1, range, &re);
    int su, si, sd, sri, sre, ur, rir, cmp, ccmp, last = n - 1, last_in_u;
    MPI_Group_size(u, &su);
    MPI_Group_size(in, &si);
    MPI_Group_size(diff, &sd);
    MPI_Group_size(ri, &sri);
    MPI_Group_size(re, &sre);
    MPI_Group_rank(u, &ur);
    MPI_Group_rank(ri, &rir);
    MPI_Group_translate_ranks(g, 1, &last, u, &last_in_u);
    MPI_Group_compare(g, u, &cmp);
    MPI_Comm_compare(world, world, &ccmp);
    MPI_Group *all[] = {&g, &self, &a, &b, &u, &in, &diff, &ri, &re};
    for (int i = 0; i < 9; i++)
        MPI_Group_free(all[i]);
    long long digest = 0;
    int parts[] = {n, me, mine, su, si, sd, sri, sre, ur, rir, last_in_u, cmp, ccmp};
    for (int i = 0; i < 13; i++)
        digest = digest * 31 + (parts[i] + 7);
    return digest;
}

/* Waitsome on requests that are all null: MPI says MPI_UNDEFINED, and a
 * replay must say the same (the log holds a completion of none). */
int waitsome_of_nulls(void)
{
    MPI_Request r[2] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL};
    int out = 0, idx[2];
    MPI_Waitsome(2, r, &out, idx, MPI_STATUSES_IGNORE);
    return out == MPI_UNDEFINED ? -1 : out;
}
