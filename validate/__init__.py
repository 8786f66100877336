"""Validation: run the application for real and compare with a prediction.

``python -m validate --prediction P.json -o V.json -- app.py [args]`` runs
the untraced application (each rank under ``python -m validate.clock``,
which times it from MPI initialisation to its end, as a prediction covers)
and writes predicted against measured.  Only the standard library is
imported here: ``validate.clock`` runs in every rank before the
application.
"""
from .run import measure

__all__ = ["measure"]
