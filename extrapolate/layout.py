"""Where each rank stands: its coordinates in the application's process grid.

A trace whose application made one Cartesian communicator over all the
world's ranks (``topology.parquet``) is laid out on that grid; any other
trace on a ring of the world ranks in order.  Peers are then offsets in
grid coordinates, and a rank's *position class* says, per dimension,
whether it sits at the low edge, the high edge or inside: the ranks of one
class make the same calls to the same relative peers in a regular code,
whatever N.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np


class ExtrapolationError(Exception):
    """Traces that cannot be extrapolated; the message names the trace,
    the rank, the event and what disagrees."""


@dataclass(frozen=True)
class Layout:
    """A process grid: ``dims`` (row-major, as MPI's Cartesian ranks) and
    ``periods``; ``grid_comm``: the trace's id of the Cartesian
    communicator, or None for the world ring."""
    dims: tuple[int, ...]
    periods: tuple[bool, ...]
    grid_comm: int | None = None

    @property
    def size(self) -> int:
        return int(np.prod(self.dims))

    def coords(self, ranks) -> np.ndarray:
        """Coordinates of world ranks: one row per rank."""
        return np.stack(np.unravel_index(np.asarray(ranks, np.int64), self.dims), axis=1)

    def offsets(self, ranks, peers) -> np.ndarray:
        """Coordinate offsets from each rank to its peer (rows), the shorter
        way round along a periodic dimension."""
        d = self.coords(peers) - self.coords(ranks)
        for j, (n, per) in enumerate(zip(self.dims, self.periods)):
            if per:
                d[:, j] = (d[:, j] + n // 2) % n - n // 2
        return d

    def ranks_at(self, ranks, offsets) -> np.ndarray:
        """The world ranks at ``offsets`` from ``ranks``; -1 where that
        falls off a non-periodic edge."""
        c = self.coords(ranks) + np.asarray(offsets, np.int64)
        off = np.zeros(len(c), bool)
        for j, (n, per) in enumerate(zip(self.dims, self.periods)):
            if per:
                c[:, j] %= n
            else:
                off |= (c[:, j] < 0) | (c[:, j] >= n)
        c[off] = 0
        r = np.ravel_multi_index(tuple(c.T), self.dims)
        return np.where(off, -1, r)

    def position_classes(self, ranks) -> list[str]:
        """Per rank, its position class: per dimension ``lo`` (first),
        ``hi`` (last), ``in`` (between) or ``all`` (a dimension of one),
        joined with ``,``.  Periodic dimensions too: a ring code may still
        treat its ends apart (the world ring is only assumed periodic)."""
        c = self.coords(ranks)
        cols = []
        for j, n in enumerate(self.dims):
            x = c[:, j]
            if n == 1:
                cols.append(np.full(len(x), "all"))
            else:
                cols.append(np.where(x == 0, "lo", np.where(x == n - 1, "hi", "in")))
        return [",".join(t) for t in zip(*cols)]

    def neighbours(self, ranks) -> tuple[list, list]:
        """Per rank, the source and destination lists MPI's Cart_shift by
        one gives along each dimension in turn (-1: none)."""
        ranks = np.asarray(ranks, np.int64)
        cols = []
        for j in range(len(self.dims)):
            step = np.zeros((len(ranks), len(self.dims)), np.int64)
            step[:, j] = 1
            cols += [self.ranks_at(ranks, -step), self.ranks_at(ranks, step)]
        lists = np.stack(cols, axis=1).tolist()
        return lists, lists


def layout_of(trace) -> Layout:
    """The process grid of a loaded trace: its Cartesian communicator over
    every world rank, or the world ring.  A grid whose coordinates are not
    the row-major order of the world ranks (``reorder=True`` honoured by
    MPI) is refused: its peers would not follow from N."""
    n = trace.size
    topo = trace.topology
    grids = []
    for comm, g in topo.groupby("comm"):
        dims = g["dims"].iloc[0]
        if dims is not None and len(dims) and len(g) == n and int(np.prod(dims)) == n:
            grids.append((int(comm), g.sort_values("rank")))
    if not grids:
        return Layout((n,), (True,))
    comm, g = grids[0]
    dims = tuple(int(x) for x in g["dims"].iloc[0])
    periods = tuple(bool(x) for x in g["periods"].iloc[0])
    lay = Layout(dims, periods, comm)
    want = lay.coords(g["rank"].to_numpy())
    got = np.array([list(c) for c in g["coords"]], np.int64)
    if not np.array_equal(want, got):
        bad = int(g["rank"].iloc[int(np.argmax((want != got).any(axis=1)))])
        raise ExtrapolationError(
            f"{trace.path}: rank {bad}: its Cartesian coordinates are not the row-major "
            f"order of world ranks (the grid was reordered): peers would not follow from N")
    return lay


def grid_dims(n: int, like: Layout, fixed: tuple[int, ...] = ()) -> tuple[int, ...]:
    """The grid of ``n`` ranks with ``like``'s number of dimensions, as
    this MPI library's MPI_Dims_create balances it (implementations
    differ on some N: the small traces' grids are checked against it);
    ``fixed``: per axis the extent the application fixed (0: free), as a
    slab decomposition keeps all but one axis at 1."""
    if len(like.dims) == 1:
        return (n,)
    from mpi4py import MPI  # here only: initialising MPI costs a moment
    return tuple(int(x) for x in MPI.Compute_dims(n, list(fixed) or len(like.dims)))
