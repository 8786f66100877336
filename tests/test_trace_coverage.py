"""Every covered mpi4py operation appears in the trace with the right op,
peer (world rank), bytes, tag and communicator (tests/apps/coverage.py)."""
import pytest

EXPECTED_OPS = """
init finalize send bsend ssend rsend recv isend ibsend issend irsend irecv
sendrecv sendrecv_replace isendrecv isendrecv_replace probe iprobe mprobe improbe
mrecv imrecv send_init bsend_init ssend_init recv_init start request_free
wait test waitany testany waitall testall waitsome testsome
barrier bcast gather gatherv scatter scatterv allgather allgatherv alltoall
alltoallv alltoallw reduce allreduce reduce_scatter_block reduce_scatter scan exscan
neighbor_allgather neighbor_allgatherv neighbor_alltoall neighbor_alltoallv
neighbor_alltoallw ibarrier ibcast iallreduce igather iallgather ialltoallv ireduce
iscan iexscan ireduce_scatter_block iscatter ialltoall ineighbor_allgather
allreduce_init bcast_init comm_split comm_dup comm_idup comm_create comm_create_group
comm_create_from_group comm_split_type cart_create cart_sub graph_create
dist_graph_create dist_graph_create_adjacent intercomm_create intercomm_merge comm_free
win_create win_fence win_put win_free
""".split()


@pytest.fixture(scope="module")
def tr(coverage_trace):
    return coverage_trace[0]


def rows(tr, rank, op, **match):
    e = tr.events
    sel = e[(e["rank"] == rank) & (e["op"] == op)]
    for k, v in match.items():
        sel = sel[sel[k] == v]
    return sel


def one(tr, rank, op, **match):
    sel = rows(tr, rank, op, **match)
    assert len(sel) == 1, f"rank {rank} {op} {match}: {len(sel)} rows\n{sel}"
    return sel.iloc[0]


def members(tr, comm):
    return list(tr.comms.set_index("comm").loc[comm, "members"])


def test_every_operation_is_traced(tr, coverage_trace):
    assert "rank 3 coverage done" in coverage_trace[1].stdout
    seen = set(tr.events["op"])
    missing = [op for op in EXPECTED_OPS if op not in seen]
    assert not missing, f"ops missing from the trace: {missing}"
    assert tr.meta["complete"] and tr.meta["size"] == 4
    # seq is 0..n-1 per rank and events are ordered by (rank, seq)
    for _r, g in tr.events.groupby("rank"):
        assert list(g["seq"]) == list(range(len(g)))
    assert set(tr.events["comm"][tr.events["comm"] >= 0]) <= set(tr.comms["comm"])


def test_blocking_point_to_point(tr):
    e = one(tr, 1, "send", tag=10)
    assert (e.peer, e.sbytes, e.rbytes) == (2, 64, 0)
    assert members(tr, e.comm) == [0, 1, 2, 3]
    e = one(tr, 1, "recv", tag=10)
    assert (e.peer, e.rbytes, e.wildcard) == (0, 64, False)
    assert one(tr, 1, "bsend", tag=11).sbytes == 64
    assert one(tr, 1, "ssend", tag=12).sbytes == 32
    assert one(tr, 1, "rsend", tag=13).peer == 2
    assert one(tr, 1, "send", tag=14).sbytes > 0          # pickled dict
    assert one(tr, 1, "recv", tag=14).rbytes == one(tr, 0, "send", tag=14).sbytes


def test_wildcard_receive_records_matched_source_and_tag(tr):
    sel = rows(tr, 0, "recv", wildcard=True)
    assert sorted(zip(sel.peer, sel.tag)) == [(1, 21), (2, 22), (3, 23)]
    # an Irecv(ANY_SOURCE) gets its matched source at completion
    e = one(tr, 1, "irecv", tag=32)
    assert e.wildcard and e.peer == 0 and e.rbytes == 64


def test_nonblocking_and_completions(tr):
    ir, isd = one(tr, 1, "irecv", tag=30), one(tr, 1, "isend", tag=30)
    assert (ir.peer, ir.rbytes, isd.peer, isd.sbytes) == (0, 64, 2, 64)
    done = [set(x) for x in rows(tr, 1, "waitall").reqs]
    assert {ir.req, isd.req} in done
    # every request created is completed exactly once
    e = tr.events[tr.events["rank"] == 1]
    created = set(e.req[e.req >= 0])
    completed = [q for qs in e.reqs for q in qs]
    assert len(completed) == len(set(completed))
    assert created == set(completed), created ^ set(completed)
    # polls that completed nothing are folded into the next call: the one
    # testall left completed the requests
    polls = rows(tr, 1, "testall")
    assert len(polls) == 1 and len(polls.reqs.iloc[0]) == 2
    assert (e["polls"] >= 0).all() and (e["poll_cpu"] >= 0).all()
    assert one(tr, 1, "irecv", tag=34).rbytes > 0         # lower-case irecv: pickled size


def test_sendrecv_family(tr):
    e = one(tr, 1, "sendrecv", tag=40)
    assert (e.peer, e.rpeer, e.rtag, e.sbytes, e.rbytes) == (2, 0, 40, 64, 64)
    e = one(tr, 1, "sendrecv_replace", tag=41)
    assert (e.peer, e.rpeer, e.sbytes, e.rbytes) == (2, 0, 64, 64)
    e = one(tr, 1, "isendrecv", tag=43)
    assert (e.peer, e.rpeer, e.rtag) == (2, 0, 43)


def test_probes_and_matched_receives(tr):
    e = one(tr, 1, "probe", tag=50)
    assert (e.peer, e.rbytes) == (0, 16)
    found = rows(tr, 1, "iprobe", tag=51)     # the poll that found the message, alone
    assert len(found) == 1 and found.iloc[0].peer == 0 and found.iloc[0].rbytes == 24
    m = one(tr, 1, "mrecv", tag=52)
    assert (m.peer, m.rbytes) == (0, 32)
    m = one(tr, 1, "imrecv", tag=54)
    assert (m.peer, m.rbytes) == (0, 40)


def test_persistent_requests(tr):
    starts = rows(tr, 1, "start", tag=60)
    assert len(starts) == 6
    assert sorted(set(starts.started)) == ["irecv", "isend"]
    assert set(starts[starts.started == "isend"].peer) == {2}
    assert set(starts[starts.started == "irecv"].rbytes) == {64}
    assert set(rows(tr, 1, "start", tag=61).started) == {"irecv", "ibsend", "issend"}
    coll = rows(tr, 1, "start", started="iallreduce")
    assert len(coll) == 2 and set(coll.sbytes) == {64}
    assert one(tr, 1, "start", started="ibcast").peer == 2


def test_collectives(tr):
    b = rows(tr, 1, "bcast")
    root1 = b[b.peer == 1].iloc[0]
    assert (root1.sbytes, root1.rbytes) == (64, 0)        # rank 1 is the root
    assert rows(tr, 0, "bcast", peer=1).iloc[0].rbytes == 64
    g = rows(tr, 0, "gather", peer=0)
    assert g.iloc[0].rbytes == 256 and g.iloc[0].sbytes == 64
    gv = one(tr, 0, "gatherv")
    assert list(gv.rcounts) == [8, 16, 24, 32] and gv.sbytes == 8
    av = one(tr, 2, "alltoallv")
    assert list(av.scounts) == [8, 16, 24, 32] and list(av.rcounts) == [24] * 4
    assert list(one(tr, 2, "alltoallw").scounts) == [8] * 4
    assert one(tr, 1, "reduce", sbytes=64).peer == 3
    ip = rows(tr, 1, "allreduce", comm=0)
    assert (ip.sbytes == 64).sum() >= 2                   # IN_PLACE counts as 64 sent
    for op in ("ibarrier", "ibcast", "iallreduce"):
        assert one(tr, 1, op).req >= 0
    assert rows(tr, 1, "allgather").rbytes.max() == 256
    # [data, count, datatype]: count per block, so 3 doubles to each of 4
    assert {256, 96} <= set(rows(tr, 1, "alltoall").sbytes)
    assert rows(tr, 1, "alltoall", sbytes=96).iloc[0].rbytes == 96
    assert rows(tr, 1, "allgather", sbytes=24).iloc[0].rbytes == 96
    # IN_PLACE is flagged: no local copy of the own block to simulate
    assert list(ip["flags"] & 32)[:2] == [0, 32]      # Allreduce(a, b), then in place
    # collectives of objects are flagged (mpi4py's own algorithm below), the
    # buffer forms are not
    for op in ("bcast", "allgather", "allreduce"):
        objects = rows(tr, 1, op)["flags"] & 64
        assert (objects != 0).any() and (objects == 0).any(), op
    assert ((rows(tr, 1, "iallreduce")["flags"] & 64) == 0).all()


def test_derived_communicators_name_world_ranks(tr):
    e = one(tr, 1, "send", tag=70)
    assert e.peer == 3 and members(tr, e.comm) == [1, 3]
    # the same communicator has the same id on every member
    for how in ("comm_create", "comm_create_group", "comm_create_from_group",
                "intercomm_merge", "cart_create"):
        sel = tr.comms[tr.comms.how == how]
        assert len(sel) == 1, f"{how}: {len(sel)} ids for one communicator"
    ev = tr.events
    new0 = ev[(ev.op == "comm_create_from_group")].newcomm
    assert len(set(new0)) == 1
    # intercommunicator: peers are ranks of the remote group
    e = one(tr, 1, "send", tag=81)
    assert e.peer == 0
    ic = tr.comms.set_index("comm").loc[e.comm]
    assert ic.kind == "Intercomm"
    assert sorted([list(ic.members), list(ic.remote)]) == [[0, 2], [1, 3]]


def test_topology_tables(tr):
    t = tr.topology
    cart = tr.comms[tr.comms.how == "cart_create"].comm.iloc[0]
    row = t[(t.comm == cart) & (t["rank"] == 1)].iloc[0]
    assert list(row.dims) == [2, 2] and list(row.coords) == [0, 1]
    # dim 0 periodic (neighbour 3 both ways), dim 1 not: left 0, right none
    assert list(row.sources) == [3, 3, 0, -1]
    ring = tr.comms[tr.comms.how == "dist_graph_create_adjacent"].comm.iloc[0]
    row = t[(t.comm == ring) & (t["rank"] == 1)].iloc[0]
    assert (list(row.sources), list(row.destinations)) == ([0], [2])
    e = one(tr, 1, "neighbor_allgather", comm=cart, sbytes=16)
    assert (e.sbytes, e.rbytes) == (16, 64)


def test_one_sided_calls_are_traced_with_targets_and_bytes(tr):
    """Windows are modelled now: nothing unmodelled, the Put's target (the
    next rank) and bytes in the trace, the window's communicator as comm."""
    assert tr.meta["unmodelled"] == {}
    e = one(tr, 1, "win_put")
    assert (e.peer, e.sbytes, e.rbytes, e.comm) == (2, 8, 0, 0)
