"""The optimal processor grid, with the source's two heuristics.

Candidates: every grid (g_1, ..., g_k) of the given dimensionality with
product <= the maximum processor count.  Array dimension j is distributed
over grid dimension j in blocks of ceil(n_j / g_j) elements.

* uniformity of an array on a grid = min over distributed dimensions of
  (fewest elements a processor gets / most elements a processor gets);
* heuristic 1: drop grids where some processor gets no elements of some
  array (uniformity 0) before predicting anything;
* grids are visited in order of decreasing uniformity;
* heuristic 2: grids that differ in one dimension only form a class, and
  inside a class the time changes regularly, so each class is walked (in
  decreasing uniformity) only to its first local minimum.  The classes are
  nested: for each value of the first grid dimension (walked the same way)
  the class of the remaining dimensions is searched for its local minimum,
  and the walk over the first dimension stops once these minima rise.  The
  best local minimum is the answer; it may miss the exhaustive optimum (the
  source reports 7x16 for an exhaustive 7x18), which ``--exhaustive``
  measures.

An *evaluator* gives the predicted time of a grid: the analytic Jacobi
model of the source's example (``jacobi``), the whole method (``workflow``: trace,
replay and simulate the application at each grid, which it takes as
``--grid AxB``), or a shell command template run per grid (``{grid}`` ->
"4x8", ``{procs}`` -> 32) printing seconds.  Efficiency = T(1 processor) / (p T(grid));
grids below the efficiency bound are not chosen.
"""
from __future__ import annotations

import math
import subprocess
from dataclasses import dataclass, field


def grids(dims: int, max_procs: int):
    """All grids of ``dims`` dimensions with product <= max_procs."""
    def rec(k, left):
        if k == 0:
            yield ()
            return
        for g in range(1, left + 1):
            for rest in rec(k - 1, left // g):
                yield (g,) + rest
    return list(rec(dims, max_procs))


def _counts(n: int, g: int):
    b = math.ceil(n / g)
    full = n // b
    rem = n - full * b
    sizes = [b] * full + ([rem] if rem else [])
    return sizes + [0] * (g - len(sizes))


def uniformity(shapes: list[tuple], grid: tuple) -> float:
    u = 1.0
    for shape in shapes:
        for n, g in zip(shape, grid):
            c = _counts(n, g)
            u = min(u, min(c) / max(c))
    return u


def jacobi_evaluator(shape, t_elem=1e-8, latency=7e-6, byte_time=4e-9, iters=1):
    """Compute the largest block, exchange its edges (the source's cluster figures)."""
    def f(grid):
        g_all = tuple(grid) + (1,) * (len(shape) - len(grid))   # undistributed: whole
        blocks = [math.ceil(n / g) for n, g in zip(shape, g_all)]
        work = t_elem * math.prod(blocks)
        halo = sum(2 * (latency + 8 * math.prod(b for k, b in enumerate(blocks) if k != d)
                        * byte_time) for d, g in enumerate(g_all) if g > 1)
        return iters * (work + halo)
    return f


def workflow_evaluator(configfile: str, platform: str, out: str, cores: int = 2):
    """The predicted time of each grid by the whole method: the workflow run
    with ``ranks`` = the grid's processes and ``--grid AxB`` appended to the
    application's arguments (the application must take it), on ``platform``
    (a platform's name in the config).  Each grid's results stay in
    ``out/grid_AxB``."""
    import os
    import sys

    import yaml
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    with open(configfile) as fh:
        base = yaml.safe_load(fh)
    snakemake = os.path.join(os.path.dirname(sys.executable), "snakemake")

    def f(grid):
        label = "x".join(map(str, grid))
        res = os.path.abspath(os.path.join(out, f"grid_{label}"))
        cfg = dict(base, ranks=math.prod(grid), results=res,
                   validate=dict(base.get("validate", {}), enabled=False))
        cfg["app"] = dict(base["app"], args=list(base["app"].get("args", []))
                          + ["--grid", label])
        os.makedirs(res, exist_ok=True)
        with open(os.path.join(res, "config.yaml"), "w") as c:
            yaml.safe_dump(cfg, c)
        p = subprocess.run([snakemake, "-c", str(cores), "--snakefile",
                            os.path.join(root, "Snakefile"), "--directory", root,
                            "--configfile", os.path.join(res, "config.yaml")],
                           capture_output=True, text=True)
        if p.returncode != 0:
            raise ValueError(f"grid {label}: the workflow failed (log: {res}/logs): "
                             f"{p.stderr.strip().splitlines()[-1:]}")
        from contracts.prediction import read_prediction
        return float(read_prediction(os.path.join(res, "prediction",
                                                  f"{platform}.json"))["predicted_time"])
    return f


def command_evaluator(template: str):
    def f(grid):
        cmd = template.format(grid="x".join(map(str, grid)), procs=math.prod(grid),
                              **{f"g{i}": g for i, g in enumerate(grid)})
        out = subprocess.run(cmd, shell=True, capture_output=True, text=True, check=True)
        return float(out.stdout.strip().split()[-1])
    return f


@dataclass
class Search:
    candidates: int = 0
    after_h1: int = 0
    evaluated_h2: int = 0
    best: tuple | None = None
    best_time: float = math.inf
    exhaustive_best: tuple | None = None
    exhaustive_time: float = math.inf
    evaluated_exhaustive: int = 0
    log: list = field(default_factory=list)


def search(shapes, dims: int, max_procs: int, evaluate, min_eff: float = 0.0,
           exhaustive: bool = False) -> Search:
    S = Search()
    cands = grids(dims, max_procs)
    S.candidates = len(cands)
    kept = [g for g in cands if uniformity(shapes, g) > 0]       # heuristic 1
    S.after_h1 = len(kept)
    cache = {}

    def T(g):
        if g not in cache:
            cache[g] = evaluate(g)
        return cache[g]
    t1 = T((1,) * dims)
    ok = lambda g, t: t1 / (math.prod(g) * t) >= min_eff

    kept_set = set(kept)

    def order(values, d):
        """Values of grid dimension d, most uniform distribution first."""
        return sorted(values, key=lambda v: (-min(uniformity([(sh[d],)], (v,))
                                                   for sh in shapes), v))

    def walk(prefix):                                             # heuristic 2
        """Local minimum over the class of grids starting with ``prefix``."""
        d = len(prefix)
        prev = None
        for v in order(range(1, max_procs // math.prod(prefix) + 1), d):
            g = prefix + (v,)
            if d + 1 < dims:
                found = walk(g)
            elif g in kept_set:
                t = T(g)
                found = (g, t if ok(g, t) else math.inf)
            else:
                continue
            if found is None:
                continue
            if prev is not None and found[1] > prev[1]:
                break
            prev = found
        return prev
    found = walk(())
    if found and math.isfinite(found[1]):
        S.best, S.best_time = found
    S.evaluated_h2 = len(cache)
    if exhaustive:
        for g in cands:
            t = T(g)
            if ok(g, t) and t < S.exhaustive_time:
                S.exhaustive_best, S.exhaustive_time = g, t
        S.evaluated_exhaustive = len(cands)
    return S
