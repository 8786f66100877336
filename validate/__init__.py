"""Validation: run the application for real and compare with a prediction.

``python -m validate --prediction P.json -o V.json -- app.py [args]`` runs
the untraced application (each rank under ``python -m validate.clock``,
which times it from MPI initialisation to its end, as a prediction covers)
and writes predicted against measured.  Nothing is imported here until
used: ``validate.clock`` runs in every rank before the application.
"""
__all__ = ["measure"]


def __getattr__(name):
    # on first use: validate.clock runs in every rank before the application
    if name == "measure":
        from .run import measure
        return measure
    raise AttributeError(f"module 'validate' has no attribute {name!r}")
