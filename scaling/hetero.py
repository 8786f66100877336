"""Execution-time models of heterogeneous clusters (NP-T) and the
optimal configuration.

A cluster is made of sub-clusters G_i of identical processing elements;
P_i PEs of G_i are used, each running M_i processes; P = sum P_i M_i.  For
every (sub-cluster, M) an NP-T model is fitted from measurements of that
sub-cluster (columns ``cluster``, ``m``, ``size``, ``procs`` = processes,
``time``).  The work is spread over all P processes, so sub-cluster i
finishes after T_i = NPT_{i, M_i}(N, P); the whole run takes T = max of
T_i over the used sub-clusters.  The optimum for a given N is found by
evaluating every allowed (P_i, M_i) combination (vectorised), once with
NNLS models and once with plain least squares.
"""
from __future__ import annotations

import itertools

import numpy as np
import pandas as pd

from .models import NPT


def parse_allowed(specs: list[str]) -> dict:
    """'A:P=0-4:M=1,2' -> {'A': ([0..4], [1, 2])}."""
    out = {}
    for s in specs:
        try:
            name, *kv = s.split(":")
            d = dict(x.split("=") for x in kv)
            lo, _, hi = d["P"].partition("-")
            ps = list(range(int(lo), int(hi or lo) + 1))
            ms = [int(x) for x in d.get("M", "1").split(",")]
        except (ValueError, KeyError):
            raise ValueError(f"bad sub-cluster spec {s!r}: use NAME:P=LO-HI:M=1,2") from None
        out[name] = (ps, ms)
    return out


def fit_models(df: pd.DataFrame, nonneg: bool) -> dict:
    """(cluster, m) -> fitted NP-T model."""
    return {(c, int(m)): NPT(nonneg).fit(g) for (c, m), g in df.groupby(["cluster", "m"])}


def configurations(allowed: dict):
    """Every allowed combination: list of {cluster: (P_i, M_i)} with some P_i > 0."""
    names = list(allowed)
    choices = [[(p, m) for p in allowed[n][0] for m in (allowed[n][1] if p else [0])]
               for n in names]
    for combo in itertools.product(*choices):
        if any(p for p, _ in combo):
            yield dict(zip(names, combo))


def predict(models: dict, configs: list, size: float) -> np.ndarray:
    """T = max_i T_i for each configuration."""
    out = np.empty(len(configs))
    for k, cfg in enumerate(configs):
        P = sum(p * m for p, m in cfg.values())
        ts = [models[(c, m)].predict(pd.DataFrame({"procs": [P], "size": [size]}))[0]
              for c, (p, m) in cfg.items() if p > 0]
        out[k] = max(ts)
    return out


def optimum(models: dict, allowed: dict, size: float):
    configs = list(configurations(allowed))
    missing = {(c, m) for cfg in configs for c, (p, m) in cfg.items() if p and
               (c, m) not in models}
    if missing:
        raise ValueError(f"no measurements for sub-cluster/M {sorted(missing)}")
    t = predict(models, configs, size)
    k = int(np.argmin(t))
    return configs[k], float(t[k]), len(configs)


def label(cfg: dict) -> str:
    return " ".join(f"{c}:P={p},M={m}" for c, (p, m) in cfg.items() if p)
