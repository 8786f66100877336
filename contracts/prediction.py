"""The prediction file: written by ``python -m netsim``, read here only.

``prediction/NAME.json`` (docs/FILES.md) holds:

``predicted_time`` (s)
    the latest rank's finish, from MPI initialisation (with
    ``variability``: in the median sample);
``platform``
    the platform as simulated (every parameter, defaults filled in);
``ranks``
    one record per rank: ``rank``, ``computation``, ``communication``,
    ``waiting``, ``finish`` (s);
``summary``
    per quantity of ``ranks``, its ``mean`` and ``max`` (s);
``simulation``
    ``events``, ``seconds`` (the engine's wall time), ``events_per_second``;
``input``, ``compute``, ``warnings``
    the trace simulated, where the computation times came from, and every
    warning the trace carried (calls the tracer could not see, a replay on
    a busy node, ...);
``band`` (s; optional)
    ``[low, high]``: the predicted time with every computation span at the
    least and at the most it was measured to take (replay.expand's ``low``
    and ``high``: a busy replay node, the spread of repeats); with
    ``variability``, the 5th to 95th percentile of the samples.  Two
    platforms whose bands overlap cannot be told apart by this prediction.
``links`` (optional)
    present when the platform has a topology (netsim/topology.py): its
    busiest links, at most 20, busiest first, each ``link`` (a name such
    as ``leaf 3 up to spine 1``), ``busy`` (s: the time it carried a
    message) and ``load`` (busy over predicted_time);
``variability`` (optional)
    present when the run was sampled (netsim/variability.py):
    ``samples``, ``seed``, ``generator``, ``representatives`` (per
    representative its ``core_factors``, ``sigma_run``, ``sigma_span``,
    ``rounds``: the distribution sampled), ``times`` (every sample's
    predicted time, in sample order) and ``median_sample`` (the sample
    whose ranks and time are the prediction's).
"""
from __future__ import annotations

import json
import math
import os

QUANTITIES = ("computation", "communication", "waiting", "finish")
BUSIEST_LINKS = 20


class PredictionError(ValueError):
    """A prediction file that is missing, damaged or inconsistent."""


def prediction_json(res, platform, extra: dict | None = None) -> dict:
    """The prediction of a simulation result (netsim.predict.Result) as a dict."""
    pr = res.ranks
    ranks = [{"rank": int(r), **{k: float(v) for k, v in zip(QUANTITIES, q)}}
             for r, *q in zip(pr["rank"], *(pr[k] for k in QUANTITIES))]
    out = {"predicted_time": res.predicted_time, "platform": platform.describe(),
           "ranks": ranks,
           "summary": {k: {"mean": float(pr[k].mean()), "max": float(pr[k].max())}
                       for k in QUANTITIES},
           "simulation": {"events": res.events, "seconds": res.seconds,
                          "events_per_second": res.events / res.seconds if res.seconds else None}}
    if res.links is not None:
        top = res.links.head(BUSIEST_LINKS)
        out["links"] = [{"link": str(n), "busy": float(b), "load": float(u)}
                        for n, b, u in zip(top["link"], top["busy"], top["load"])]
    if extra:
        out.update(extra)
    return out


def write_prediction(path: str, prediction: dict) -> None:
    """Write ``prediction`` to ``path`` (atomically: a reader never sees half a file)."""
    from contracts.output import write_json
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    write_json(path, prediction)


def read_prediction(path: str) -> dict:
    """The checked prediction: the keys above, a finite non-negative time,
    one record per rank with every quantity."""
    try:
        with open(path) as f:
            d = json.load(f)
    except (OSError, ValueError, UnicodeDecodeError) as e:
        raise PredictionError(f"{path}: cannot read prediction ({e})") from None
    if not isinstance(d, dict):
        raise PredictionError(f"{path}: not a prediction (a JSON object is expected)")
    for key in ("predicted_time", "platform", "ranks", "summary"):
        if key not in d:
            raise PredictionError(f"{path}: missing {key!r} (write it with `python -m netsim`)")
    t = d["predicted_time"]
    if not isinstance(t, (int, float)) or not math.isfinite(t) or t < 0:
        raise PredictionError(f"{path}: predicted_time must be a finite number >= 0, not {t!r}")
    if not isinstance(d["ranks"], list) or not d["ranks"]:
        raise PredictionError(f"{path}: ranks must be a non-empty list")
    for i, r in enumerate(d["ranks"]):
        if not isinstance(r, dict) or type(r.get("rank")) is not int or r["rank"] != i or any(
                not _seconds(r.get(q)) for q in QUANTITIES):
            raise PredictionError(f"{path}: ranks[{i}] must be rank {i} with "
                                  f"{', '.join(QUANTITIES)} in seconds (finite, >= 0)")
    if max(r["finish"] for r in d["ranks"]) > t * (1 + 1e-9) + 1e-12:
        raise PredictionError(f"{path}: a rank finishes after predicted_time {t}")
    if not isinstance(d.setdefault("warnings", []), list):
        raise PredictionError(f"{path}: warnings must be a list")
    links = d.get("links", [])
    if not isinstance(links, list) or not all(
            isinstance(k, dict) and isinstance(k.get("link"), str) and _seconds(k.get("busy"))
            and _seconds(k.get("load")) for k in links):
        raise PredictionError(f"{path}: links must be a list of {{link, busy, load}} "
                              f"(a name, seconds, a fraction)")
    band = d.setdefault("band", [t, t])
    if not (isinstance(band, list) and len(band) == 2 and all(_seconds(b) for b in band)
            and band[0] <= t * (1 + 1e-9) + 1e-12 and band[1] >= t * (1 - 1e-9) - 1e-12):
        raise PredictionError(f"{path}: band must be [low, high] around predicted_time {t}")
    return d


def _seconds(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) \
        and v >= 0
