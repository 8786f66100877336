"""validate.json: the one writer (python -m validate) and the one reader
(the report, the scaling study) of predicted against measured.

Keys (docs/FILES.md): ``platform``, ``ranks``, ``predicted`` (s),
``measured`` (s: the least of the runs), ``runs`` (s, each), ``wall``
(s, each whole command), ``command``, ``error`` ((predicted - measured) /
measured).
"""
from __future__ import annotations

import json
import math


class ValidationError(ValueError):
    """A validate.json that cannot be used (the file and the key named)."""


def write_validation(path: str, result: dict) -> None:
    """Write ``result`` (the keys above) to ``path``."""
    with open(path, "w") as f:
        json.dump(result, f, indent=1)


def _seconds(v) -> bool:
    return type(v) in (int, float) and math.isfinite(v) and v >= 0


def read_validation(path: str) -> dict:
    """validate.json, checked: a platform's name, a rank count, finite
    non-negative times (one per run), and the error they give."""
    try:
        with open(path) as f:
            v = json.load(f)
    except (OSError, ValueError) as e:
        raise ValidationError(f"{path}: cannot read: {e}") from None
    if not isinstance(v, dict):
        raise ValidationError(f"{path}: not a validation result")
    bad = [k for k, ok in (("platform", isinstance(v.get("platform"), str)),
                           ("ranks", type(v.get("ranks")) is int and v["ranks"] >= 1),
                           ("predicted", _seconds(v.get("predicted"))),
                           ("measured", _seconds(v.get("measured"))),
                           ("runs", isinstance(v.get("runs"), list) and bool(v["runs"])
                            and all(_seconds(x) for x in v["runs"])),
                           ("error", type(v.get("error")) in (int, float)
                            and math.isfinite(v["error"]))) if not ok]
    if bad:
        raise ValidationError(f"{path}: key(s) {', '.join(bad)} missing or not valid "
                              f"(written by python -m validate?)")
    return v
