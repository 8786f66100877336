/* A C library that initialises MPI itself, as PETSc's PetscInitialize
 * does, for an application that never imports mpi4py.MPI (c_init.py). */
#include <mpi.h>
#include <stddef.h>

static int initialised_here = 0;

/* Initialise MPI (unless done already); returns this rank. */
int start(void)
{
    int done = 0, provided, rank;
    MPI_Initialized(&done);
    if (!done) {
        MPI_Init_thread(NULL, NULL, MPI_THREAD_FUNNELED, &provided);
        initialised_here = 1;
    }
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    return rank;
}

/* A ring exchange and a sum over the world; returns the sum. */
double ring(double x)
{
    int rank, size;
    double left, total;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Sendrecv(&x, 1, MPI_DOUBLE, (rank + 1) % size, 3, &left, 1, MPI_DOUBLE,
                 (rank + size - 1) % size, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    MPI_Allreduce(&left, &total, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    return total;
}

/* Finalise MPI if this library initialised it. */
void finish(void)
{
    if (initialised_here)
        MPI_Finalize();
}
