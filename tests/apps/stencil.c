/* A plain C MPI program (no Python): a 1-D Jacobi stencil on a periodic
 * Cartesian communicator, halo exchange by Irecv/Isend/Waitall, a residual
 * Allreduce every 10 steps.  Prints the final residual on rank 0.
 *
 *     stencil CELLS STEPS */
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int n = argc > 1 ? atoi(argv[1]) : 100000, steps = argc > 2 ? atoi(argv[2]) : 50;
    int p, dims[1] = {0}, periods[1] = {1}, me, left, right;
    MPI_Comm cart;
    MPI_Comm_size(MPI_COMM_WORLD, &p);
    MPI_Dims_create(p, 1, dims);
    MPI_Cart_create(MPI_COMM_WORLD, 1, dims, periods, 0, &cart);
    MPI_Comm_rank(cart, &me);
    MPI_Cart_shift(cart, 0, 1, &left, &right);
    double *u = calloc((size_t)n + 2, sizeof(double)), *v = calloc((size_t)n + 2, sizeof(double));
    for (int i = 1; i <= n; i++)
        u[i] = sin(0.001 * (i + (double)me * n));
    double res = 0;
    for (int s = 0; s < steps; s++) {
        MPI_Request r[4];
        MPI_Irecv(&u[0], 1, MPI_DOUBLE, left, 0, cart, &r[0]);
        MPI_Irecv(&u[n + 1], 1, MPI_DOUBLE, right, 1, cart, &r[1]);
        MPI_Isend(&u[n], 1, MPI_DOUBLE, right, 0, cart, &r[2]);
        MPI_Isend(&u[1], 1, MPI_DOUBLE, left, 1, cart, &r[3]);
        MPI_Waitall(4, r, MPI_STATUSES_IGNORE);
        double local = 0;
        for (int i = 1; i <= n; i++) {
            v[i] = 0.5 * (u[i - 1] + u[i + 1]);
            local += (v[i] - u[i]) * (v[i] - u[i]);
        }
        double *t = u; u = v; v = t;
        if (s % 10 == 9)
            MPI_Allreduce(&local, &res, 1, MPI_DOUBLE, MPI_SUM, cart);
    }
    if (me == 0)
        printf("residual %.12e\n", res);
    MPI_Comm_free(&cart);
    free(u);
    free(v);
    MPI_Finalize();
    return 0;
}
