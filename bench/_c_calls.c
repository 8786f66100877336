/* The C half of bench/_calls.py: the same loops, with their MPI calls made
 * below Python (what instrument trace --c-calls records in the PMPI shim). */
#include <mpi.h>

void c_loop(int kind, int handle, int n)
{
    MPI_Comm w = (MPI_Comm)handle;
    int r, flag;
    double buf = 0, out = 0;
    MPI_Request q[2];
    MPI_Comm_rank(w, &r);
    if (kind == 0) {                      /* ping-pong with the other rank */
        for (int i = 0; i < n / 2; i++) {
            if (r == 0) {
                MPI_Send(&buf, 1, MPI_DOUBLE, 1, 0, w);
                MPI_Recv(&buf, 1, MPI_DOUBLE, 1, 0, w, MPI_STATUS_IGNORE);
            } else {
                MPI_Recv(&buf, 1, MPI_DOUBLE, 0, 0, w, MPI_STATUS_IGNORE);
                MPI_Send(&buf, 1, MPI_DOUBLE, 0, 0, w);
            }
        }
    } else if (kind == 1) {               /* Irecv + Isend + Waitall to self */
        for (int i = 0; i < n / 3; i++) {
            MPI_Irecv(&out, 1, MPI_DOUBLE, r, 0, w, &q[0]);
            MPI_Isend(&buf, 1, MPI_DOUBLE, r, 0, w, &q[1]);
            MPI_Waitall(2, q, MPI_STATUSES_IGNORE);
        }
    } else {                              /* Test of a receive nobody matches */
        MPI_Irecv(&out, 1, MPI_DOUBLE, MPI_ANY_SOURCE, 98, w, &q[0]);
        for (int i = 0; i < n; i++)
            MPI_Test(&q[0], &flag, MPI_STATUS_IGNORE);
        MPI_Cancel(&q[0]);
        MPI_Wait(&q[0], MPI_STATUS_IGNORE);
    }
}
