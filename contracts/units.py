"""Times written for people: engineering units, three significant digits.

The files between stages keep seconds; what a person reads (the report's
tables, the command lines' summaries) says ``69.0 us`` or ``14.0 ms``
rather than ``6.904e-05`` or ``0.01402``, one unit per number.
"""
from __future__ import annotations

import math

_UNITS = ((1e-9, "ns"), (1e-6, "us"), (1e-3, "ms"), (1.0, "s"))


def seconds(v) -> str:
    """``v`` seconds as ``123 ns`` ... ``45.6 s``, ``12.3 min``, ``2.50 h``;
    ``-`` for None or NaN.  Three significant digits, no exponent."""
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "-"
    v = float(v)
    if math.isinf(v):
        return f"{'-' if v < 0 else ''}inf s"
    a = abs(v)
    if a == 0:
        return "0 s"
    if a >= 1000:
        scale, unit = (60.0, "min") if a < 36000 else (3600.0, "h")
    else:
        scale, unit = next(((s, u) for s, u in reversed(_UNITS) if a >= s), _UNITS[0])
    x = v / scale
    # three significant digits: 1.23, 12.3, 123; rounding may carry to 1000
    digits = max(0, 2 - int(math.floor(math.log10(abs(x)))))
    text = f"{x:.{digits}f}"
    if abs(float(text)) >= 1000 and unit in ("ns", "us", "ms"):
        return seconds(math.copysign(1000 * scale, v))
    return f"{text} {unit}"
