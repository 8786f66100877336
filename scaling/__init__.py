"""Empirical scalability: extrapolation from small runs, the scalability
metric, heterogeneous clusters and the optimal processor grid
(docs/METHODS.md).

    python -m scaling fit DATA --train 'procs<=128' --predict 256,512   # auto model
    python -m scaling study --predictions P.json ... --predict 1024 -o DIR
    python -m scaling metric DATA
    python -m scaling hetero DATA --allowed A:P=0-4:M=1,2 B:P=0-8 --sizes 100,200
    python -m scaling grids --shape 10000x10000 --dims 1,2 --max-procs 64

Python API: models (:mod:`scaling.models`, fit/predict), the automatic
choice and intervals (:mod:`scaling.auto`), :func:`metric.metric`,
:mod:`scaling.hetero`, :func:`grids.search`.
"""
from .data import DataError, load, reduce, select
from .models import ABC, MODELS, NPT, PMNF, LogLinear, ShrunkLogLog, make

__all__ = ["load", "reduce", "select", "DataError", "ABC", "LogLinear", "ShrunkLogLog",
           "NPT", "PMNF", "make", "MODELS"]
