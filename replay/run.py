"""Replay runners: one rank in this process, or several as subprocesses."""
from __future__ import annotations

import csv
import os
import subprocess
import sys
import time

from instrument.msglog import LogError, LogReader, log_path


class ReplayError(Exception):
    """A replay that cannot run or did not finish (rank named)."""


def replay_rank(rank: int, size: int | None, log_dir: str, out_dir: str,
                target: list[str], mode: str) -> str:
    """Run the application as ``rank`` from its log; write OUT/rank<R>.csv.

    Nothing heavy (numpy, pandas) is imported before the application: its
    start-up span must cost what it cost in the traced run.

    Columns: ``seq`` (call index, as in the trace), ``op``, ``comp`` (wall
    seconds of computation before the call, on this node), ``cpu``; both
    less the replay's own per-call overhead (:func:`replay.fake.overhead`)."""
    from instrument.run import _run_target
    log = LogReader(log_path(log_dir, rank))
    h = log.header
    if h.get("rank") != rank:
        raise LogError(f"{log.path}: this log is of rank {h.get('rank')}, not {rank}")
    if size is not None and h.get("size") != size:
        raise LogError(f"{log.path}: recorded with {h.get('size')} ranks, not --size {size}")
    from instrument.steady import steady_malloc
    steady_malloc()
    from . import fake
    rp = fake.install(log, rank)
    status, code = _run_target(target, mode)
    if code != 0:
        raise ReplayError(f"rank {rank}: the application {status} during replay "
                          f"(at log record {log.index})")
    fake.finish()
    # the replay's own cost between calls is not the application's computation
    ow, oc = fake.overhead()
    rows = [(seq, op, max(c - ow, 0.0), max(u - oc, 0.0)) for seq, op, c, u in rp.rows]
    print(f"replay: rank {rank}: {ow * 1e6:.2f} us of replay overhead per call taken out of "
          f"{len(rows)} computation spans", file=sys.stderr)
    os.makedirs(out_dir, exist_ok=True)
    path = os.path.join(out_dir, f"rank{rank}.csv")
    with open(path + ".tmp", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["rank", "seq", "op", "comp", "cpu"])
        w.writerows((rank, seq, op, repr(c), repr(u)) for seq, op, c, u in rows)
    os.replace(path + ".tmp", path)
    return path


def replay_many(ranks: list[int], size: int | None, log_dir: str, out_dir: str,
                target: list[str], mode: str, concurrent: int = 1, env=None) -> list[str]:
    """Replay each rank in its own process, ``concurrent`` at a time."""
    if concurrent < 1:
        raise ReplayError("--concurrent must be >= 1")
    todo = list(ranks)
    running: dict = {}
    done, failed = [], []
    t0 = time.time()
    tgt = (["-m"] if mode == "module" else ["-c"] if mode == "command" else []) + target
    while todo or running:
        while todo and len(running) < concurrent:
            r = todo.pop(0)
            cmd = [sys.executable, "-m", "replay", "--rank", str(r), "--log", log_dir,
                   "-o", out_dir] + (["--size", str(size)] if size else []) + tgt
            os.makedirs(out_dir, exist_ok=True)
            # the replayed rank's own output, for comparison with the host run's
            with open(os.path.join(out_dir, f"rank{r}.out"), "w") as out:
                running[r] = subprocess.Popen(cmd, env=env, stdout=out,
                                              stderr=subprocess.PIPE, text=True)
            print(f"replay: rank {r} started ({len(done) + len(running)}/{len(ranks)})",
                  file=sys.stderr, flush=True)
        time.sleep(0.05)
        for r, p in list(running.items()):
            if p.poll() is None:
                continue
            err = p.stderr.read()
            del running[r]
            if p.returncode == 0:
                done.append(os.path.join(out_dir, f"rank{r}.csv"))
                print(f"replay: rank {r} done ({len(done)}/{len(ranks)}, "
                      f"{time.time() - t0:.1f} s)", file=sys.stderr, flush=True)
            else:
                failed.append((r, err.strip().splitlines()[-1] if err.strip() else
                               f"exit code {p.returncode}"))
    if failed:
        raise ReplayError("; ".join(f"rank {r}: {msg}" for r, msg in failed))
    return done
