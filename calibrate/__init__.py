"""Calibration: measure the target's network, fit a platform file to it.

``calibrate.measure`` runs on the target under mpiexec (ping-pongs,
streams, copies, two-rank collectives); ``calibrate.fit`` turns one or
several measurement files into a platform description, alone or merged
into a hand-written template (``into_template``).
"""
from .fit import fit, gbs, into_template

__all__ = ["fit", "gbs", "into_template"]
